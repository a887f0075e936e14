"""Representation similarity of tuned runs vs the base model, on a tiny store of bert-tiny runs."""

import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from robustkit.analysis import similarity
from robustkit.analysis.registry import get as analysis
from robustkit.analysis.representations import (
    TokensFittedWarning,
    _candidates,
    _encode,
    load_base,
    representations,
    sample_tokens,
)
from robustkit.errors import RobustkitError
from robustkit.figures.similarity import rsa_by_layer
from robustkit.figures.style import save_pdf
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import load_checkpoint, save_checkpoint
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_manifest
from robustkit.train import train
from robustkit.train.run_model import load_run_model

TOKENS = 300
N_LAYERS = 2  # bert-tiny


@pytest.fixture(scope="module")
def rt_store(tmp_path_factory):
    """Two bert-tiny runs on rt, houlsby and full: the `tiny_spec` settings, cut to 2 steps."""
    spec = RunSpec(
        model="bert-tiny",
        task="rt",
        method="houlsby",
        seed=1,
        train_size=32,
        epochs=1,
        batch_size=16,
        max_length=32,
        adapter_size=16,
    )
    root = tmp_path_factory.mktemp("similarity")
    for method_spec in (spec, dataclasses.replace(spec, method="full", adapter_size=None)):
        train(method_spec, root / "runs", progress=False)
    return root / "runs"


def _run_dir(runs, method):
    return next(p for p in run_dirs(runs) if f"-{method}-" in p.name)


def test_token_sample_is_shared_seeded_and_skips_special_tokens(rt_store):
    houlsby = sample_tokens(_run_dir(rt_store, "houlsby"), TOKENS, seed=0)
    full = sample_tokens(_run_dir(rt_store, "full"), TOKENS, seed=0)
    assert len(houlsby) == TOKENS and houlsby.digest == full.digest  # one sample for every run
    assert sample_tokens(_run_dir(rt_store, "full"), TOKENS, seed=1).digest != houlsby.digest
    tokenizer = houlsby.tokenizer
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    assert not special & set(houlsby.token_id.tolist())
    assert (houlsby.position >= 1).all()  # position 0 is [CLS]
    rows = houlsby.positions
    assert all(houlsby.features[r]["input_ids"][p] == t for (r, p), t in zip(rows.tolist(), houlsby.token_id))
    with pytest.warns(TokensFittedWarning, match=f"all {houlsby.available} are used") as noted:
        every = sample_tokens(_run_dir(rt_store, "full"), houlsby.available + 1)
    assert len(every) == houlsby.available and len(noted) == 1 and "\n" not in str(noted[0].message)
    assert "at max length 32" in str(noted[0].message)  # counted at the runs' own length
    with pytest.raises(RobustkitError, match="cannot sample"):
        sample_tokens(_run_dir(rt_store, "full"), 0)


def test_sentence_pairs_skip_added_and_spelled_out_separators(tiny_model):
    tokenizer = load_tokenizer(tiny_model)
    encoded = _encode([("a fine film [SEP] yes", "dull"), ("ok", "no [UNK] way")], tokenizer, 16)
    example, position, token_id = _candidates(encoded, tokenizer)
    words = [tokenizer.convert_ids_to_tokens(int(t)) for t in token_id]
    assert words == ["a", "fine", "film", "yes", "dull", "ok", "no", "[UNK]", "way"]  # [UNK] is a word
    assert example.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert position.tolist() == [1, 2, 3, 5, 7, 1, 3, 4, 5]


def test_representations_are_each_tokens_own_hidden_states(rt_store):
    """Batching, padding and length-sorting must not mix up which token a row belongs to."""
    sample = sample_tokens(_run_dir(rt_store, "houlsby"), 40, seed=3)
    model = load_run_model(_run_dir(rt_store, "houlsby"), "best")
    reps = representations(model, sample, batch_size=7)
    assert reps.shape == (N_LAYERS + 1, 40, 128)
    for i in (0, 17, 39):
        row, position = sample.positions[i].tolist()
        ids = torch.tensor([sample.features[row]["input_ids"]])
        with torch.no_grad():
            alone = model(input_ids=ids, output_hidden_states=True).hidden_states
        for layer in range(N_LAYERS + 1):
            torch.testing.assert_close(reps[layer, i], alone[layer][0, position], rtol=1e-4, atol=1e-5)


def test_step0_checkpoint_matches_the_base(rt_store):
    frame = analysis("rsa").run(rt_store, tokens=TOKENS, checkpoint="step-0", progress=False)
    assert list(frame.columns) == [*similarity.COLUMNS, "outcome"]
    assert sorted(frame["layer"].unique()) == list(range(N_LAYERS + 1))
    assert len(frame) == 2 * 2 * (N_LAYERS + 1)  # runs x measures x layers
    # adapters sit inside the encoder layers: the embedding output is the base's, exactly
    houlsby_embeddings = frame.query("method == 'houlsby' and layer == 0")
    assert np.allclose(houlsby_embeddings["value"], 1.0, atol=1e-9)
    # near-identity adapters at initialisation: close to the base, but not the base
    assert frame.query("method == 'houlsby' and layer > 0")["value"].between(0.99, 1.0).all()
    # full fine-tuning's theta_0 is the pretrained model itself
    assert np.allclose(frame.query("method == 'full'")["value"], 1.0, atol=1e-9)


