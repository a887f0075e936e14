"""Token representations at every layer, for similarity analyses (He et al. 2021 §2.2).

:func:`sample_tokens` draws, once, the n tokens that every model of a task is compared on: token
positions of the task's dev set, [CLS]/[SEP]/[PAD] skipped. :func:`layer_representations`
gathers a model's hidden states at those positions, from the embeddings (layer 0) through
every encoder layer.

Two choices make the sample the *same* for the base model and every tuned run of a task:

- the dev set is the task's own validation split (the full-data one: GLUE's dev set, the
  embedded tasks' fixed 10 %), as in He et al. figure 7 ("the original training and dev sets"),
  not a run's low-resource validation split, which depends on its ``train_size``;
- the inputs are truncated at one ``max_length`` for every run of a task, the base model's pass
  included: by default the smallest ``max_length`` the compared runs trained at
  (:func:`analysis_length`; methods may differ, e.g. 256 for adapters and 128 for full
  fine-tuning in He et al.), so that no sampled token lies at a position some run never trained
  on, and the tokens a split holds are counted at the length the runs saw.

So the sample depends only on (task, data_dir, split, tokenizer, max_length, seed). A split
holding fewer tokens than asked gives all it has, with a :class:`TokensFittedWarning`; the count
used is the sample's length (the ``tokens`` column of the frames).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase

from robustkit.analysis.notes import AnalysisNote
from robustkit.analysis.registry import TOKENS
from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.errors import RobustkitError
from robustkit.models import pretrained as models
from robustkit.specs.spec import RunSpec
from robustkit.store.run_data import check_run_data, run_spec, run_task
from robustkit.train.evaluate import eval_batches

MAX_LENGTH = 128  # the length of runs that record none (a spec always does)
NON_MODEL_KEYS = ("order", "labels")


class TokensFittedWarning(AnalysisNote):
    """A split holds fewer tokens than the analysis asked for: all of them are used."""


def analysis_length(max_lengths) -> int:
    """The truncation length of one task's token sample: the smallest ``max_length`` among the
    compared runs (iterable of ints; NaN and None skipped), :data:`MAX_LENGTH` if none is known."""
    known = [int(v) for v in max_lengths if v is not None and v == v]
    return min(known) if known else MAX_LENGTH


@dataclass(frozen=True, eq=False)
class TokenSample:
    """The sampled tokens of a task's dev set and the encoded examples that hold them.

    Attributes
    ----------
    task, model, split : str
        Where the tokens come from (``model`` names the tokenizer).
    max_length, seed : int
    features : list of dict
        Encoded dev examples holding at least one sampled token, in dev order
        (``input_ids``, ``attention_mask``, ...), ready for :func:`robustkit.train.evaluate.eval_batches`.
    example : numpy.ndarray of int, shape (n,)
        Row of each token's example in the dev split.
    position : numpy.ndarray of int, shape (n,)
        Index of each token in its example's ``input_ids``.
    token_id : numpy.ndarray of int, shape (n,)
    available : int
        Number of non-special tokens the dev set has (the population sampled from).
    """

    task: str
    model: str
    split: str
    max_length: int
    seed: int
    features: list[dict] = field(repr=False)
    example: np.ndarray = field(repr=False)
    position: np.ndarray = field(repr=False)
    token_id: np.ndarray = field(repr=False)
    available: int
    tokenizer: PreTrainedTokenizerBase = field(repr=False)

    def __len__(self) -> int:
        return len(self.example)

    @property
    def positions(self) -> Tensor:
        """LongTensor (n, 2): (row in :attr:`features`, token position) of each token."""
        rows = np.searchsorted(np.unique(self.example), self.example)
        return torch.from_numpy(np.stack([rows, self.position], axis=1).astype(np.int64))

    @property
    def digest(self) -> str:
        """sha256 of the sampled token ids and their places: changes if data or tokenizer do."""
        digest = hashlib.sha256()
        for array in (self.example, self.position, self.token_id):
            digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def batches(self, batch_size: int = 64) -> list[dict[str, Tensor]]:
        """The examples in padded batches (sorted by length), each with an ``order`` entry."""
        return eval_batches(self.features, batch_size, data.classification_collator(self.tokenizer))


def sample_tokens(
    source: str | Path | RunSpec,
    n_tokens: int = TOKENS.default,
    seed: int = 0,
    max_length: int | None = None,
    split: str = "validation",
) -> TokenSample:
    """Draw ``n_tokens`` token positions from a task's dev set, without replacement; all of
    them, with a one-line :class:`TokensFittedWarning`, where the split has fewer.

    Parameters
    ----------
    source : path or RunSpec
        A run folder (its manifest's spec) or a spec; only its model (tokenizer), task and
        ``data_dir`` are used.
    n_tokens : int
        Tokens to sample (He et al.: 5000); at most the split's.
    seed : int
        Seed of the draw.
    max_length : int, optional
        Truncation length of the inputs, in tokens; default the run's own ``max_length``.
    split : str
        ``validation`` (the dev set), ``test`` or ``train`` of the full-data splits.

    Returns
    -------
    TokenSample
        Tokens in (example, position) order.

    Raises
    ------
    RobustkitError
        Unknown split, ``n_tokens`` < 1, or a split without tokens.
    """
    spec = _spec(source)
    max_length = spec.max_length if max_length is None else max_length
    task = run_task(spec, None if isinstance(source, RunSpec) else source)
    if split not in tasks.SPLITS:
        raise RobustkitError(f"unknown split {split!r}; known: {', '.join(tasks.SPLITS)}")
    check_run_data(spec)  # the full-data splits of the data the run recorded
    dataset = tasks.load_splits(task, data_dir=spec.data_dir)[split]
    tokenizer = models.load_tokenizer(spec.model)
    encoded = _encode(data.split_texts(dataset, task.text_fields), tokenizer, max_length)
    example, position, token_id = _candidates(encoded, tokenizer)
    if n_tokens < 1 or len(example) == 0:
        raise RobustkitError(
            f"cannot sample {n_tokens} tokens: the {split} split of {task.name!r} has {len(example)} "
            f"tokens besides special ones (at max length {max_length})"
        )
    if n_tokens > len(example):
        warnings.warn(
            f"the {split} split of {task.name!r} has {len(example)} tokens besides special ones at max length "
            f"{max_length}, fewer than the {n_tokens} asked: all {len(example)} are used (the frame's tokens column)",
            TokensFittedWarning,
            stacklevel=2,
        )
        n_tokens = len(example)
    chosen = np.sort(np.random.default_rng(seed).choice(len(example), size=n_tokens, replace=False))
    keys = [k for k in encoded if k != "special_tokens_mask"]
    rows = np.unique(example[chosen])
    features = [{k: encoded[k][int(i)] for k in keys} for i in rows]
    return TokenSample(
        task=task.name,
        model=spec.model,
        split=split,
        max_length=max_length,
        seed=seed,
        features=features,
        example=example[chosen],
        position=position[chosen],
        token_id=token_id[chosen],
        available=len(example),
        tokenizer=tokenizer,
    )


def _spec(source: str | Path | RunSpec) -> RunSpec:
    if isinstance(source, RunSpec):
        return source
    return run_spec(source)  # its data as the run recorded it


def _encode(texts: list[tuple[str, ...]], tokenizer: PreTrainedTokenizerBase, max_length: int):
    if not texts:
        raise RobustkitError("cannot sample tokens from an empty split")
    return tokenizer(*zip(*texts), truncation=True, max_length=max_length, return_special_tokens_mask=True)


def _candidates(encoded, tokenizer: PreTrainedTokenizerBase) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(example, position, token id) of every token that is not special, flattened in order.

    Special = what the tokenizer added ([CLS], [SEP], <s>, </s>: its special-tokens mask), plus
    any [PAD]/[CLS]/[SEP]/BOS/EOS id that the text itself spelled out. [UNK] stays: it stands
    for a word of the text.
    """
    ids = [np.asarray(x, dtype=np.int64) for x in encoded["input_ids"]]
    lengths = np.array([len(x) for x in ids])
    flat = np.concatenate(ids)
    added = np.concatenate([np.asarray(x, dtype=bool) for x in encoded["special_tokens_mask"]])
    structural = [
        tokenizer.pad_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
    ]
    keep = ~added & ~np.isin(flat, [i for i in structural if i is not None])
    example = np.repeat(np.arange(len(ids)), lengths)
    position = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return example[keep], position[keep], flat[keep]


@torch.no_grad()
def layer_representations(
    model: nn.Module, batches: list[dict[str, Tensor]], positions: Tensor, device: str | torch.device | None = None
) -> Tensor:
    """Hidden states of the embeddings and every encoder layer at the given token positions.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A BERT-style model (adapters, if any, active as trained); put in eval mode for the call.
    batches : list of dict
        Padded model inputs, each with ``order``: the rows (into the features the positions
        refer to) of its examples, as :func:`robustkit.train.evaluate.eval_batches` makes them.
    positions : LongTensor, shape (n, 2)
        (example row, token position) of each wanted token.
    device : str or torch.device, optional
        Where the forward passes run (default: where the model is).

    Returns
    -------
    Tensor, shape (n_layers + 1, n, hidden_size), float32, on CPU
        Layer 0 is the embedding output, layer l the output of encoder layer l.

    Raises
    ------
    RobustkitError
        A position whose example is in no batch, or past its example's length.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model_device, was_training = next(model.parameters()).device, model.training
    model.to(device).eval()
    try:
        return _gather(model, batches, positions.long(), device)
    finally:
        model.to(model_device).train(was_training)


def _gather(model: nn.Module, batches: list[dict[str, Tensor]], positions: Tensor, device: torch.device) -> Tensor:
    out: Tensor | None = None
    filled = torch.zeros(len(positions), dtype=torch.bool)
    slot = torch.full((int(positions[:, 0].max()) + 1,), -1, dtype=torch.long)  # example row -> batch row
    for batch in batches:
        order = batch["order"]
        known = order < len(slot)
        slot.fill_(-1)
        slot[order[known]] = torch.nonzero(known).flatten()
        wanted = torch.nonzero(slot[positions[:, 0]] >= 0).flatten()
        if len(wanted) == 0:
            continue
        rows, columns = slot[positions[wanted, 0]], positions[wanted, 1]
        if "attention_mask" in batch and bool((columns >= batch["attention_mask"].sum(dim=1)[rows]).any()):
            raise RobustkitError("a token position lies past the end of its example")
        inputs = {k: v.to(device) for k, v in batch.items() if k not in NON_MODEL_KEYS}
        hidden = model(**inputs, output_hidden_states=True).hidden_states
        # Gather per layer: stacking whole hidden states first would hold (L+1) x B x T x d.
        rows, columns = rows.to(device), columns.to(device)
        picked = torch.stack([h[rows, columns] for h in hidden]).float().cpu()
        if out is None:
            out = torch.empty(picked.shape[0], len(positions), picked.shape[-1])
        out[:, wanted] = picked
        filled[wanted] = True
    if out is None or not bool(filled.all()):
        raise RobustkitError(f"{int((~filled).sum())} token positions have no example in the batches")
    return out


def representations(
    model: nn.Module, sample: TokenSample, batch_size: int = 64, device: str | torch.device | None = None
) -> Tensor:
    """:func:`layer_representations` of ``model`` at the tokens of ``sample``.

    Returns
    -------
    Tensor, shape (n_layers + 1, len(sample), hidden_size), float32
    """
    return layer_representations(model, sample.batches(batch_size), sample.positions, device)


def load_base(model: str, task: str) -> nn.Module:
    """The pretrained model as loaded, in eval mode: what tuned runs are compared with.

    Its classification head is random (seed 0), which does not touch the hidden states.
    """
    return models.load_classifier(model, tasks.get_task(task).num_labels, seed=0).eval()
