"""The attacked model: a classifier + its tokenizer, queried without gradients, memoized.

:class:`Victim` answers ``get_prob`` / ``get_pred`` for lists of sentences. It runs the model in
eval mode under ``torch.inference_mode()`` (never a backward pass, unlike OpenAttack's
``TransformersClassifier``), pads each batch only to its longest member (sentences sorted by
length first), and memoizes probabilities by the sentence's token ids: a sentence tokenized
identically is never run twice, and always gets the bit-identical answer, whatever batch it
was first computed in.

Numeric determinism (why the default dtype is float64)
    On CPU the probabilities of one input depend in their last bits on the batch it is run in
    (the padded length changes the order of the attention's reductions, the batch size the
    matrix-multiply kernels). Two engines that batch differently, or one run resumed with an
    empty memo, could then disagree on an argmin between near-equal candidates; the memo
    removes that only for inputs seen before. Measured on rt with bert-tiny (60 test
    sentences, 488 substitute groups, probabilities of the same sentences run in batches of 64
    vs per group): in float32, 7% of the probabilities differ, by up to 7.5e-7; on a confident
    model (head x6), 214 groups have their two best substitutes within 1e-6 and 5 are exact
    ties, so an argmin can flip. In float64 the differences are at most 2.5e-15 and the
    smallest gap is 1.2e-12. The engines matched on every example tried in both precisions
    (150 in float32), but only float64 makes results independent of batching by a wide
    margin, at ~2.2x the CPU time of float32. :meth:`Victim.screening` gives a float32 twin that
    the fast PWWS engine uses with per-decision margins, falling back to float64 (see
    :mod:`robustkit.attacks.pwws`).
"""

from __future__ import annotations

import contextlib
import copy
from collections import OrderedDict

import numpy as np
import torch
from OpenAttack.tags import TAG_English
from OpenAttack.victim.classifiers import Classifier
from torch import nn
from transformers import PreTrainedTokenizerBase

from robustkit.attacks.first_token import first_token_only
from robustkit.attacks.onednn import OneDNNLinear, onednn_linear_keeps_logits

DEFAULT_DTYPE = torch.float64  # see the module docstring
DEFAULT_CACHE_SIZE = 100_000  # sentences (~40 MB for rt-length ones); one attack needs ~100-2000
# A forward pass over fewer tokens than this (rows x padded width) runs on one thread: PWWS's
# greedy checks are batches of 1-4 sentences, where a second thread gains little on a quiet
# machine and loses 3-8x on a busy one (minilm-l6, 34 tokens, 2 shared cores: batch 1 took
# 12.8 ms on one thread, 104 ms on two). Switching the thread count per call costs nothing measurable.
SMALL_BATCH_TOKENS = 256


