"""Stability box plots: the spread of final scores over runs, each run drawn as a dot.

- :func:`box_seeds`: Han et al. 2021 figure 2, dev/test score over random seeds per method,
  one panel per task.
- :func:`box_tsp`: Han et al. 2021 figure 4, over task-specific pretraining (TSP) steps: a box
  per TSP step and method (over seeds), or one box per method pooling the TSP steps as in the
  paper (``pooled=True``).
- :func:`box_tsp_epochs`: Han et al. 2021 figures 9 and 10, score at each fine-tuning epoch
  end, one box per TSP step, one panel per method; or (``pool_epochs=True``, the paper's) one
  box per TSP step and method over every epoch end of every run.
- :func:`box_lr`: He et al. 2021 figure 4, over seeds at each learning rate.
- :func:`train_size`: He et al. 2021 figure 3, score against the number of training examples
  (boxes, or mean +- std).

Every figure shows the number of runs behind each box (``n=``), collapsed and diverged runs
(:mod:`robustkit.store.collapse`) as grey crosses left out of the boxes, means and tests (unless
``include_failed``) with ``collapsed k/n`` over their box, the majority-class baseline (dashed)
and, under the figure, the caption of :func:`robustkit.analysis.stability.caption` (Levene /
Brown-Forsythe for the spread, Mann-Whitney U for the location). Runs that differ in any run
setting besides the seed and the plotted axes are never pooled into one box: they get a panel
each.

These functions only say which box figure each paper figure is: the boxes, marks and notes are
drawn by :func:`robustkit.figures.score_boxes.box_figure`, and their statistics (the summary per
box, the panels, the caption with its tests) come from the view of the same name in
:mod:`robustkit.analysis.boxes`, whose dict is their keyword arguments::

    from robustkit.analysis import boxes
    fig = box_seeds(**boxes.box_seeds(frame))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.params import Param

# The figures of this module, as robustkit.figures reads them from this source (their analyses
# declare their data).
DECLARED = (
    figures.register_figure(
        figures.Figure(
            "box-seeds",
            "Han et al. 2021 figure 2: box plot of each method's score over random seeds, one panel per task",
            "scores",
            ":box_seeds",
            (figures.ASO,),
            view="robustkit.analysis.boxes:box_seeds",
            score_axis=True,
            order=110,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "box-tsp",
            "Han et al. 2021 figure 4: box plots of the score per TSP step and method (pooled: one box per method over "
            "TSP steps)",
            "scores",
            ":box_tsp",
            (
                Param(
                    "pooled",
                    False,
                    "one box per method over all TSP steps (each run differs by its TSP step, as in the paper) instead "
                    "of "
                    "a box per TSP step",
                ),
                figures.ASO,
            ),
            view="robustkit.analysis.boxes:box_tsp",
            score_axis=True,
            order=120,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "box-tsp-epochs",
            "Han et al. 2021 figures 9-10: box plots of the dev score at each fine-tuning epoch end, per TSP step, one "
            "panel per method (pool_epochs: one box per TSP step and method over every epoch end, the paper's)",
            "epoch-scores",
            ":box_tsp_epochs",
            (
                Param(
                    "pool_epochs",
                    False,
                    "one box per TSP step and method over every fine-tuning epoch end of every run (Han et al. 2021 "
                    "figures 9-10: 'development scores from 100 runs ... epochs ranging from 1 to 100') instead of a "
                    "box "
                    "per epoch",
                ),
            ),
            view="robustkit.analysis.boxes:box_tsp_epochs",
            score_axis=True,
            order=130,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "box-lr",
            "He et al. 2021 figure 4: box plots of the score over seeds per learning rate and method",
            "scores",
            ":box_lr",
            (figures.ASO,),
            view="robustkit.analysis.boxes:box_lr",
            score_axis=True,
            order=140,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "train-size",
            "He et al. 2021 figure 3: score vs number of training examples, per method (boxes or mean +- std)",
            "scores",
            ":train_size",
            (
                Param(
                    "kind",
                    "box",
                    "box: boxes over seeds; mean: mean +- std (ddof 1) as in the paper",
                    choices=("box", "mean"),
                ),
                figures.ASO,
            ),
            view="robustkit.analysis.boxes:train_size",
            score_axis=True,
            order=150,
            module=__name__,
        )
    ),
)

__all__ = ["box_lr", "box_seeds", "box_tsp", "box_tsp_epochs", "train_size"]


def box_seeds(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figure 2: one box per method over its runs (seeds); a panel per task.

    The arguments but ``include_failed`` are :func:`robustkit.analysis.boxes.box_seeds`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output (``task, method,
        value, baseline, split, metric, outcome``); every run of a method in a task and setting
        goes in one box.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel).
    include_failed : bool
        The boxes hold collapsed / diverged runs too (they are still marked); as the view's.
    """
    from robustkit.figures.score_boxes import method_boxes

    return method_boxes(frame, summary, "Han et al. 2021, figure 2", panels, caption_text, include_failed)


