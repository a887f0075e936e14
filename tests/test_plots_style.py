"""What every figure shares: titles, --subtitle / --footer on every plot verb, notes wrapped
without orphans, legends and notes outside the panels, cropped PDFs, readable heatmap cells."""

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import ablation
from robustkit.cli import parse_args
from robustkit.figures import FIGURES, canvas, style, units
from robustkit.figures.ablation import ablation_heatmap, cell_font_size
from robustkit.figures.labels import paper_title

TEXT = (
    "Claim: the standard deviation over seeds is smaller with adapters than with full fine-tuning "
    "(Levene, one-sided, alpha 0.05). Verdict: inconclusive, n = 3 runs per method, p = 0.41, "
    "std ratio 0.8 [0.3, 2.1]; the demo scale has too few seeds to tell."
)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_plot_verb_takes_subtitle_and_footer(name):
    args = parse_args(["plot", name, "runs", "-o", "x.pdf", "--subtitle", "minilm-l6 on rt", "--footer", "a\\nb"])
    assert (args.subtitle, args.footer) == ("minilm-l6 on rt", "a\\nb")
    if FIGURES[name].score_axis:
        assert parse_args(["plot", name, "runs", "-o", "x.pdf", "--include-failed"]).include_failed


@pytest.mark.parametrize("width", [2.5, 3.3, 4.0, 5.2, 6.4, 8.0])
def test_wrapped_text_never_ends_on_a_lone_word_and_fits(width):
    fig, _ = canvas.new_figure(width, 3)
    lines = style.wrap(fig, TEXT, style.NOTE_SIZE)
    assert " ".join(lines) == " ".join(TEXT.split())
    assert len(lines) > 1 and len(lines[-1].split()) >= 2
    assert max(style.text_width_in(fig, line, style.NOTE_SIZE) for line in lines) <= fig.get_figwidth()


def test_subtitle_and_footer_stack_outside_the_panels(tmp_path):
    fig, ax = canvas.new_figure(5, 3)
    ax.plot([0, 1], [0, 1], label="a line")
    style.set_title(fig, "He et al. 2021, figure 2 — minilm-l6 on rt")
    style.legend_below(fig, ax, ax.get_legend_handles_labels()[0])
    style.add_note(fig, TEXT)
    style.decorate(
        fig, subtitle="minilm-l6 on rt, stand-in for BERT-base on SST-2", footer="Claim: x.\\nVerdict: agrees."
    )
    texts = style.figure_texts(fig)
    assert (
        "minilm-l6 on rt, stand-in for BERT-base on SST-2" in texts
        and "Claim: x." in texts
        and "Verdict: agrees." in texts
    )
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = ax.get_tightbbox(renderer, bbox_extra_artists=[])  # the panel without the legend it owns
    title, subtitle = fig._rk_title[0].get_window_extent(renderer), fig._rk_subtitles[0].get_window_extent(renderer)
    below = [artist.get_window_extent(renderer) for artist in fig._rk_footer]
    assert title.y0 >= subtitle.y1 and subtitle.y0 >= panels.y1  # title above subtitle above the panels
    assert all(b.y1 <= panels.y0 for b in below)  # legend and notes under the panels
    assert all(upper.y0 >= lower.y1 - 1 for upper, lower in zip(below, below[1:]))  # stacked, not overlapping
    assert style.save_pdf(fig, tmp_path / "x.pdf").read_bytes().startswith(b"%PDF")


def test_paper_title_names_model_and_task():
    frame = pd.DataFrame({"model": ["minilm-l6"] * 2, "task": ["rt", "sst2"]})
    assert paper_title("He et al. 2021, figure 2", frame) == "He et al. 2021, figure 2 — minilm-l6 on rt, sst2"
    assert paper_title("X", None) == "X"
    assert units.score_label(["accuracy"], ["test"]) == "test accuracy (%)"
    assert units.score_label(["mcc"], ["validation"]) == "validation mcc (x 100)"
    assert style.PERCENT is units.PERCENT  # documented as robustkit.figures.style.PERCENT (docs/reference.md)


def _ablation(n_layers: int, sharing: str = "none") -> pd.DataFrame:
    rows = [
        {
            "run_id": "r",
            "model": "minilm-l6",
            "task": "rt",
            "method": "houlsby",
            "adapter_sharing": sharing,
            "first": i,
            "last": j,
            "metric": "accuracy",
            "relative_change": -0.01 * (j - i + 1) * (i + 1),
        }
        for i in range(n_layers)
        for j in range(i, n_layers)
    ]
    return pd.DataFrame(rows)


def _heatmap(frame: pd.DataFrame):
    return ablation_heatmap(**ablation.ablation_heatmap(frame))  # through the figure's view


def test_heatmap_cells_are_readable_and_the_shared_ablation_says_so():
    fig = _heatmap(_ablation(6))
    ax = fig.axes[0]
    cells = [t for t in ax.texts]
    assert len(cells) == 21 and all(t.get_fontsize() == cell_font_size(6) >= 8 for t in cells)
    assert {t.get_text() for t in cells} >= {"-1.0", "-12.0"}  # one decimal
    darkest = next(t for t in cells if t.get_text() == "-12.0")
    palest = next(t for t in cells if t.get_text() == "-1.0")
    assert darkest.get_color() == "white" and palest.get_color() == "black"  # contrast follows the cell
    assert cell_font_size(24) < cell_font_size(12) < cell_font_size(6)
    shared = _heatmap(_ablation(6, sharing="layer"))
    assert "layer-shared" in shared._rk_title[0].get_text() and "minilm-l6 on rt" in shared._rk_title[0].get_text()
    assert "layer-shared" in _heatmap(_ablation(6, sharing="3-layer"))._rk_title[0].get_text()
    assert "layer-shared" not in fig._rk_title[0].get_text()


