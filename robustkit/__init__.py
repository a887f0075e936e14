"""robustkit: robustness and stability of adapter-based tuning vs full fine-tuning.

Train into a run store (``robustkit.train``, ``robustkit.sweep``), then read it as tidy
DataFrames::

    import robustkit
    runs = robustkit.load_runs("runs/")        # one row per run
    history = robustkit.load_history("runs/")  # one row per run x eval step x metric
"""

from robustkit.store import load_gradnorms, load_history, load_runs

__all__ = ["load_runs", "load_history", "load_gradnorms"]
__version__ = "0.1.0"
