"""Analyses of saved runs: each module is one analysis, a function from runs to a tidy DataFrame.

Shared pieces: :mod:`robustkit.analysis.select` (choose runs) and
:mod:`robustkit.analysis.cache` (parquet cache keyed by the checkpoints' sha256).
"""
