"""Orchestration of the attack analysis over a store: sampling, attackers, cache and resume,
conventions, figures."""

import dataclasses

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from robustkit import attacks, figures
from robustkit.analysis import attack, attack_cache, attack_summary, attack_views
from robustkit.analysis.cache import CACHE_DIR
from robustkit.analysis.select import select_runs
from robustkit.attacks import pwws
from robustkit.figures import attack as attack_plots
from robustkit.figures.attack import attack_by_attacker
from robustkit.figures.style import save_pdf
from robustkit.train import train

N = 6


@pytest.fixture(autouse=True)
def _nltk_data(monkeypatch, shared_nltk_data):
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def attack_store(tmp_path_factory):
    from robustkit.specs.spec import RunSpec

    root = tmp_path_factory.mktemp("attack-store")
    base = RunSpec(model="bert-tiny", task="rt", train_size=64, epochs=1, batch_size=16, max_length=32, adapter_size=16)
    for method in ("houlsby", "full"):
        train(dataclasses.replace(base, method=method), root, progress=False)
    return root


class Fake:
    """An attack that fools the victim on even examples and counts its calls."""

    name = "fake"
    calls: list[int] = []
    fail_at: int | None = None  # raise KeyboardInterrupt on this call (an interrupted analysis)

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    @property
    def params(self):
        return {"seed": self.seed}

    def predict(self, victim, sentence):
        return int(victim.get_pred([sentence])[0])

    def attack(self, victim, example, budget=None):
        Fake.calls.append(example.index)
        if len(Fake.calls) == Fake.fail_at:
            raise KeyboardInterrupt
        fooled = example.index % 2 == 0
        return attacks.AttackResult(
            example.sentence, "x" if fooled else None, fooled, example.target, 1, int(fooled), 3, 0.0
        )


@pytest.fixture
def fake(monkeypatch):
    attacks.register_attack(Fake)
    monkeypatch.setattr(Fake, "calls", [])
    monkeypatch.setattr(Fake, "fail_at", None)
    yield Fake
    del attacks.ATTACKS["fake"]


def _cache_files(store, attacker: str) -> list:
    return sorted((store / CACHE_DIR / "attack").glob(f"*-{attacker}-*.jsonl"))


@pytest.mark.slow
def test_examples_are_the_same_sample_for_every_run(attack_store):
    examples = attack.run_attacker(attack_store, n=N, seed=3, progress=False)
    assert len(examples) == 2 * N and set(examples.method) == {"houlsby", "full"}
    by_run = examples.groupby("run_id")["example"].apply(tuple)
    assert by_run.nunique() == 1
    assert set(attack_cache.EXAMPLE_COLUMNS) <= set(examples.columns) and set(examples.attacker) == {"pwws"}
    flipped = examples[examples.success]
    assert (flipped.adversarial != flipped.original.str.lower()).all()


def test_a_registered_attack_runs_through_the_analysis(attack_store, fake):
    examples = attack.run_attacker(attack_store, n=N, seed=3, attacker="fake", select=["method=full"], progress=False)
    assert set(examples.attacker) == {"fake"} and len(fake.calls) == N
    assert (examples.success == (examples.example % 2 == 0)).all()
    summary = attack_summary.summarize(examples)
    assert set(summary.attacker) == {"fake"} and set(summary.convention) == set(attack_summary.CONVENTIONS)
    assert len(_cache_files(attack_store, "fake")) == 1
    attack.run_attacker(attack_store, n=N, seed=3, attacker="fake", select=["method=full"], progress=False)
    assert len(fake.calls) == N  # read from its cache
    attack.run_attacker(attack_store, n=N, seed=4, attacker="fake", select=["method=full"], progress=False)
    assert len(fake.calls) == 2 * N and len(_cache_files(attack_store, "fake")) == 2  # the seed is in the key


def test_the_victims_device_is_recorded_not_keyed(attack_store, fake):
    """As the registry runs it (inside collect_provenance; the registry's attacker choices do not
    hold the fake one)."""
    from robustkit.analysis.each_run import collect_provenance

    def run(device, seed=8):
        with collect_provenance() as provenance:
            attack.run(
                attack_store,
                ["method=full"],
                attackers=["fake"],
                n=N,
                seed=seed,
                query_budget=None,
                checkpoint="best",
                attack_options=[],
                device=device,
                progress=False,
            )
        return provenance

    first = run("cpu")
    ((key, record),) = first.items()
    assert key.endswith("/fake") and key.startswith("rt-full-") and record == {"device": "cpu"}
    assert run(None) == first and len(fake.calls) == N  # the same cache file, nothing attacked again
    with pytest.raises(RuntimeError, match="nonsense"):  # the device reaches the victim
        run("nonsense", seed=9)


