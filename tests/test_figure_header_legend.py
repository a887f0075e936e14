"""Figures say what was run once and keep their legends inside (issue #38 item 9): a title's
"— model on task" goes where a subtitle already names them; a legend under the panels is no
wider than the panels (fewer columns, then wrapped labels)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402

from robustkit.figures import style  # noqa: E402
from robustkit.figures.labels import paper_title  # noqa: E402
from robustkit.figures.similarity import rsa_by_layer  # noqa: E402


def _rsa_frame() -> pd.DataFrame:
    """Four methods on one task, three prefix runs collapsed: long legend labels."""
    return pd.DataFrame(
        [
            {
                "task": "rt",
                "method": method,
                "layer": layer,
                "measure": "rsa",
                "run_id": f"{method}-{seed}",
                "value": 1 - 0.05 * layer * (1 + seed / 10),
                "model": "minilm-l6",
                "tokens": 2000,
                "outcome": "collapsed" if method == "prefix" and seed < 3 else "ok",
            }
            for method in ("houlsby", "full", "lora", "prefix")
            for seed in range(5)
            for layer in range(7)
        ]
    )


def _legends(fig) -> list[Legend]:
    return fig.findobj(lambda artist: isinstance(artist, Legend))


def test_the_rsa_legend_is_no_wider_than_its_panels():
    fig = rsa_by_layer(_rsa_frame())
    panels_in = fig._rk_panels[0]
    [legend] = _legends(fig)
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).width / fig.dpi <= panels_in + 1e-6
    assert fig.get_size_inches()[0] <= panels_in + 1e-6  # the canvas did not grow for it
    labels = [t.get_text() for t in legend.get_texts()]
    assert any("3 collapsed left out" in " ".join(label.split()) for label in labels)  # wrapped, not cut
    plt.close(fig)


def test_a_one_column_legend_wraps_its_long_labels():
    fig, ax = plt.subplots(figsize=(2.5, 2.0))
    (line,) = ax.plot([0, 1], [0, 1], label="a label much longer than a two and a half inch wide panel could ever hold")
    legend = style.legend_below(fig, ax, [line])
    assert legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi <= 2.5 + 1e-6
    assert "\n" in legend.get_texts()[0].get_text()
    plt.close(fig)


def test_the_title_leaves_what_was_run_to_the_subtitle():
    frame = pd.DataFrame({"model": ["minilm-l6"], "task": ["rt"]})
    fig, _ = plt.subplots()
    title = style.set_title(fig, paper_title("Han et al. 2021, figure 2", frame))
    assert title.get_text() == "Han et al. 2021, figure 2 — minilm-l6 on rt"  # no subtitle: the title says it
    style.add_subtitle(fig, "minilm-l6 on rt (stand-in for bert-base-uncased on rte)")
    texts = [t.get_text() for t in fig.texts]
    assert sum("minilm-l6 on rt" in t for t in texts) == 1, texts
    assert title.get_text() == "Han et al. 2021, figure 2"
    plt.close(fig)


def test_a_title_extra_stays_and_another_subtitle_leaves_the_title_alone():
    frame = pd.DataFrame({"model": ["bert-tiny"], "task": ["rte"]})
    fig, _ = plt.subplots()
    title = style.set_title(fig, paper_title("He et al. 2021, figure 4", frame, "layer-shared adapters"))
    style.add_subtitle(fig, "bert-tiny on rte (stand-in for bert-base-uncased on rte)")
    assert title.get_text() == "He et al. 2021, figure 4, layer-shared adapters"
    fig2, _ = plt.subplots()
    other = style.set_title(fig2, paper_title("He et al. 2021, figure 4", frame))
    style.add_subtitle(fig2, "5 seeds per method")
    assert other.get_text() == "He et al. 2021, figure 4 — bert-tiny on rte"
    plt.close(fig)
    plt.close(fig2)
