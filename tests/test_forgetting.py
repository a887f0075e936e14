"""Learning vs forgetting (Biderman et al. 2024; issue #30, item 2): the update ranks of planted
low-rank updates in closed form, the held-out glosses against NLTK's WordNet reader, the
masked-LM losses against a direct computation, a fitted head, and the analysis on bert-tiny runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from robustkit import figures
from robustkit.analysis import forgetting, mlm_head
from robustkit.analysis.registry import get, per_run
from robustkit.data import heldout
from robustkit.errors import RobustkitError
from robustkit.figures.style import save_pdf
from robustkit.measures.spectrum import effective_rank, energy_rank, singular_values
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_spec
from robustkit.train.run_model import load_run


def _low_rank(values, d_out=40, d_in=30, seed=0):
    """sum_i values_i u_i v_i^T with orthonormal u, v: singular values ``values`` exactly."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((d_out, len(values))))
    v, _ = np.linalg.qr(rng.standard_normal((d_in, len(values))))
    return u @ np.diag(values) @ v.T


@pytest.mark.parametrize("r", [1, 3, 8, 10])
def test_planted_equal_singular_values_give_rank_r(r):
    values = singular_values(_low_rank(np.full(r, 2.5)))
    assert effective_rank(values) == pytest.approx(r, rel=1e-9)  # exp(log r)
    assert energy_rank(values, 0.9) == math.ceil(0.9 * r)  # r equal shares of the squared norm
    assert energy_rank(values, 1.0) == r


def test_planted_unequal_spectrum_in_closed_form():
    values = singular_values(_low_rank([4.0, 2.0, 1.0, 1.0]))  # squared: 16, 4, 1, 1 of 22
    assert energy_rank(values, 0.7) == 1 and energy_rank(values, 0.9) == 2 and energy_rank(values, 0.99) == 4
    p = np.array([4.0, 2.0, 1.0, 1.0]) / 8
    assert effective_rank(values) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-9)
    assert energy_rank(np.zeros(5)) == 0 and math.isnan(effective_rank(np.zeros(5)))
    with pytest.raises(ValueError, match="fraction"):
        energy_rank(values, 0.0)


def test_glosses_are_wordnets_as_nltk_reads_them():
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from robustkit.assets import asset_path

    texts = set(heldout.glosses())
    assert len(texts) == 117033  # distinct glosses of WordNet 3.0's 117,659 synsets
    root = asset_path(heldout.ASSET)
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))  # NLTK reads only below nltk.data.path
    with pytest.warns(UserWarning, match="multilingual"):
        reader = WordNetCorpusReader(str(root / "corpora" / "wordnet"), None)
    lines = [
        line for line in open(root / "corpora" / "wordnet" / "data.verb", encoding="utf-8") if not line.startswith("  ")
    ]
    for line in lines[::700]:  # 20 verbs across the file: the gloss of each, as NLTK splits it
        synset = reader.synset_from_pos_and_offset("v", int(line.split()[0]))
        gloss = line.partition(" | ")[2].strip()
        assert gloss in texts and gloss.startswith(synset.definition()) and all(e in gloss for e in synset.examples())
    first, second = heldout.sample(50, 3), heldout.sample(50, 3, skip=50)
    assert not set(first) & set(second) and heldout.sample(50, 3) == first  # disjoint, seeded
    with pytest.raises(RobustkitError, match="WordNet has"):
        heldout.sample(10, 0, skip=len(texts))


def _run(store, method, seed=0):
    return next(p for p in run_dirs(store) if read_spec(p).method == method and read_spec(p).seed == seed)