def test_interrupted_attack_resumes_without_repeating(attack_store, fake):
    fake.fail_at = 3
    with pytest.raises(KeyboardInterrupt):
        attack.run_attacker(attack_store, n=N, seed=6, attacker="fake", select=["method=full"], progress=False)
    first = list(fake.calls[:2])
    fake.fail_at = None
    resumed = attack.run_attacker(attack_store, n=N, seed=6, attacker="fake", select=["method=full"], progress=False)
    assert len(resumed) == N and resumed.example.is_unique
    assert len(fake.calls) == N + 1  # the two done before the interrupt were not attacked again
    assert not set(first) & set(fake.calls[3:])


@pytest.mark.slow
def test_attackers_are_cached_apart_and_resume_alike(attack_store):
    select = ["method=full"]
    pwws_rows = attack.run_attacker(attack_store, n=N, seed=5, select=select, progress=False)
    bug = attack.run_attacker(attack_store, n=N, seed=5, attacker="deepwordbug", select=select, progress=False)
    assert set(bug.attacker) == {"deepwordbug"} and list(bug.example) == list(pwws_rows.example)
    fooled = bug[bug.success]
    assert len(fooled) and not fooled.adversarial.map(str.isascii).any()  # homoglyphs, not WordNet words
    (bug_file,) = _cache_files(attack_store, "deepwordbug")
    # An interrupted DeepWordBug attack (two examples done) resumes with the same results.
    bug_file.write_text("".join(bug_file.read_text().splitlines(keepends=True)[:2]) + '{"example": 1')
    resumed = attack.run_attacker(attack_store, n=N, seed=5, attacker="deepwordbug", select=select, progress=False)
    pd.testing.assert_frame_equal(bug.drop(columns="seconds"), resumed.drop(columns="seconds"))
    both = attack_summary.summarize(pd.concat([pwws_rows, bug]))
    assert len(both) == 2 * len(attack_summary.CONVENTIONS) and set(both.attacker) == {"pwws", "deepwordbug"}


def test_pwws_caches_named_before_the_attacker_are_kept(attack_store, monkeypatch):
    select = ["method=houlsby"]
    before = set(_cache_files(attack_store, "pwws"))
    reference = attack.run_attacker(attack_store, n=N, seed=8, select=select, progress=False)
    (path,) = set(_cache_files(attack_store, "pwws")) - before
    legacy = path.with_name(path.name.replace("-pwws-", "-"))
    path.rename(legacy)

    def refuse(*args, **kwargs):
        raise AssertionError("attacked again")

    monkeypatch.setattr(pwws, "attack_fast", refuse)
    again = attack.run_attacker(attack_store, n=N, seed=8, select=select, progress=False)
    pd.testing.assert_frame_equal(reference, again)
    assert path.exists() and not legacy.exists()


def test_summary_conventions_by_hand():
    rows = pd.DataFrame(
        {
            "run_id": "r",
            "model": "m",
            "task": "rt",
            "method": "full",
            "seed": 0,
            "tsp_step": 0,
            "lr": 1e-4,
            "train_size": 1000,
            "adapter_size": None,
            "attacker": "pwws",
            "label": [1, 1, 0, 0],
            "prediction": [1, 1, 0, 1],  # the last one is misclassified
            "success": [True, False, True, True],
            "queries": [10, 20, 30, 40],
            "modified_words": [1, 0, 2, 1],
            "words": [10, 10, 10, 10],
            "seconds": 1.0,
        }
    )
    summary = attack_summary.summarize(rows).set_index("convention")
    assert summary.loc["openattack", "success_rate"] == 0.75 and summary.loc["openattack", "attacked"] == 4
    assert summary.loc["gold", "success_rate"] == pytest.approx(2 / 3) and summary.loc["gold", "attacked"] == 3
    assert summary.loc["gold", "accuracy_before"] == 0.75
    assert summary.loc["gold", "accuracy_under_attack"] == 0.25
    assert summary.loc["openattack", "mean_modification_rate"] == pytest.approx((0.1 + 0.2 + 0.1) / 3)
    assert (summary["attacker"] == "pwws").all()


