"""The category of the notes an analysis gives about the runs it read (runs skipped, a value
that is NaN, a sample fitted to its split): a robustkit warning, so that the command line shows
it as one ``warning: ...`` line (robustkit.cli), never as Python's two lines with the source
line of the caller, while ``warnings.catch_warnings`` in a notebook still records it."""

from __future__ import annotations


class AnalysisNote(UserWarning):
    """A note of an analysis about its runs: one line, naming them."""


__all__ = ["AnalysisNote"]
