"""How good trained heads are: per-head rank accuracy on held-out answers, their cost per
decode step, and the tau of Medusa decoding on held-out prompts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

from .data import Dataset, TrainPrompt, labels
from .heads import HeadWeights
from .train import MISSING, to_draft

if TYPE_CHECKING:
    from ...model import Model

RANK_TOPK = 10  # ranks kept in a heads file's rank_accuracy


def rank_accuracy(weights: HeadWeights, hidden: npt.NDArray[np.floating], labels_full: npt.NDArray[np.int32],
                  topk: int = RANK_TOPK, chunk: int = 1024,
                  tokens: npt.NDArray[np.int32] | None = None) -> npt.NDArray[np.float64]:
    """[K, topk]: entry [k, i] is the fraction of held-out rows (those with a label for head
    k + 1; labels_full [N, K] in full-vocabulary ids) where head k + 1 ranked the label i-th.
    A label outside the draft vocabulary is never ranked (a miss at every rank). `tokens`
    [N]: the token after each row (full ids), which token-conditioned heads read."""
    if weights.conditioned and tokens is None:
        raise ValueError("token-conditioned heads are measured with the token after each row (tokens)")
    n_heads = weights.n_heads
    n_vocab = int(max(labels_full.max(initial=0), weights.vocab.max(initial=0))) + 1
    y = to_draft(labels_full, weights.vocab, n_vocab)
    counts = np.zeros((n_heads, topk))
    for lo in range(0, len(hidden), chunk):
        e = weights.embed(tokens[lo:lo + chunk]) if weights.conditioned and tokens is not None else None
        logits = weights.logits(np.asarray(hidden[lo:lo + chunk], dtype=np.float32), e)  # [K, n, V']
        for k in range(n_heads):
            yk = y[lo:lo + chunk, k]
            inside = yk >= 0
            own = np.take_along_axis(logits[k], np.where(inside, yk, 0)[:, None], axis=1)
            rank = (logits[k] > own).sum(axis=1)
            counts[k] += np.bincount(rank[inside & (rank < topk)], minlength=topk)[:topk]
    labelled = np.maximum((y != MISSING).sum(axis=0), 1).astype(np.float64)
    return counts / labelled[:, None]


def answer_rows(ds: Dataset, n_heads: int) -> tuple[npt.NDArray[np.float16], npt.NDArray[np.int32],
                                                    npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Held-out answer positions: (hidden [N, d], head labels [N, K] full ids, category [N],
    the token after each position [N])."""
    lab = labels(ds, n_heads)[:, 1:]
    keep = ~ds.prompt
    return ds.hidden[keep], lab[keep], ds.category[keep], ds.next[keep]


@dataclass(frozen=True)
class HeadReport:
    """Per-head top-1 / top-5 accuracy, overall and per category (category -> [K] arrays)."""

    rows: int
    top1: npt.NDArray[np.float64]
    top5: npt.NDArray[np.float64]
    by_category: dict[str, tuple[int, npt.NDArray[np.float64], npt.NDArray[np.float64]]]


def head_report(weights: HeadWeights, ds: Dataset) -> HeadReport:
    hidden, lab, cat, nxt = answer_rows(ds, weights.n_heads)
    overall = rank_accuracy(weights, hidden, lab, 5, tokens=nxt)
    by_cat = {}
    for c, name in enumerate(ds.categories):
        rows = cat == c
        if rows.any():
            acc = rank_accuracy(weights, hidden[rows], lab[rows], 5, tokens=nxt[rows])
            by_cat[name] = (int(rows.sum()), acc[:, 0], acc.sum(axis=1))
    return HeadReport(len(hidden), overall[:, 0], overall.sum(axis=1), by_cat)


def head_cost_ms(weights: HeadWeights, k: int = 10, repeats: int = 30) -> float:
    """Median wall time (ms) of one decode step's head work: every head's top-k at one
    hidden state (and, for token-conditioned heads, the embedding of the token after it)."""
    rng = np.random.default_rng(0)
    h = rng.standard_normal(weights.n_embd).astype(np.float32)
    token = int(weights.vocab[0])
    weights.top(h, k, token)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        weights.top(h, k, token)
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def target_token_ms(model: "Model", context: int = 64, repeats: int = 8) -> float:
    """Median wall time (ms) of one plain decode of a single token after `context` tokens:
    what the heads' cost per step is weighed against."""
    backend = model.backend
    times = []
    with model.turn():
        model.cache.truncate(0)
        with backend.hidden_states_off():
            backend.decode(np.full(context, 100, np.int32), np.arange(context))
            for i in range(repeats + 1):
                t0 = time.perf_counter()
                backend.decode([100], [context + i])
                backend.logits_rows()
                times.append(time.perf_counter() - t0)
        model.cache.truncate(0)
    return float(np.median(times[1:]) * 1e3)


@dataclass(frozen=True)
class TauResult:
    category: str
    prompts: int
    tau: float
    new_tokens: int


def medusa_tau(model: "Model", heads_path: Path, prompts: Sequence[TrainPrompt], max_tokens: int) -> list[TauResult]:
    """Tau of Medusa decoding (the whole tree verified every step, greedy) per category of
    the held-out prompts. Needs `pyaccel.Medusa` (the decoding side of issue #13)."""
    import pyaccel

    from .collect import prompt_tokens

    medusa_cls = getattr(pyaccel, "Medusa", None)
    if medusa_cls is None:
        raise RuntimeError("this pyaccel has no pyaccel.Medusa (Medusa decoding) yet: tau cannot be measured; "
                           "the head accuracies above are complete")
    gen = pyaccel.Generator(model, medusa_cls(str(heads_path), cost_model=False))
    per_cat: dict[str, list[tuple[int, int]]] = {}
    try:
        for p in prompts:
            res = gen.generate(prompt_tokens(model, p.text), max_tokens=max_tokens)
            per_cat.setdefault(p.category, []).append((res.stats.decoded_tokens, res.stats.target_forwards))
    finally:
        gen.close()
    return [TauResult(cat, len(v), sum(a for a, _ in v) / max(sum(b for _, b in v), 1), sum(a for a, _ in v))
            for cat, v in per_cat.items()]
