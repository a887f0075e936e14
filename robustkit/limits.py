"""How much one command may ask for before it must be confirmed or is refused as a typo.

Kept apart from :mod:`robustkit.sweep` (which imports the run spec and the executors) so that
the command line states them in ``--help`` without importing more.
"""

# A grid (or a command line's seeds x TSP steps) of more runs than this is expanded and trained
# only when confirmed (``robustkit sweep --yes``, ``expand_grid(..., max_runs=None)``): an axis
# typed wrong (a million seeds) would otherwise spend minutes expanding before anything is said,
# then train for years.
MAX_GRID_RUNS = 10_000
# More worker processes (``--jobs``) than any machine runs at once is a typo, not a setting.
MAX_JOBS = 1024