def test_bad_attacker_and_engine_are_refused(attack_store):
    from robustkit.analysis.registry import get

    with pytest.raises(Exception, match="unknown attack engine 'nope'"):
        attack.attack_run(select_runs(attack_store).path[0], engine="nope")
    with pytest.raises(Exception, match="unknown attacker 'textfooler'"):
        attack.run_attacker(attack_store, attacker="textfooler")
    with pytest.raises(Exception, match=r"parameter 'attackers' must be one of .*got 'textfooler'"):
        get("attack").run(attack_store, attackers=["pwws", "textfooler"])
    # an attacker's own option: an error where no chosen attacker takes it, never dropped
    with pytest.raises(Exception, match=r"attack option\(s\) \['engin'\] are taken by none of \['pwws'\]"):
        get("attack").run(attack_store, attack_options=["engin=openattack"])


def _summary(attacker: str = "pwws", rates=(0.3, 0.35, 0.32, 0.3, 0.6, 0.5, 0.7, 0.65), outcome=None) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "method": ["houlsby"] * 4 + ["full"] * 4,
            "tsp_step": [0, 0, 200, 200] * 2,
            "convention": "openattack",
            "success_rate": list(rates),
            "attacked": 200,
            "attacker": attacker,
        }
    )
    return frame if outcome is None else frame.assign(outcome=outcome)


def _vs_tsp(summary: pd.DataFrame, **params):
    """The attack-vs-tsp figure of ``summary``, through its view (the lines' statistics)."""
    return attack_plots.attack_vs_tsp(**attack_views.success_lines(summary, **params))


def _by_attacker(summary: pd.DataFrame, **params):
    """The attack-by-attacker figure of ``summary``, through its view."""
    return attack_plots.attack_by_attacker(**attack_views.success_lines(summary, **params))


def test_figure_renders(tmp_path):
    path = save_pdf(_vs_tsp(_summary()), tmp_path / "fig5.pdf")
    assert path.read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError, match="gold"):
        _vs_tsp(_summary(), convention="gold")
    for name, info in attacks.ATTACKS.items():  # each attacker's figure is titled by its own label
        ax = _vs_tsp(_summary(name)).axes[0]
        assert ax.get_title().startswith(f"{info.label} attack success (openattack convention")
        assert ax.get_ylabel() == "attack success rate" + (" (%)" if info.success_unit == "%" else "")
    with pytest.raises(ValueError, match="several attackers"):
        _vs_tsp(pd.concat([_summary(), _summary("deepwordbug")]))


def test_a_collapsed_victim_is_no_robustness(tmp_path):
    """A victim stuck at the majority class cannot be flipped: it is drawn as a cross and kept out
    of the mean line (the demo's Han fig 5 once read such a run as robustness)."""
    summary = pd.DataFrame(
        {
            "method": ["houlsby"] * 4,
            "tsp_step": [0, 0, 200, 200],
            "convention": "openattack",
            "success_rate": [0.6, 0.7, 0.65, 0.05],
            "attacked": 50,
            "outcome": ["ok", "ok", "ok", "collapsed"],
        }
    )
    fig = _vs_tsp(summary)
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx([65.0, 65.0])  # TSP 200: the one ok run
    crosses = [l for l in fig.axes[0].get_lines() if l.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_ydata()) == pytest.approx([5.0])
    assert any("collapsed 1/4" in t.get_text() for t in fig.texts)
    kept = _vs_tsp(summary, include_failed=True).axes[0].get_lines()[0]
    assert list(kept.get_ydata()) == pytest.approx([65.0, 35.0])


