"""Exceptions that carry a message meant for the researcher, not a traceback.

The CLI prints ``str(error)`` of any :class:`RobustkitError` and exits with status 2; notebooks
see the exception itself.
"""


class RobustkitError(Exception):
    """Base class: bad input or a state of the store that the user must fix."""


class AssetError(RobustkitError):
    """An embedded asset is unknown, cannot be fetched, or fails its sha256 check."""


class TaskError(RobustkitError):
    """Unknown task, missing data files, empty or label-less data."""


class MethodError(RobustkitError):
    """Unknown tuning method or an invalid method option."""


class StoreError(RobustkitError):
    """Bad store path, corrupt or mismatched checkpoint, or a locked run."""


class RunLockedError(StoreError):
    """Another process holds the run's lock (it is training it right now)."""


class SweepError(RobustkitError):
    """A grid file that cannot be read or has unknown keys or bad values."""


class DamagedRunError(StoreError):
    """A run folder that cannot be trusted: a manifest that is missing (with checkpoints left),
    unreadable or of the wrong shape, or checkpoint files that do not match it.

    Attributes
    ----------
    run : str
        The run folder's name.
    problem : str
        What is wrong, without the advice.
    """

    def __init__(self, run: str, problem: str, advice: str = ""):
        self.run, self.problem = run, problem
        super().__init__(f"run {run!r} is damaged: {problem}" + (f"; {advice}" if advice else ""))


class RunLacksError(StoreError):
    """A run without something an analysis reads (a checkpoint, gradient norms, a LoRA update):
    the analysis leaves the run out and names it (:func:`robustkit.analysis.each_run.leave_out`)
    rather than stopping for the whole selection.

    Attributes
    ----------
    run : str
        The run folder's name.
    lacks : str
        What it lacks, as it reads after "has no" (``checkpoint 'step-500' (has: best, last)``).
    """

    def __init__(self, run: str, lacks: str):
        self.run, self.lacks = run, lacks
        super().__init__(f"run {run!r} has no {lacks}")


class DataChangedError(RobustkitError):
    """A run asked to train or resume on data other than the data its id and manifest name."""


def did_you_mean(name: object, known) -> str:
    """`` (did you mean 'lora'?)`` for the known name closest to a mistyped ``name``, else ``""``:
    the hint every "unknown ..." message of robustkit carries."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