def box_tsp(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    pooled: bool = False,
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figure 4: scores over task-specific pretraining steps.

    The arguments but ``pooled`` and ``include_failed`` are :func:`robustkit.analysis.boxes.box_tsp`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``tsp_step`` values, with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel, and
        TSP step unless pooled).
    pooled : bool
        False: x = TSP steps, one box per method over the seeds at that step. True: one box per
        method over every TSP step (the paper's figure 4: each run differs by its TSP step); as
        the view's.
    include_failed : bool
        The boxes hold collapsed / diverged runs too; as the view's.
    """
    from robustkit.figures.score_boxes import box_figure

    figure = "Han et al. 2021, figure 4"
    if pooled:
        steps = ", ".join(map(str, sorted(frame["tsp_step"].unique())))
        return box_figure(
            frame,
            summary,
            panels,
            caption_text,
            x="method",
            hue="method",
            figure=figure,
            xlabel=f"tuning method (pooled over TSP steps {steps})",
            include_failed=include_failed,
        )
    return box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="tsp_step",
        hue="method",
        figure=figure,
        xlabel="task-specific pretraining steps (masked-LM updates)",
        include_failed=include_failed,
    )


def box_tsp_epochs(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    pool_epochs: bool = False,
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figures 9 and 10: the dev score at fine-tuning epoch ends per TSP step.

    The arguments but ``pool_epochs`` and ``include_failed`` are
    :func:`robustkit.analysis.boxes.box_tsp_epochs`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.epoch_outcomes` output
        (``epoch`` column; one row per run x epoch end), with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each cell).
    pool_epochs : bool
        False: x = epoch, hue = TSP step, a panel per method (a box per epoch over the seeds).
        True, the paper's ("distributions of the development scores from 100 runs ...
        fine-tuning epochs ranging from 1 to 100"): x = TSP step, hue = method, one box per
        (TSP step, method) over every epoch end of every run. As the view's.
    include_failed : bool
        The boxes hold collapsed / diverged evaluations too; as the view's.
    """
    from robustkit.figures.score_boxes import box_figure

    figure = "Han et al. 2021, figures 9-10"
    if pool_epochs:
        epochs = sorted(frame["epoch"].unique())
        span = f"{epochs[0]}-{epochs[-1]}" if len(epochs) > 1 else f"{epochs[0]}"
        return box_figure(
            frame,
            summary,
            panels,
            caption_text,
            x="tsp_step",
            hue="method",
            figure=figure,
            xlabel=f"task-specific pretraining steps (each box: fine-tuning epoch ends {span} of every run)",
            include_failed=include_failed,
            unit="evaluations",
        )
    return box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="epoch",
        hue="tsp_step",
        xlabel="fine-tuning epochs",
        figure=figure,
        include_failed=include_failed,
    )


def box_lr(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    include_failed: bool = False,
) -> Figure:
    """He et al. 2021 figure 4: one box per learning rate and method, over the seeds.

    Runs that differ in another setting (He's 1k and 5k training examples) get a panel each.
    The arguments but ``include_failed`` are :func:`robustkit.analysis.boxes.box_lr`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``lr`` values, with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel x learning rate).
    include_failed : bool
        The boxes hold collapsed / diverged runs too; as the view's.
    """
    from robustkit.figures.score_boxes import box_figure

    return box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="lr",
        hue="method",
        xlabel="learning rate (AdamW peak)",
        figure="He et al. 2021, figure 4",
        include_failed=include_failed,
    )


def train_size(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    kind: str = "box",
    include_failed: bool = False,
) -> Figure:
    """He et al. 2021 figure 3: score against the number of training examples, per method.

    The arguments but ``kind`` and ``include_failed`` are :func:`robustkit.analysis.boxes.train_size`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``train_size`` values (missing = the whole training set, shown as ``all``), with
        ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``; ``mean`` and ``std`` (ddof 1) for ``kind="mean"``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel x training size).
    kind : {"box", "mean"}
        Boxes over seeds, or the paper's mean with a +-1 std error bar (ddof 1, the summary's).
    include_failed : bool
        The boxes and means hold collapsed / diverged runs too; as the view's.
    """
    from robustkit.figures.score_boxes import box_figure

    if kind not in ("box", "mean"):
        raise ValueError(f"kind must be 'box' or 'mean', got {kind!r}")
    return box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="train_size",
        hue="method",
        mean_std=kind == "mean",
        xlabel="training examples",
        figure="He et al. 2021, figure 3",
        include_failed=include_failed,
    )
