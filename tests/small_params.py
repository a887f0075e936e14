"""The smallest values of the parameters that size an analysis's work, by parameter name (so a new
analysis or figure with such a parameter is sized too): for tests of the plumbing, not the numbers."""

SMALL = {
    "tokens": 60,
    "examples": 8,
    "max_iterations": 3,
    "samples": 3,
    "grid": "-1:1:3",
    "alphas": "0:1:3",
    "ts": "0:1:3",
    "resamples": 20,
    "groups": 4,
    "checkpoints": ["best"],
    "n": 4,
    "query_budget": 50,
    "texts": 16,
    "head_texts": 16,
    "head_steps": 2,
}


def small(parameters) -> dict:
    """The :data:`SMALL` values of the parameters ``parameters`` (objects with a ``name``) has."""
    return {k: v for k, v in SMALL.items() if k in {p.name for p in parameters}}