def test_values_bounded_cached_and_recomputed_on_a_new_checkpoint(rt_store, monkeypatch):
    calls = {"base": 0, "run": 0}

    def counting(name, original):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(similarity, "base_representations", counting("base", similarity.base_representations))
    monkeypatch.setattr(similarity, "run_representations", counting("run", similarity.run_representations))
    first = analysis("rsa").run(rt_store, ["task=rt"], tokens=TOKENS, checkpoint="best", progress=False)
    assert calls == {"base": 1, "run": 2}  # the base pass is shared by the (model, task) group
    assert first["value"].between(-1.0, 1.0).all() and first["tokens"].eq(TOKENS).all()
    again = analysis("rsa").run(rt_store, ["task=rt"], tokens=TOKENS, checkpoint="best", progress=False)
    assert calls == {"base": 1, "run": 2}  # cache hit: no model loaded at all
    assert again.equals(first)
    # a changed checkpoint of one run: only that run is computed again
    run_dir = _run_dir(rt_store, "full")
    tensors, metadata = load_checkpoint(run_dir, "best")
    name = next(n for n in tensors if n.endswith("encoder.layer.1.output.dense.weight"))
    tensors[name] = tensors[name] + 0.05 * torch.randn_like(tensors[name])
    save_checkpoint(run_dir, "best", tensors, metadata, read_manifest(run_dir)["checkpoints"]["best"]["step"])
    changed = analysis("rsa").run(rt_store, ["task=rt"], tokens=TOKENS, checkpoint="best", progress=False)
    assert calls == {"base": 2, "run": 3}
    top = changed.query("method == 'full' and layer == 2 and measure == 'rsa'")["value"].item()
    assert top < first.query("method == 'full' and layer == 2 and measure == 'rsa'")["value"].item()


def test_base_model_hidden_states_ignore_the_random_head(rt_store):
    sample = sample_tokens(_run_dir(rt_store, "full"), 20, seed=0)
    a = representations(load_base("bert-tiny", "rt"), sample)
    head = load_base("bert-tiny", "rt")
    torch.nn.init.normal_(head.classifier.weight)
    assert torch.equal(a, representations(head, sample))


def test_figure_renders_to_pdf(rt_store, tmp_path):
    frame = analysis("rsa").run(rt_store, tokens=TOKENS, checkpoint="step-0", progress=False)
    for measure in ("rsa", "cka"):
        fig = rsa_by_layer(frame, measure)
        assert "rt" in fig.axes[0].get_title() and f"{TOKENS} dev tokens" in fig.axes[0].get_title()
        path = save_pdf(fig, tmp_path / f"he2021_fig2_{measure}.pdf")
        assert path.read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError, match="no rows"):
        rsa_by_layer(frame, "cca")


def test_non_finite_representations_are_nan_in_the_frame_warned_and_counted_apart():
    base = torch.randn(3, 20, 8, dtype=torch.float64)
    tuned = base + 0.1 * torch.randn_like(base)
    tuned[2, 5, 1] = float("nan")  # the last layer of a diverged checkpoint
    frame = similarity.compare(base, tuned)
    assert frame.query("layer == 2")["value"].isna().all()  # never 1.0, "unchanged"
    assert frame.query("layer < 2")["value"].between(0.0, 1.0).all()
    two_runs = pd.concat(
        [frame.assign(run_id="ok", seed=0, value=frame["value"].fillna(0.9)), frame.assign(run_id="bad", seed=1)]
    )
    summary = similarity.summarize(two_runs).set_index(["layer", "measure"])
    assert (summary.loc[2, "n_nan"] == 1).all() and (summary.loc[2, "runs"] == 1).all()
    assert (summary.loc[2, "mean"] == 0.9).all()  # the NaN run is not averaged in as a value
    assert (summary.loc[0, "n_nan"] == 0).all() and (summary.loc[0, "runs"] == 2).all()


def test_a_run_with_non_finite_weights_gets_nan_and_a_warning(rt_store, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(rt_store, runs)
    run_dir = _run_dir(runs, "full")
    tensors, metadata = load_checkpoint(run_dir, "best")
    name = next(n for n in tensors if n.endswith("encoder.layer.1.output.dense.weight"))
    tensors[name][0, 0] = float("nan")
    save_checkpoint(run_dir, "best", tensors, metadata, read_manifest(run_dir)["checkpoints"]["best"]["step"])
    with pytest.warns(UserWarning, match=r"NaN for 1 run.*layers 2"):
        frame = analysis("rsa").run(runs, ["method=full"], tokens=TOKENS, checkpoint="best", progress=False)
    assert frame.query("layer == 2")["value"].isna().all()
    assert frame.query("layer < 2")["value"].notna().all()
    # cached as NaN too: a second call gives the same frame, and warns again
    with pytest.warns(UserWarning, match="NaN"):
        again = analysis("rsa").run(runs, ["method=full"], tokens=TOKENS, checkpoint="best", progress=False)
    pd.testing.assert_frame_equal(again, frame)


def test_figure_leaves_collapsed_runs_out_and_counts_them():
    """A collapsed run's representations are no result: not in the mean, counted in the legend."""
    rows = [
        {
            "run_id": f"r{seed}",
            "task": "rt",
            "method": "prefix",
            "model": "m",
            "layer": layer,
            "measure": "rsa",
            "value": value,
            "outcome": outcome,
            "seed": seed,
        }
        for seed, (value, outcome) in enumerate([(0.9, "ok"), (0.1, "collapsed"), (0.2, "collapsed")])
        for layer in (0, 1)
    ]
    fig = rsa_by_layer(pd.DataFrame(rows), "rsa")
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == [0.9, 0.9]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("n=1 run; 2 collapsed left out" in label for label in labels), labels
    every_run_failed = rsa_by_layer(pd.DataFrame(rows).query("outcome == 'collapsed'"), "rsa")
    assert any(
        "n=0 runs; 2 collapsed left out" in t.get_text() for t in every_run_failed.axes[0].get_legend().get_texts()
    )
