"""Every verb that runs a model takes --device (the notebook functions device=); the device a
result was computed on is recorded with the cached frame, never in its key."""

from __future__ import annotations

import shutil
import warnings

import pandas as pd
import pytest

from robustkit import figures
from robustkit.analysis import registry
from robustkit.analysis.registry import ANALYSES
from robustkit.checks.analysis import loads_a_model
from robustkit.cli import build_parser

# Derived from the registry, so a new analysis that loads a model is checked without listing it.
# (robustkit.checks.analysis reads which analyses load a model; its rules "device", "per-run loop"
# and "progress bar" hold each to the contract, tests/test_check.py runs them on every analysis)
MODEL_ANALYSES = {name for name, analysis in ANALYSES.items() if loads_a_model(analysis)}
BAD = "nonsense"  # torch.device refuses it: a device that reaches the analysis fails loudly


def _flags(argv: list[str]) -> set[str]:
    """The option strings of the parser of ``robustkit argv... --help``."""
    import argparse

    parser = build_parser()
    for token in argv:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[token]
    return {flag for action in parser._actions for flag in action.option_strings}


def test_the_model_analyses_are_found():
    """The derivation finds the analyses that load weights, and not those that read manifests."""
    assert {"rsa", "landscape", "intruders", "forgetting"} <= MODEL_ANALYSES
    assert not {"scores", "curves", "gradnorm", "tradeoff"} & MODEL_ANALYSES


@pytest.mark.parametrize("name", sorted(MODEL_ANALYSES))
def test_the_analyze_verb_has_the_flag(name):
    assert "--device" in _flags(["analyze", name])


@pytest.mark.parametrize("name", sorted(n for n, f in figures.FIGURES.items() if f.analysis in MODEL_ANALYSES))
def test_the_plot_verb_of_a_model_figure_has_the_flag(name):
    assert "--device" in _flags(["plot", name])


@pytest.mark.parametrize("verb", ["train", "sweep", "reproduce", "claims", "demo", "import"])
def test_the_other_verbs_that_run_models_have_the_flag(verb):
    assert "--device" in _flags([verb])


@pytest.fixture
def store(tiny_store, tmp_path):
    """A copy of the shared tiny store (houlsby and full on the tiny RTE), its cache empty."""
    copy = tmp_path / "runs"
    shutil.copytree(tiny_store, copy, ignore=shutil.ignore_patterns(".cache"))
    return copy


LANDSCAPE = {"alphas": "0,1", "checkpoint": "last"}


def test_the_device_is_provenance_not_key(store):
    landscape = registry.get("landscape")
    first = landscape.run(store, device="cpu", progress=False, **LANDSCAPE)
    files = sorted((store / ".cache" / "landscape").glob("*.parquet"))
    assert len(files) == 2  # one per run
    provenance = first.attrs["provenance"]
    assert set(provenance) == set(first["run_id"])
    for record in provenance.values():
        assert record["device"] == "cpu" and record["torch"] and record["computed"]
        # kept in the cached file itself
    assert {pd.read_parquet(f).attrs["provenance"]["device"] for f in files} == {"cpu"}
    again = landscape.run(store, device=None, progress=False, **LANDSCAPE)  # another spelling, the same key
    assert sorted((store / ".cache" / "landscape").glob("*.parquet")) == files
    assert again.attrs["provenance"] == provenance  # read back, not recomputed
    pd.testing.assert_frame_equal(again, first)


def test_every_model_analysis_records_its_device(store):
    """One cheap setting of each model analysis but the attack (tests/test_analysis_attack.py)."""
    cheap = {
        "rsa": {"tokens": 40},
        "similarity-ci": {"tokens": 40, "resamples": 4, "groups": 4},
        "ablation": {},
        "landscape": LANDSCAPE,
        "curvature": {"checkpoints": ["last"], "examples": 4, "max_iterations": 2, "samples": 2, "grouping": "none"},
        "surface": {"grid": "0,1", "examples": 4},
        "intruders": {"top_k": 2},  # the full run's matrices; the adapter run changed none (warned)
    }
    for name, params in cheap.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            frame = registry.get(name).run(store, device="cpu", progress=False, **params)
        assert frame.attrs["provenance"] and {r["device"] for r in frame.attrs["provenance"].values()} == {"cpu"}, name


