"""Training Medusa heads with numpy: cross-entropy over the draft vocabulary, Adam, minibatches.

Per head k (0-based here; head k predicts the token k + 2 steps after the row's position):

    pre = h W_k^T + e U_k^T + b_k   [B, d]   e: the normalised embedding of the token after h
                                          (token-conditioned heads; see heads.py)
    z   = h + SiLU(pre)          [B, d]
    l   = z O^T                  [B, V']   O frozen (the target's output rows)
    loss_k = mean over rows whose label is in the draft vocabulary of CE(l, y)
    loss   = sum_k decay^k loss_k

Backward: dl = (softmax(l) - onehot(y)) / n_valid; dz = dl O; dpre = dz * SiLU'(pre);
dW_k = dpre^T h; dU_k = dpre^T e; db_k = sum_rows dpre. Labels outside the draft vocabulary are left out
of the loss (a head cannot propose them) and count as misses in the accuracies.

Minibatch order depends only on (seed, epoch), and the Adam state is checkpointed, so an
interrupted training resumed from its checkpoint takes the same steps as one that was not.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from .heads import F32, HeadWeights, embed_rows, silu
from .options import Problem, need, raise_problems

I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class TrainConfig:
    """The knobs of training (see `pyaccel medusa train --help`)."""

    n_heads: int = 3
    # Condition each head on the known next token's embedding (U_k e): for the same steps the
    # first heads are more accurate held out, though each step costs more.
    token_conditioned: bool = True
    # A larger draft vocabulary covers more held-out labels, but every step (training and
    # decoding) costs more with it, so in the default time budget a larger one trains fewer
    # steps and ends less accurate.
    draft_vocab: int = 8192
    lr: float = 1e-3
    lr_floor: float = 0.1  # cosine decay to lr * lr_floor over the planned steps
    batch: int = 256
    weight_decay: float = 0.0  # decoupled (AdamW), on W and U (not b)
    head_decay: float = 0.8  # loss weight of head k (0-based): head_decay ** k
    prompt_rows: bool = True  # also train on prompt positions (labels: the target's greedy picks)
    minutes: float = 9.0  # training time budget (None steps: as many as fit)
    steps: int | None = None  # fixed number of steps (tests, exact reruns)
    checkpoint_s: float = 60.0
    validate_every: int = 50  # steps between held-out loss checks
    validation_rows: int = 1024
    seed: int = 0

    def problems(self) -> list[Problem]:
        """Every knob out of range (none: the config can train)."""
        return [*need("n_heads", self.n_heads >= 1, ">= 1", self.n_heads),
                *need("draft_vocab", self.draft_vocab >= 2, ">= 2", self.draft_vocab),
                *need("lr", self.lr > 0 and math.isfinite(self.lr), "a number > 0", self.lr),
                *need("lr_floor", 0 <= self.lr_floor <= 1, "in [0, 1]", self.lr_floor),
                *need("batch", self.batch >= 1, ">= 1", self.batch),
                *need("weight_decay", self.weight_decay >= 0, ">= 0", self.weight_decay),
                *need("head_decay", self.head_decay > 0, "> 0", self.head_decay),
                # the time budget counts only where no fixed number of steps is asked for
                *(need("minutes", self.minutes > 0, "> 0", self.minutes) if self.steps is None else []),
                *(need("steps", self.steps >= 1, ">= 1", self.steps) if self.steps is not None else []),
                *need("validate_every", self.validate_every >= 1, ">= 1", self.validate_every),
                *need("validation_rows", self.validation_rows >= 1, ">= 1", self.validation_rows)]

    def validate(self) -> None:
        raise_problems(self.problems())


@dataclass
class TrainState:
    """Everything a checkpoint holds: parameters, Adam moments, progress, the best weights."""

    w: F32
    b: F32
    mw: F32
    vw: F32
    mb: F32
    vb: F32
    vocab: I32
    step: int = 0
    planned: int = 0  # steps of the lr schedule (fixed once known)
    seconds: float = 0.0  # training time spent so far, over all runs
    best_score: float = -float("inf")  # validation accuracy score of best_w / best_b (see _validate_now)
    best_w: F32 | None = None
    best_b: F32 | None = None
    history: list[tuple[int, float, float]] = field(default_factory=list)  # (step, val loss, head-1 top-1)
    # token-conditioned heads: U and its Adam moments (None: heads of h alone)
    u: F32 | None = None
    mu: F32 | None = None
    vu: F32 | None = None
    best_u: F32 | None = None

    @staticmethod
    def fresh(n_heads: int, d: int, vocab: I32, conditioned: bool = False) -> "TrainState":
        z = lambda *s: np.zeros(s, np.float32)  # noqa: E731
        state = TrainState(z(n_heads, d, d), z(n_heads, d), z(n_heads, d, d), z(n_heads, d, d), z(n_heads, d),
                           z(n_heads, d), np.asarray(vocab, np.int32))
        if conditioned:
            state.u, state.mu, state.vu = z(n_heads, d, d), z(n_heads, d, d), z(n_heads, d, d)
        return state


def choose_vocab(labels_full: I32, size: int, n_vocab: int) -> I32:
    """The `size` most frequent label tokens (ties: lower id first). When the data has fewer
    distinct tokens, the rest are the lowest unused ids: a BPE vocabulary numbers its
    earliest (most common) merges first."""
    flat = labels_full[labels_full >= 0].astype(np.int64)
    counts = np.bincount(flat, minlength=n_vocab)
    seen = np.flatnonzero(counts)
    seen = seen[np.lexsort((seen, -counts[seen]))][:size]
    if len(seen) < size:
        rest = np.setdiff1d(np.arange(n_vocab), seen, assume_unique=True)[: size - len(seen)]
        seen = np.concatenate([seen, rest])
    return seen.astype(np.int32)


MISSING, OUTSIDE = -1, -2  # draft labels: no label (sequence ended) / not in the draft vocabulary


def to_draft(labels_full: I32, vocab: I32, n_vocab: int) -> I32:
    """Full-vocabulary labels -> draft-vocabulary indices, MISSING or OUTSIDE."""
    table = np.full(n_vocab + 1, OUTSIDE, np.int32)
    table[n_vocab] = MISSING  # where the full label is -1
    table[vocab] = np.arange(len(vocab), dtype=np.int32)
    return table[np.where(labels_full >= 0, labels_full, n_vocab)]


def _pre(h: F32, w: F32, b: F32, e: F32 | None, u: F32 | None) -> F32:
    pre = h @ w.T + b
    if u is not None and e is not None:
        pre += e @ u.T
    return pre


def head_loss_grad(h: F32, w: F32, b: F32, out: F32, y: I32, e: F32 | None = None,
                   u: F32 | None = None) -> tuple[float, int, F32, F32, F32 | None]:
    """One head on a minibatch: (summed CE over valid rows, valid rows, dW, db, dU) of the
    summed loss. h [B, d], w [d, d], b [d], out [V', d], y [B] draft ids (-1: left out);
    e [B, d] and u [d, d] for a token-conditioned head (dU is None without them)."""
    pre = _pre(h, w, b, e, u)
    z = h + silu(pre)
    logits = z @ out.T
    valid = y >= 0
    n = int(valid.sum())
    conditioned = u is not None and e is not None
    if n == 0:
        return 0.0, 0, np.zeros_like(w), np.zeros_like(b), np.zeros_like(u) if conditioned else None
    m = logits.max(axis=1, keepdims=True)
    ex = np.exp(logits - m)
    s = ex.sum(axis=1, keepdims=True)
    yv = np.where(valid, y, 0)
    picked = np.take_along_axis(logits, yv[:, None], axis=1)[:, 0]
    loss = float(((m[:, 0] + np.log(s[:, 0]) - picked) * valid).sum())
    dl = ex / s
    dl[np.arange(len(y)), yv] -= 1.0
    dl *= valid[:, None]
    dz = dl @ out
    sig = 1.0 / (1.0 + np.exp(-pre))
    dpre = dz * (sig * (1.0 + pre * (1.0 - sig)))
    du = (dpre.T @ e).astype(np.float32) if conditioned else None
    return loss, n, (dpre.T @ h).astype(np.float32), dpre.sum(axis=0).astype(np.float32), du


def head_loss(h: F32, w: F32, b: F32, out: F32, y: I32, e: F32 | None = None,
              u: F32 | None = None) -> tuple[float, int, int]:
    """(summed CE over valid rows, valid rows, top-1 hits) without gradients."""
    z = h + silu(_pre(h, w, b, e, u))
    logits = z @ out.T
    valid = y >= 0
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    yv = np.where(valid, y, 0)
    ce = lse - np.take_along_axis(logits, yv[:, None], axis=1)[:, 0]
    hits = int(((logits.argmax(axis=1) == y) & valid).sum())
    return float((ce * valid).sum()), int(valid.sum()), hits


def _adam(p: F32, g: F32, m: F32, v: F32, t: int, lr: float, decay: float) -> None:
    """One in-place Adam(W) update of parameter p with gradient g (t is 1-based)."""
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    m *= beta1
    m += (1 - beta1) * g
    v *= beta2
    v += (1 - beta2) * g * g
    mhat = m / (1 - beta1 ** t)
    vhat = v / (1 - beta2 ** t)
    if decay:
        p *= 1 - lr * decay
    p -= lr * mhat / (np.sqrt(vhat) + eps)


def lr_at(cfg: TrainConfig, step: int, planned: int) -> float:
    """Cosine decay from lr to lr * lr_floor over `planned` steps (then flat)."""
    frac = min(step / max(planned, 1), 1.0)
    return cfg.lr * (cfg.lr_floor + (1 - cfg.lr_floor) * 0.5 * (1 + np.cos(np.pi * frac)))


def batch_rows(n_rows: int, batch: int, step: int, seed: int) -> npt.NDArray[np.int64]:
    """Rows of minibatch `step`: consecutive slices of a permutation drawn per epoch."""
    per_epoch = max(n_rows // batch, 1)
    epoch, i = divmod(step, per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n_rows)
    return np.sort(perm[i * batch:(i + 1) * batch])


def train_step(state: TrainState, cfg: TrainConfig, out: F32, h: F32, y: I32, e: F32 | None = None) -> float:
    """One Adam step on a minibatch h [B, d] with draft labels y [B, K] (and the embeddings e
    [B, d] of the tokens after h, for token-conditioned heads); returns the weighted loss."""
    state.step += 1
    lr = lr_at(cfg, state.step - 1, state.planned)
    total = 0.0
    for k in range(cfg.n_heads):
        weight = cfg.head_decay ** k
        u = state.u[k] if state.u is not None else None
        loss, n, dw, db, du = head_loss_grad(h, state.w[k], state.b[k], out, y[:, k], e, u)
        if n == 0:
            continue
        scale = weight / n
        total += weight * loss / n
        _adam(state.w[k], dw * scale, state.mw[k], state.vw[k], state.step, lr, cfg.weight_decay)
        _adam(state.b[k], db * scale, state.mb[k], state.vb[k], state.step, lr, 0.0)
        if du is not None and state.u is not None and state.mu is not None and state.vu is not None:
            _adam(state.u[k], du * scale, state.mu[k], state.vu[k], state.step, lr, cfg.weight_decay)
    return total


def validation(w: F32, b: F32, out: F32, h: npt.NDArray[np.floating], y: I32, head_decay: float, chunk: int = 1024,
               e: npt.NDArray[np.floating] | None = None, u: F32 | None = None) -> tuple[float, F32]:
    """(weighted mean CE over labels in the draft vocabulary, top-1 accuracy per head over
    rows with a label) on held-out rows; labels OUTSIDE the draft vocabulary are misses.
    e [N, d] and u [K, d, d] for token-conditioned heads."""
    n_heads = w.shape[0]
    loss = np.zeros(n_heads)
    n_valid = np.zeros(n_heads)
    hits = np.zeros(n_heads)
    for lo in range(0, len(h), chunk):
        hc = h[lo:lo + chunk].astype(np.float32)
        ec = e[lo:lo + chunk].astype(np.float32) if e is not None else None
        for k in range(n_heads):
            s, n, hit = head_loss(hc, w[k], b[k], out, y[lo:lo + chunk, k], ec, u[k] if u is not None else None)
            loss[k] += s
            n_valid[k] += n
            hits[k] += hit
    mean = loss / np.maximum(n_valid, 1)
    weighted = float(sum(head_decay ** k * mean[k] for k in range(n_heads)))
    labelled = np.maximum((y != MISSING).sum(axis=0), 1)
    return weighted, (hits / labelled).astype(np.float32)


# ---- checkpoints --------------------------------------------------------------------------------


def save_checkpoint(path: Path, state: TrainState, cfg: TrainConfig) -> None:
    """Atomically write the whole training state (npz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.npz")
    best_w = state.best_w if state.best_w is not None else state.w
    best_b = state.best_b if state.best_b is not None else state.b
    info = {"step": state.step, "planned": state.planned, "seconds": state.seconds, "best_score": state.best_score,
            "history": state.history, "config": asdict(cfg)}
    extra: dict[str, Any] = {}
    if state.u is not None:
        extra = {"u": state.u, "mu": state.mu, "vu": state.vu,
                 "best_u": state.best_u if state.best_u is not None else state.u}
    np.savez(tmp, w=state.w, b=state.b, mw=state.mw, vw=state.vw, mb=state.mb, vb=state.vb, vocab=state.vocab,
             best_w=best_w, best_b=best_b, info=np.array(json.dumps(info)), **extra)
    os.replace(tmp, path)


def load_checkpoint(path: Path, cfg: TrainConfig) -> TrainState:
    """A checkpoint written by `save_checkpoint` for the same heads and vocabulary size."""
    with np.load(path) as z:
        info = json.loads(str(z["info"]))
        state = TrainState(z["w"], z["b"], z["mw"], z["vw"], z["mb"], z["vb"], z["vocab"], info["step"],
                           info["planned"], info["seconds"], info["best_score"], z["best_w"], z["best_b"],
                           [tuple(x) for x in info["history"]])
        if "u" in z.files:
            state.u, state.mu, state.vu, state.best_u = z["u"], z["mu"], z["vu"], z["best_u"]
    _check_fits(path, state.w.shape[0], len(state.vocab), state.u is not None, cfg)
    return state


def check_checkpoint(path: Path, cfg: TrainConfig) -> None:
    """Raise ValueError, saying what to do, unless the checkpoint at `path` can continue
    training under `cfg` (what --resume checks before it collects anything)."""
    with np.load(path) as z:
        _check_fits(path, int(z["w"].shape[0]), int(z["vocab"].shape[0]), "u" in z.files, cfg)


def _check_fits(path: Path, n_heads: int, draft_vocab: int, conditioned: bool, cfg: TrainConfig) -> None:
    if conditioned != cfg.token_conditioned:
        raise ValueError(f"the checkpoint {path} is of heads {'with' if conditioned else 'without'} token "
                         "conditioning, unlike this run's settings: rerun without --resume")
    if n_heads != cfg.n_heads or draft_vocab != cfg.draft_vocab:
        raise ValueError(f"the checkpoint {path} is of {n_heads} heads over {draft_vocab} draft tokens, "
                         f"not {cfg.n_heads} over {cfg.draft_vocab}: rerun without --resume, or with its settings")


# ---- the loop -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainData:
    """Rows ready for training: hidden states (float16), draft-vocabulary labels [N, K] and,
    for token-conditioned heads, the draft index of the token after each row (-1: outside)."""

    hidden: npt.NDArray[np.float16]
    labels: I32
    token: npt.NDArray[np.int64] | None = None

    def embeddings(self, embd: F32 | None, rows: npt.NDArray[np.int64] | slice) -> F32 | None:
        """e of `rows` for heads conditioned on `embd` [V', d] (None: heads of h alone)."""
        if embd is None:
            return None
        if self.token is None:
            raise ValueError("token-conditioned heads need the token after each row (TrainData.token)")
        return embed_rows(embd, self.token[rows], embd.shape[1])


@dataclass(frozen=True)
class TrainProgress:
    step: int
    planned: int
    seconds: float
    budget_s: float | None
    loss: float
    val_loss: float | None
    val_top1: float | None


def train_heads(state: TrainState, cfg: TrainConfig, out: F32, train: TrainData, val: TrainData,
                checkpoint: Path | None = None, on_step: Callable[[TrainProgress], None] | None = None,
                embd: F32 | None = None) -> TrainState:
    """Train until cfg.steps or the time budget is spent (resuming from `state.step`);
    `embd` [V', d]: the normalised input embeddings of the draft vocabulary, for
    token-conditioned heads. On KeyboardInterrupt the state is checkpointed before the
    interrupt goes on."""
    if (embd is None) != (state.u is None):
        raise ValueError("token-conditioned heads train with embd (the draft vocabulary's input embeddings), "
                         "heads of h alone without")
    cfg.validate()
    budget = None if cfg.steps is not None else cfg.minutes * 60.0
    last_ckpt = time.monotonic()
    run_start, spent_before = time.monotonic(), state.seconds
    try:
        while cfg.steps is None or state.step < cfg.steps:
            if budget is not None and state.seconds >= budget:
                break
            t0 = time.monotonic()
            rows = batch_rows(len(train.labels), cfg.batch, state.step, cfg.seed)
            loss = train_step(state, cfg, out, train.hidden[rows].astype(np.float32), train.labels[rows],
                              train.embeddings(embd, rows))
            state.seconds = spent_before + time.monotonic() - run_start
            if not state.planned:
                state.planned = cfg.steps or _plan_steps(budget or 0.0, time.monotonic() - t0)
            val_loss, top1 = _maybe_validate(state, cfg, out, val, embd)
            if on_step is not None:
                on_step(TrainProgress(state.step, state.planned, state.seconds, budget, loss, val_loss, top1))
            if checkpoint is not None and time.monotonic() - last_ckpt >= cfg.checkpoint_s:
                save_checkpoint(checkpoint, state, cfg)
                last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        if checkpoint is not None:
            save_checkpoint(checkpoint, state, cfg)
        raise
    if not state.history or state.history[-1][0] != state.step:
        _validate_now(state, cfg, out, val, embd)
    if checkpoint is not None:
        save_checkpoint(checkpoint, state, cfg)
    return state


def _plan_steps(budget_s: float, first_step_s: float) -> int:
    """Steps of the lr schedule under a time budget, from the first step's time (which
    includes warm-up, so the plan errs short: the schedule then stays at its floor)."""
    return max(int(budget_s / max(first_step_s, 1e-3)), 1)


def _maybe_validate(state: TrainState, cfg: TrainConfig, out: F32, val: TrainData,
                    embd: F32 | None) -> tuple[float | None, float | None]:
    if state.step % cfg.validate_every:
        return None, None
    return _validate_now(state, cfg, out, val, embd)


def _validate_now(state: TrainState, cfg: TrainConfig, out: F32, val: TrainData, embd: F32 | None) -> tuple[float, float]:
    """Held-out loss and head-1 top-1; keeps the weights of the best accuracy seen. Selected
    by accuracy, not loss: on a small data set the held-out loss rises (overconfident heads)
    long before the accuracies stop improving."""
    n = min(len(val.labels), cfg.validation_rows)
    loss, acc = validation(state.w, state.b, out, val.hidden[:n], val.labels[:n], cfg.head_decay,
                           e=val.embeddings(embd, slice(0, n)), u=state.u)
    state.history.append((state.step, loss, float(acc[0])))
    score = float(sum(cfg.head_decay ** k * a for k, a in enumerate(acc)))
    if score > state.best_score:
        state.best_score = score
        state.best_w, state.best_b = state.w.copy(), state.b.copy()
        state.best_u = state.u.copy() if state.u is not None else None
    return loss, float(acc[0])


def final_weights(state: TrainState, out: F32, embd: F32 | None = None) -> HeadWeights:
    """The heads with the best held-out accuracy seen (the last ones if never validated)."""
    w = state.best_w if state.best_w is not None else state.w
    b = state.best_b if state.best_b is not None else state.b
    u = state.best_u if state.best_u is not None else state.u
    return HeadWeights(w.copy(), b.copy(), out, state.vocab, None if u is None else u.copy(), embd)