def test_attackers_side_by_side(tmp_path):
    outcome = ["ok"] * 3 + ["collapsed"] + ["ok"] * 4
    summary = pd.concat(
        [
            _summary("pwws", outcome=outcome),
            _summary("deepwordbug", rates=(0.5, 0.6, 0.55, 0.1, 0.9, 0.8, 0.9, 1.0), outcome=outcome),
        ]
    )
    fig = _by_attacker(summary)
    pwws_ax, bug_ax = fig.axes[:2]
    pwws_label, bug_label = attacks.label_of("pwws"), attacks.label_of("deepwordbug")
    assert pwws_ax.get_title().startswith(pwws_label) and bug_ax.get_title().startswith(bug_label)
    assert pwws_ax.get_shared_y_axes().joined(pwws_ax, bug_ax)
    means = {
        label: [list(l.get_ydata()) for l in ax.get_lines() if l.get_marker() == "o"]
        for label, ax in ((pwws_label, pwws_ax), (bug_label, bug_ax))
    }
    # Lines per panel, methods in order (full, houlsby); the collapsed houlsby run left out.
    assert means[pwws_label] == [pytest.approx([55.0, 67.5]), pytest.approx([32.5, 32.0])]
    assert means[bug_label] == [pytest.approx([85.0, 95.0]), pytest.approx([55.0, 55.0])]
    assert all(len([l for l in ax.get_lines() if l.get_marker() == "x"]) == 1 for ax in (pwws_ax, bug_ax))
    legend = (
        [t.get_text() for t in fig.legends[0].get_texts()]
        if fig.legends
        else [t.get_text() for t in pwws_ax.get_legend().get_texts()]
    )
    assert "houlsby" in " ".join(legend).lower() and "n=1-2 runs per point" in " ".join(legend)
    texts = " ".join(t.get_text() for t in fig.texts)
    assert "collapsed 1/4" in texts and "±1 std" in texts
    assert save_pdf(fig, tmp_path / "fig5-attacks.pdf").read_bytes()[:4] == b"%PDF"
    single = _by_attacker(summary[summary["tsp_step"] == 0].groupby(["attacker", "method"]).head(1))
    assert "one run per TSP step" in " ".join(t.get_text() for t in single.texts)
    with pytest.raises(ValueError, match="no attacker column"):
        _by_attacker(summary.drop(columns="attacker"))


def test_attack_figures_are_registered():
    from robustkit.analysis.registry import load

    by_attacker = figures.get("attack-by-attacker")
    assert by_attacker.analysis == "attack" and by_attacker.resolve()["attackers"] == ["pwws", "deepwordbug"]
    assert by_attacker.resolve(attackers="pwws,deepwordbug")["attackers"] == ["pwws", "deepwordbug"]
    assert load(by_attacker.plot) is attack_by_attacker
    assert load(by_attacker.view) is load(figures.get("attack-vs-tsp").view) is attack_views.success_by_tsp
    assert load(by_attacker.source().compute) is attack.run
    vs_tsp = figures.get("attack-vs-tsp")
    assert vs_tsp.resolve()["attackers"] == ["pwws"]
    assert vs_tsp.resolve(attackers="deepwordbug")["attackers"] == ["deepwordbug"]
    assert set(dict((p.name, p.choices) for p in vs_tsp.parameters)["attackers"]) == set(attacks.ATTACKS)
    with pytest.raises(figures.FigureError):
        vs_tsp.resolve(attackers="textfooler")


def test_the_attacks_recipe_reuses_figure_5s_runs():
    """Han fig 5 with DeepWordBug beside PWWS trains nothing new: the same runs at both scales."""
    from robustkit.verdicts.recipes import load_recipe

    both, pwws_only = load_recipe("han2021/fig5-attacks"), load_recipe("han2021/fig5")
    assert set(both.scales) == set(pwws_only.scales)
    for scale in both.scales:
        assert {s.run_id for s in both.specs(scale)} == {s.run_id for s in pwws_only.specs(scale)}
        params = figures.get(both.figure).resolve(**both.figure_params(scale))
        assert params["attackers"] == ["pwws", "deepwordbug"]
        assert params["n"] == pwws_only.figure_params(scale)["n"]  # PWWS results come from fig 5's cache
    assert not both.claims  # Han et al. ran PWWS only: nothing of theirs to check about DeepWordBug


