"""robustkit: robustness and stability of adapter-based tuning vs full fine-tuning.

Train into a run store (``robustkit.train``, ``robustkit.sweep``), then read it as tidy
DataFrames::

    import robustkit
    runs = robustkit.load_runs("runs/")        # one row per run
    history = robustkit.load_history("runs/")  # one row per run x eval step x metric

    verdicts = robustkit.claims("runs/demo")  # each paper claim: agrees / contradicts / inconclusive
"""

from robustkit.store import load_gradnorms, load_history, load_runs


def claims(store=None, recipes=None, scale: str = "demo", include_failed: bool = False):
    """The verdict of each paper claim on the runs behind its figure (see
    :func:`robustkit.reproduce.claims`): a tidy DataFrame, one row per recipe x claim x cell."""
    from robustkit.reproduce import claims as judge

    return judge(store, recipes, scale=scale, include_failed=include_failed)


__all__ = ["load_runs", "load_history", "load_gradnorms", "claims"]
__version__ = "0.1.0"
