"""What ``robustkit train`` notes about the data before training: sizes the user did not choose
(a ``train_size`` cutting their own data) and splits too small for the failure rule
(:mod:`robustkit.store.collapse`) to decide every run."""

from __future__ import annotations

from collections.abc import Iterable

from robustkit.data import tasks
from robustkit.errors import RobustkitError
from robustkit.specs.spec import RunSpec


def size_notes(specs: Iterable[RunSpec]) -> list[str]:
    """One line per data setting of ``specs`` whose sizes a researcher should know before training:
    a ``train_size`` that trains on part of the user's own data (a preset's N), and validation or
    test splits too small for the failure rule to decide every run
    (:func:`robustkit.store.collapse.evaluation_floor`) or to tell methods apart by less than its
    learned margin. Built-in tasks, whose sizes are known, and data that cannot be read (the run
    reports it) give none.

    Returns
    -------
    list of str
    """
    from robustkit.data.metrics import majority_scores
    from robustkit.store import collapse

    lines, seen = [], set()
    for spec in specs:
        key = (spec.task, spec.data_dir, spec.train_size, spec.split_seed)
        if key in seen:
            continue
        seen.add(key)
        try:
            task = tasks.get_task(spec.task, spec.data_dir)
            if task.source != "user":
                continue
            full = tasks.load_splits(task, data_dir=spec.data_dir)
            splits = tasks.load_splits(
                task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed
            )
        except RobustkitError:
            continue
        if spec.train_size is not None and spec.train_size < len(full["train"]):
            lines.append(
                f"{task.name}: training on {spec.train_size:,} of its {len(full['train']):,} training rows "
                "(train_size, e.g. a preset's); --train-size all trains on every row"
            )
        small, floors = [], []
        for split in ("validation", "test"):
            baseline = majority_scores(task, splits["train"]["label"], splits[split]["label"])[task.main_metric]
            floors.append(collapse.evaluation_floor(baseline, task.main_metric))
            if len(splits[split]) < floors[-1]:
                small.append(f"{split} has {len(splits[split]):,} rows")
        if small:
            margin = collapse.DEFAULT_RULE.learned_margin
            lines.append(
                f"{task.name}: {' and '.join(small)}, under the about {max(floors):,} needed to tell every failed "
                f"run from one that learned ({task.main_metric} {margin:g} above the majority class: runs between "
                f"are 'undecided': no result) or to separate methods by less than {margin:g}"
            )
    return lines