class Victim:
    """A classification model queried by sentences, with a memo and query counters.

    Parameters
    ----------
    model : nn.Module
        A sequence-classification model (e.g. from :func:`robustkit.train.run_model.load_run_model`);
        put in eval mode. With a ``dtype`` other than its own, a converted copy is used and
        ``model`` is left as it is.
    tokenizer : PreTrainedTokenizerBase
        The model's tokenizer.
    max_length : int
        Token ids kept per sentence (longer ones are truncated, as in training).
    batch_size : int
        Sentences per forward pass.
    dtype : torch.dtype
        Precision of the forward pass and of the returned probabilities.
    cache_size : int
        Sentences memoized (least recently used ones are forgotten first).

    Attributes
    ----------
    queries : int
        Sentences asked for through :meth:`get_prob` / :meth:`get_pred` (repeats included):
        what a victim without memo would have run.
    forwards : int
        Sentences actually run through the model.
    batches : int
        Forward passes (batches) run.
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int = 128,
        batch_size: int = 64,
        dtype: torch.dtype = DEFAULT_DTYPE,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        model.eval()
        if next(model.parameters()).dtype != dtype:
            model = copy.deepcopy(model).to(dtype)
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        self.dtype = dtype
        self.cache_size = cache_size
        self.num_labels = int(model.config.num_labels)
        self._device = next(model.parameters()).device
        self._token_types = "token_type_ids" in tokenizer.model_input_names
        self._memo: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.first_token_only = False  # see screening()
        self.onednn = False  # see screening()
        self.reset_counters()

    def screening(self, dtype: torch.dtype = torch.float32, first_token: bool = True, onednn: bool = True) -> "Victim":
        """A twin of this victim in a lower precision, for :func:`robustkit.attacks.pwws.attack_fast`'s
        certified screening (its own memo and counters; the model is copied, not shared).

        With ``first_token``, the twin's last layer computes the first token only where that
        keeps the logits (:func:`robustkit.attacks.first_token.first_token_only`, checked on a
        probe); the twin's ``first_token_only`` says whether it does. With ``onednn``, its
        linear layers run oneDNN's float32 kernel where that keeps the logits
        (:mod:`robustkit.attacks.onednn`, checked on a probe); its ``onednn`` says whether they do.
        """
        twin = Victim(
            copy.deepcopy(self.model).to(dtype),
            self.tokenizer,
            self.max_length,
            self.batch_size,
            dtype,
            self.cache_size,
        )
        twin.first_token_only = first_token and first_token_only(twin.model)
        twin.onednn = onednn and onednn_linear_keeps_logits(twin.model)
        return twin

    def reset_counters(self) -> None:
        self.queries = 0
        self.forwards = 0
        self.batches = 0

    def clear_cache(self) -> None:
        """Forget every memoized probability (counters are kept)."""
        self._memo.clear()

    def get_prob(self, sentences: list[str]) -> np.ndarray:
        """Class probabilities.

        Parameters
        ----------
        sentences : list of str, length n

        Returns
        -------
        numpy.ndarray, shape (n, num_labels), float64 (computed from ``dtype`` logits)
        """
        self.queries += len(sentences)
        if not sentences:
            return np.empty((0, self.num_labels), dtype=np.float64)
        keys = self._keys(sentences)
        rows = {key: self._memo[key] for key in keys if key in self._memo}
        for key in rows:
            self._memo.move_to_end(key)  # recently used
        missing = [key for key in dict.fromkeys(keys) if key not in rows]
        rows.update(self._run(missing))
        return np.stack([rows[key] for key in keys])

    def get_pred(self, sentences: list[str]) -> np.ndarray:
        """Predicted class of each sentence (first maximum), shape (n,)."""
        return self.get_prob(sentences).argmax(axis=1)

    def _keys(self, sentences: list[str]) -> list[bytes]:
        """Memo key of each sentence: its token ids as int32 bytes."""
        encoded = self.tokenizer(sentences, truncation=True, max_length=self.max_length)["input_ids"]
        return [np.asarray(ids, dtype=np.int32).tobytes() for ids in encoded]

    def _run(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """Probabilities of distinct, not memoized inputs, in length-sorted padded batches."""
        ids = sorted((np.frombuffer(key, dtype=np.int32) for key in keys), key=len)
        out = {}
        for start in range(0, len(ids), self.batch_size):
            batch = ids[start : start + self.batch_size]
            for row, probs in zip(batch, self._forward(batch)):
                out[row.tobytes()] = probs.copy()  # not a view: evicting it frees its memory
        self.forwards += len(keys)
        for key, probs in out.items():
            self._memo[key] = probs
        while len(self._memo) > self.cache_size:
            self._memo.popitem(last=False)
        return out

    def _forward(self, batch: list[np.ndarray]) -> np.ndarray:
        """Softmax probabilities of one batch of token-id rows, shape (len(batch), num_labels)."""
        self.batches += 1
        width = max(len(row) for row in batch)
        input_ids = np.full((len(batch), width), self.tokenizer.pad_token_id, dtype=np.int64)
        attention = np.zeros((len(batch), width), dtype=np.int64)
        for i, row in enumerate(batch):
            input_ids[i, : len(row)] = row
            attention[i, : len(row)] = 1
        inputs = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention)}
        if self._token_types:
            inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])  # single sentences
        threads = torch.get_num_threads()
        if input_ids.size < SMALL_BATCH_TOKENS and self._device.type == "cpu":
            torch.set_num_threads(1)
        try:
            with torch.inference_mode(), OneDNNLinear() if self.onednn else contextlib.nullcontext():
                logits = self.model(**{k: v.to(self._device) for k, v in inputs.items()}).logits
                # float64 softmax: a float32 victim's probabilities then carry only its logits' error.
                return torch.softmax(logits.to(torch.float64), dim=-1).cpu().numpy()
        finally:
            torch.set_num_threads(threads)


class _OpenAttackVictim(Classifier):
    """OpenAttack's view of a :class:`Victim`.

    OpenAttack's ``Classifier`` wraps ``get_pred`` / ``get_prob`` to check inputs and count
    queries (its ``set_context`` / ``context.invoke`` / ``invoke_limit`` machinery); both
    delegate to the victim, so no gradient is ever taken.
    """

    def __init__(self, victim: Victim) -> None:
        self.victim = victim

    @property
    def TAGS(self):
        # PWWS and AttackEval check that the victim speaks the attacker's language.
        return super().TAGS | {TAG_English}

    def get_prob(self, input_: list[str]) -> np.ndarray:
        return self.victim.get_prob(input_)

    def get_pred(self, input_: list[str]) -> np.ndarray:
        return self.victim.get_pred(input_)


def as_openattack(victim: Victim) -> Classifier:
    """The victim as an ``OpenAttack.classifiers.Classifier`` (for ``PWWSAttacker``, ``AttackEval``)."""
    return _OpenAttackVictim(victim)