def test_threads_option_of_the_attack_and_train_commands(monkeypatch, tmp_path):
    """--threads sets torch's CPU threads before an attack starts (before: OMP_NUM_THREADS only);
    for training it is each run's ``threads`` setting (part of its id), whatever --jobs is."""
    import torch

    from robustkit import cli
    from robustkit.sweeps import grid as sweep

    class Started(BaseException):  # not an Exception: main() turns those into a one-line error
        pass

    seen = []

    def record(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise Started

    def record_specs(specs, *args, **kwargs):
        seen.append(sorted({spec.threads for spec in specs}))
        raise Started

    threads = torch.get_num_threads()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()  # a reading verb refuses a missing store before it starts
    try:
        monkeypatch.setattr(attack, "run_attacker", record)
        with pytest.raises(Started):
            cli.main(["analyze", "attack", "store", "--threads", "1"])
        monkeypatch.setattr(sweep, "run_sweep", record_specs)
        for jobs in ("1", "2"):
            with pytest.raises(Started):
                cli.main(["train", "--store", "store", "--model", "bert-tiny", "--threads", "2", "--jobs", jobs])
        with pytest.raises(Started):
            cli.main(["train", "--store", "store", "--model", "bert-tiny"])
    finally:
        torch.set_num_threads(threads)
    assert seen == [1, [2], [2], [1]]
    for argv in (["analyze", "attack", "store", "--threads", "0"], ["train", "--store", "store", "--threads", "0"]):
        try:  # refused as the command line is parsed (argparse exits) or as the verb starts
            code = cli.main(argv)
        except SystemExit as stop:
            code = stop.code
        assert code == 2, argv


def test_attack_boxes_draw_each_methods_success_rates_as_scores(monkeypatch):
    """The zoo's attack figure: per-victim success rates of one convention become per-run scores,
    one box per method; a collapsed victim is marked, not boxed."""
    import pandas as pd

    from robustkit.analysis import attack_views as analysis
    from robustkit.figures.attack import attack_boxes
    from robustkit.figures.style import figure_texts

    rows = [
        dict(
            run_id=f"{m}-{s}",
            task="rt",
            method=m,
            seed=s,
            convention=c,
            success_rate=r + (0.5 if c == "gold" else 0),
            outcome="collapsed" if (m, s) == ("lora", 2) else "ok",
        )
        for m, rates in (("full", [0.9, 0.8, 0.85]), ("lora", [0.6, 0.7, 0.0]))
        for s, r in enumerate(rates)
        for c in ("openattack", "gold")
    ]
    monkeypatch.setattr(analysis, "success_view", lambda *args, **kwargs: pd.DataFrame(rows).assign(attacker="pwws"))
    frame = analysis.success_scores_view(pd.DataFrame(), "unused", checkpoint="best", convention="openattack")
    assert len(frame) == 6 and set(frame["metric"]) == {"pwws success"}
    assert frame.set_index("run_id")["value"].to_dict()["lora-1"] == 0.7  # the openattack convention's rate
    texts = " ".join(
        figure_texts(
            attack_boxes(**analysis.attack_boxes(pd.DataFrame(), "unused", checkpoint="best", convention="openattack"))
        )
    )
    assert f"{attacks.label_of('pwws')} attack success per method" in texts and "collapsed 1/3" in texts
    # titled by the attacker in the data, not by a default of the plot
    monkeypatch.setattr(
        analysis, "success_view", lambda *args, **kwargs: pd.DataFrame(rows).assign(attacker="deepwordbug")
    )
    texts = " ".join(
        figure_texts(
            attack_boxes(**analysis.attack_boxes(pd.DataFrame(), "unused", checkpoint="best", convention="openattack"))
        )
    )
    assert f"{attacks.label_of('deepwordbug')} attack success per method" in texts


def test_figure_5_draws_through_its_view(monkeypatch):
    """attack-vs-tsp and attack-by-attacker: the registered view turns the attacks into the lines
    the plot draws (success_view monkeypatched: no attack runs here)."""
    from robustkit.analysis.registry import call, load

    outcome = ["ok"] * 3 + ["collapsed"] + ["ok"] * 4
    summary = pd.concat([_summary("pwws", outcome=outcome), _summary("deepwordbug", outcome=outcome)])
    monkeypatch.setattr(attack_views, "success_view", lambda *args, **kwargs: summary)
    figure = figures.get("attack-by-attacker")
    shown = figure.shown(pd.DataFrame(), "unused")
    assert shown["lines"].query("attacker == 'pwws' and method == 'houlsby'")["n"].tolist() == [2, 1]
    assert shown["failures"].set_index("method")["n_collapsed"].to_dict() == {"full": 0, "houlsby": 1}
    fig = call(load(figure.plot), (), {**figure.resolve(), **shown})
    assert [ax.get_title().split(" (")[0] for ax in fig.axes[:2]] == [
        attacks.label_of(a) for a in ("pwws", "deepwordbug")
    ]
    with pytest.raises(ValueError, match="several attackers"):
        call(load(figures.get("attack-vs-tsp").plot), (), figures.get("attack-vs-tsp").shown(pd.DataFrame(), "unused"))