def test_connectivity_records_its_device(tmp_path, rte_folder):
    import dataclasses

    from conftest import TINY_RTE

    from robustkit.train import train

    glue = rte_folder(tmp_path / "glue")
    for seed in (0, 1):
        train(
            dataclasses.replace(TINY_RTE, method="full", seed=seed, epochs=1, data_dir=str(glue)),
            tmp_path / "runs",
            progress=False,
        )
    frame = registry.get("connectivity").run(tmp_path / "runs", device="cpu", progress=False, alphas="0,1", examples=4)
    (pair,) = frame.attrs["provenance"]
    assert "+" in pair and frame.attrs["provenance"][pair]["device"] == "cpu"


def test_device_reaches_the_analysis_from_every_entry_point(store, capsys):
    """A device torch refuses is refused by the analysis wherever it is given, before any work (as
    ``train --device`` is; issue #38 item 6): it is routed, not dropped."""
    from robustkit.cli import main
    from robustkit.errors import RobustkitError

    with pytest.raises(RobustkitError, match=BAD):
        registry.get("landscape").run(store, device=BAD, **LANDSCAPE)
    with pytest.raises(RobustkitError, match=BAD):
        figures.data("landscape", store, device=BAD, **LANDSCAPE)
    with pytest.raises(RobustkitError, match=BAD):
        figures.draw("landscape", store, device=BAD, **LANDSCAPE)
    with pytest.raises(RobustkitError, match=BAD):
        registry.per_run("landscape.curvature", store, device=BAD, alphas="-1:1:5", checkpoint="last")
    assert not (store / ".cache" / "landscape").exists()  # refused before any run was analysed
    for argv in (["plot", "landscape", str(store), "-o", str(store / "x.pdf")], ["analyze", "landscape", str(store)]):
        with pytest.raises(SystemExit) as refused:  # while parsing: the command line's one-line error
            main([*argv, "--alphas", "0,1", "--device", BAD])
        assert refused.value.code == 2
        assert BAD in capsys.readouterr().err
    # an analysis that loads no model takes the notebook's device= and ignores it
    assert len(registry.per_run("scores.score", store, device=BAD)) == 2
    assert not figures.data("tradeoff", store, device=BAD).empty


def test_the_device_contract_is_checked_when_an_analysis_runs(tmp_path, monkeypatch):
    """Issue #48 item 1: the contract is in the declaration, not only in the check's source reading:
    an analysis declaring DEVICE whose function lacks ``progress``, or one taking ``device`` without
    the option, is refused in one line naming what is missing (names no real module would use)."""
    import types

    from robustkit.analysis.declare import DEVICE, Analysis, AnalysisError

    module = types.ModuleType("zz_contract_probe")

    def lacks_progress(store, select, device=None):
        return pd.DataFrame({"value": [1.0]})

    def undeclared(store, select, device=None, progress=True):
        return pd.DataFrame({"value": [1.0]})

    module.lacks_progress, module.undeclared = lacks_progress, undeclared
    monkeypatch.setitem(__import__("sys").modules, "zz_contract_probe", module)
    first = Analysis("zz-probe-one", "probe", "probe", "zz_contract_probe:lacks_progress", options=(DEVICE,))
    with pytest.raises(AnalysisError, match="declares DEVICE but its function takes no 'progress'") as refused:
        first.run(tmp_path)
    assert "\n" not in str(refused.value)
    second = Analysis("zz-probe-two", "probe", "probe", "zz_contract_probe:undeclared")
    with pytest.raises(AnalysisError, match="no DEVICE option"):
        second.run(tmp_path)
    third = Analysis("zz-probe-three", "probe", "probe", "zz_contract_probe:undeclared", options=(DEVICE,))
    with pytest.raises(AnalysisError, match="recorded no provenance"):
        third.run(tmp_path)
