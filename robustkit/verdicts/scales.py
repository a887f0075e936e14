"""The scales a recipe's runs come at, smallest first.

- ``demo``: the embedded default, minutes per run on a laptop CPU (minilm-l6 on rt at He et
  al.'s low-resource size); the whole demo store trains in about 2 CPU-hours;
- ``cpu``: the headline claims sized to be decided on a 2-core machine: runs trained until they
  converge, runs per group from a pilot (the demo store) by the rule in ``recipes/README.md``,
  "CPU scale"; a recipe without a ``[cpu]`` section has no runs at it;
- ``paper``: the papers' models, tasks and hyperparameters (a GPU cluster).

Each scale's settings are a section of ``recipes/defaults.toml`` and of each recipe.
"""

SCALES = ("demo", "cpu", "paper")
