"""How much one command may ask for before it must be confirmed or is refused as a typo.

Kept apart from :mod:`robustkit.sweeps.grid` (which imports the run spec and the executors) so that
the command line states them in ``--help`` without importing more.
"""

# A grid (or a command line's seeds x TSP steps) of more runs than this is expanded and trained
# only when confirmed (``robustkit sweep --yes``, ``expand_grid(..., max_runs=None)``): an axis
# typed wrong (a million seeds) would otherwise spend minutes expanding before anything is said,
# then train for years.
MAX_GRID_RUNS = 10_000
# More worker processes (``--jobs``) than any machine runs at once is a typo, not a setting.
MAX_JOBS = 1024
# Points of a coefficient grid (``--alphas``, ``--grid``, ``--ts``): each is a full evaluation
# pass, and the papers use 20 to 121; a hundred million is a typo that would run for days.
MAX_GRID_POINTS = 10_000
# A grid file larger than this is not a grid someone wrote (``sweep /dev/zero`` would read
# without end); nor is one whose arrays nest deeper than MAX_TOML_DEPTH.
MAX_GRID_FILE_BYTES = 1 << 20
MAX_TOML_DEPTH = 32