def test_saved_figures_are_cropped(tmp_path):
    fig, ax = canvas.new_figure(5, 3)
    ax.plot(np.arange(3))
    style.add_note(fig, TEXT)
    path = style.save_pdf(fig, tmp_path / "x.pdf")
    box = [float(v) for v in path.read_bytes().split(b"/MediaBox [")[1].split(b"]")[0].split()]
    assert box[2] < 5 * 72 + 20  # about the figure's width: cropped, not a page with margins


def test_a_legend_wider_than_the_panels_is_not_cropped(tmp_path):
    import re

    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from robustkit.figures import style

    fig, ax = plt.subplots(figsize=(3, 2), constrained_layout=True)
    ax.plot([0, 1], [0, 1])
    handles = [Line2D([], [], label=f"a long legend label, number {i}, wider than the panel") for i in range(3)]
    style.legend_below(fig, ax, handles, ncols=3)
    legend_width = (
        fig.legends[0].get_window_extent().width
        if fig.legends
        else ax.get_legend().get_window_extent(fig.canvas.get_renderer()).width / fig.dpi * 72
    )
    path = style.save_pdf(fig, tmp_path / "wide.pdf")
    box = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)", path.read_bytes())
    assert float(box.group(1)) >= legend_width  # points: the whole legend is on the page


def _outside(fig) -> list[str]:
    """The texts and legends of ``fig`` that are not wholly on its canvas (after a draw)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.get_size_inches() * fig.dpi
    items = [*fig.texts, *fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    outside = []
    for item in items:
        box = item.get_window_extent(renderer)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            outside.append(getattr(item, "get_text", lambda: "legend")()[:40])
    return outside


def test_plain_savefig_keeps_title_legend_and_footer(tmp_path):
    """Issue #28 item 6: a notebook's fig.savefig() (no robustkit helper, no bbox_inches) keeps
    everything; bbox_inches="tight" does too; the panels keep their size."""
    import io

    from PIL import Image

    fig, ax = canvas.new_figure(4, 3)
    ax.plot([0, 1], [0, 1], label="a line")
    style.set_title(fig, "He et al. 2021, figure 2 — a title wider than the four-inch panels of this figure")
    style.legend_below(fig, ax, [*ax.get_legend_handles_labels()[0]] * 3, ncols=3)
    style.decorate(fig, subtitle="minilm-l6 on rt", footer=TEXT)
    assert _outside(fig) == []
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    panels = ax.get_tightbbox(renderer, bbox_extra_artists=[])  # the panel without the legend it owns
    assert legend.y1 <= panels.y0 and panels.height / fig.dpi > 2.0  # under the panels, which are not squeezed
    tight = fig.get_tightbbox(renderer)  # inches
    assert tight.y0 * fig.dpi <= legend.y0 + 1 and tight.height >= fig.get_size_inches()[1] - 0.2
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=50)
    assert Image.open(buffer).size == tuple(round(v * 50) for v in fig.get_size_inches())
    # a table (no layout engine) and a figure legend
    from robustkit.figures.tables import render_table

    table = render_table(["method", "score"], [["houlsby", "81.2"], ["full", "82.0"]], "A title", [TEXT])
    assert _outside(table) == []
    wide, axis = canvas.new_figure(3, 2)
    style.legend_below(
        wide, None, [plt_line(f"label {i} of a legend wider than its panels") for i in range(4)], ncols=4
    )
    assert _outside(wide) == []


def plt_line(label):
    from matplotlib.lines import Line2D

    return Line2D([], [], label=label)


def test_importing_robustkit_plots_keeps_the_backend():
    import subprocess
    import sys

    code = (
        "import matplotlib; matplotlib.use('svg'); import robustkit.figures.style, robustkit.figures, "
        "robustkit.verdicts.reproduce; "
        "print(matplotlib.get_backend())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[-1] == "svg"


def test_strip_points_jitter_the_same_whatever_the_global_random_state():
    """seaborn draws stripplot jitter from NumPy's global state: the same frame gave a different
    figure each time it was drawn. strip_points fixes the jitter and leaves the state as it was."""
    import numpy as np
    import pandas as pd

    from robustkit.figures import canvas, marks

    frame = pd.DataFrame({"method": ["full"] * 5 + ["houlsby"] * 5, "value": np.arange(10.0)})
    offsets = []
    for seed in (1, 2):
        np.random.seed(seed)
        fig, ax = canvas.new_figure()
        marks.strip_points(data=frame, x="method", y="value", ax=ax, jitter=0.1)
        after = np.random.random()
        np.random.seed(seed)
        assert after == np.random.random()  # the caller's global state is put back
        offsets.append(np.concatenate([c.get_offsets() for c in ax.collections]))
    np.testing.assert_array_equal(offsets[0], offsets[1])
    assert len(set(offsets[0][:, 0])) > 2  # jittered: the points are not all on their category