def test_masked_lm_losses_against_a_direct_computation(lora_store):
    run_dir = _run(lora_store, "lora")
    batches = mlm_head.masked_batches(heldout.sample(60, 0), "bert-tiny", 0)
    # step-0: LoRA's B is zero, so the tuned encoder is the pre-trained one and nothing is forgotten
    start = forgetting.masked_lm_losses(run_dir, "step-0", batches, None, "cpu")
    assert start["forgetting"] == 0.0 and start["mlm_loss_base"] == start["mlm_loss_tuned"]
    losses = forgetting.masked_lm_losses(run_dir, "last", batches, None, "cpu")
    assert losses["forgetting"] != 0.0
    model = load_run(run_dir, "last", "cpu").model.eval()
    pretrained = mlm_head.pretrained_masked_lm("bert-tiny", torch.device("cpu"))
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:  # the model's own masked-LM head over the tuned encoder, token by token
            hidden = model.base_model(**{k: v for k, v in batch.items() if k != "labels"})[0]
            logits = pretrained.cls(hidden)
            chosen = batch["labels"] != -100
            total += float(torch.nn.functional.cross_entropy(logits[chosen], batch["labels"][chosen], reduction="sum"))
            count += int(chosen.sum())
    assert losses["mlm_loss_tuned"] == pytest.approx(total / count, rel=1e-5)


def test_a_fitted_head_learns_and_is_seeded():
    texts = heldout.sample(100, 1)
    mlm = mlm_head.pretrained_masked_lm("bert-tiny", torch.device("cpu"))
    assert mlm_head.has_own_head("bert-tiny")
    states, labels = mlm_head.encoder_states(mlm.base_model, mlm_head.masked_batches(texts, "bert-tiny", 1))
    names = mlm_head.reinitialise(mlm, 1)
    assert "cls.predictions.transform.dense.weight" in names and not any(n.startswith("bert.") for n in names)
    before = mlm_head.loss(mlm_head.head_of(mlm), states, labels)
    assert before == pytest.approx(math.log(mlm.config.vocab_size), abs=1.0)  # a fresh head guesses
    fitted = mlm_head.fit_head("bert-tiny", texts, 10, 1, torch.device("cpu"))
    after = mlm_head.loss(
        mlm_head.head_of(mlm_head.pretrained_masked_lm("bert-tiny", torch.device("cpu")), fitted), states, labels
    )
    assert after < before - 1.0  # it learned the pre-trained encoder's readout (on the texts it saw)
    again = mlm_head.fit_head("bert-tiny", texts, 10, 1, torch.device("cpu"))
    assert all(torch.equal(fitted[n], again[n]) for n in fitted)


@pytest.mark.slow
def test_forgetting_of_runs_statistics_and_figure(lora_store, tmp_path):
    frame = get("forgetting").run(lora_store, texts=80, progress=False)
    assert set(frame["head"]) == {"own"}  # bert-tiny has its masked-LM head
    losses = frame[frame["measure"] == "forgetting"].set_index("run_id")["value"]
    assert len(losses) == 5 and frame[frame["measure"] == "mlm_loss_base"]["value"].nunique() == 1
    ranks = frame[frame["measure"] == "energy_rank"]
    assert set(ranks["method"]) == {"full", "lora"}  # the adapter run changed no matrix
    lora = ranks[ranks["method"] == "lora"]
    assert set(lora["kind"]) == {"q", "v"} and (lora["value"] <= 8).all()  # B A has rank <= r = 8
    effective = frame[(frame["measure"] == "effective_rank") & (frame["method"] == "lora")]["value"]
    assert (effective <= 8 + 1e-9).all()
    claimed = per_run("forgetting.forgetting", lora_store, texts=80).set_index("run_id")["value"]
    assert claimed.to_dict() == pytest.approx(losses.to_dict())
    mean = per_run("forgetting.update-rank", lora_store, texts=80).set_index("run_id")["value"]
    direct = ranks[ranks["kind"].isin(["q", "v"])].groupby("run_id")["value"].mean()
    assert mean.to_dict() == pytest.approx(direct.to_dict()) and len(mean) == 4
    fitted = get("forgetting").run(
        lora_store, ["method=lora"], texts=80, head="fitted", head_texts=300, head_steps=5, progress=False
    )
    assert set(fitted["head"]) == {"fitted"} and len(list((lora_store / ".cache" / "forgetting").glob("head-*"))) == 1
    fig = figures.draw("forgetting", lora_store, texts=80)
    assert save_pdf(fig, tmp_path / "forgetting.pdf").stat().st_size > 0
    with pytest.raises(RobustkitError, match="parameter 'head' must be one of"):
        get("forgetting").run(lora_store, texts=80, head="mine", progress=False)
