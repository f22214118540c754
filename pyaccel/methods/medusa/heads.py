"""Medusa heads: the math shared by training, evaluation and decoding (numpy BLAS, float32).

Head k (k = 1..K) reads the target's final normed hidden state h at a position t (the
row whose logits gave token t + 1) and predicts token t + 1 + k:

    z_k = h + SiLU(W_k h + U_k e + b_k)     a residual block; W_k and U_k start at zero, so
                                            an untrained head is the target's own LM head
    logits_k = O z_k                        O: the target's output matrix restricted to a
                                            draft vocabulary of V' ids (`vocab`)

e is the target's input embedding of token t + 1, RMS-normalised: that token is known when
the heads run (the last committed token), and conditioning on it, as EAGLE and Hydra do,
tells head k which branch of the target's distribution at t it continues. The embedding
rows of the draft vocabulary travel with the heads (`embd`); for a token outside it e = 0
and the head falls back to h alone. Heads without U (`u is None`) read h only.

`vocab[j]` is the full-vocabulary id of draft-vocabulary entry j; a head never proposes a
token outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def silu(x: F32) -> F32:
    return x / (1.0 + np.exp(-x))


@dataclass
class HeadWeights:
    """Parameters of K heads over hidden size d and a draft vocabulary of V' ids.

    w: [K, d, d] (z = h + SiLU(h @ w[k].T + e @ u[k].T + b[k])), b: [K, d], out: [V', d],
    vocab: [V'] int32; u: [K, d, d] and embd: [V', d] (the normalised input embeddings of
    `vocab`) for token-conditioned heads, both None for heads of h alone.
    """

    w: F32
    b: F32
    out: F32
    vocab: npt.NDArray[np.int32]
    u: F32 | None = None
    embd: F32 | None = None

    def __post_init__(self) -> None:
        k, d, d2 = self.w.shape
        if d != d2 or self.b.shape != (k, d) or self.out.ndim != 2 or self.out.shape[1] != d:
            raise ValueError(f"inconsistent head shapes: w {self.w.shape}, b {self.b.shape}, out {self.out.shape}")
        if self.vocab.shape != (self.out.shape[0],):
            raise ValueError(f"vocab has {self.vocab.shape} ids for {self.out.shape[0]} output rows")
        if (self.u is None) != (self.embd is None):
            raise ValueError("token-conditioned heads need both u and embd (or neither)")
        if self.u is not None and self.embd is not None and (self.u.shape != self.w.shape
                                                             or self.embd.shape != self.out.shape):
            raise ValueError(f"inconsistent shapes: u {self.u.shape} for w {self.w.shape}, "
                             f"embd {self.embd.shape} for out {self.out.shape}")
        # full id -> draft index (-1: outside), for looking up the embedding of a known token
        self._index = np.full(int(self.vocab.max(initial=-1)) + 1, -1, np.int64)
        self._index[self.vocab] = np.arange(len(self.vocab))

    @property
    def conditioned(self) -> bool:
        return self.u is not None

    def draft_index(self, tokens: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Draft-vocabulary index of each full id in `tokens`, -1 outside the draft vocabulary."""
        t = np.asarray(tokens, dtype=np.int64)
        inside = (t >= 0) & (t < len(self._index))
        return np.where(inside, self._index[np.where(inside, t, 0)], -1)

    def embed(self, tokens: npt.ArrayLike) -> F32:
        """e for each full id in `tokens` [n] -> [n, d]: its normalised input embedding, zero
        outside the draft vocabulary (and for heads that are not token-conditioned)."""
        return embed_rows(self.embd, self.draft_index(tokens), self.n_embd)

    @property
    def n_heads(self) -> int:
        return int(self.w.shape[0])

    @property
    def n_embd(self) -> int:
        return int(self.w.shape[1])

    @property
    def draft_vocab(self) -> int:
        return int(self.out.shape[0])

    @staticmethod
    def untrained(n_heads: int, out: F32, vocab: npt.NDArray[np.int32], embd: F32 | None = None) -> "HeadWeights":
        """Heads that equal the target's LM head; token-conditioned when `embd` is given."""
        d = int(out.shape[1])
        zeros = lambda: np.zeros((n_heads, d, d), np.float32)  # noqa: E731
        return HeadWeights(zeros(), np.zeros((n_heads, d), np.float32), np.ascontiguousarray(out, dtype=np.float32),
                           np.asarray(vocab, dtype=np.int32), None if embd is None else zeros(),
                           None if embd is None else np.ascontiguousarray(embd, dtype=np.float32))

    def features(self, h: F32, e: F32 | None = None) -> F32:
        """z for every head: h [n, d] (and e [n, d], see `embed`) -> [K, n, d]."""
        h = np.asarray(h, dtype=np.float32)
        # One BLAS product per head (einsum's contraction path is far slower for one row).
        pre = np.matmul(h[None, :, :], self.w.transpose(0, 2, 1)) + self.b[:, None, :]
        if self.u is not None:
            if e is None:
                raise ValueError("token-conditioned heads need e, the embedding of the token after h (see embed)")
            pre += np.matmul(np.asarray(e, dtype=np.float32)[None, :, :], self.u.transpose(0, 2, 1))
        return (h[None, :, :] + silu(pre)).astype(np.float32, copy=False)

    def logits(self, h: F32, e: F32 | None = None) -> F32:
        """Draft-vocabulary logits of every head: h [n, d] (e [n, d]) -> [K, n, V']."""
        z = self.features(h, e)
        k, n, d = z.shape
        # One product over `out` for all heads: reading out ([V', d]) is the cost of a step.
        return (z.reshape(k * n, d) @ self.out.T).reshape(k, n, -1)

    def top(self, h: F32, k: int, token: int = -1) -> tuple[npt.NDArray[np.int32], F32]:
        """The k most likely tokens of every head at one hidden state h [d] followed by the
        known token `token` (full id; only token-conditioned heads read it), best first:
        (full-vocabulary ids [K, k], their probabilities under the head's softmax [K, k])."""
        e = self.embed([token]) if self.u is not None else None
        z = self.logits(np.asarray(h, dtype=np.float32)[None, :], e)[:, 0, :]  # [K, V']
        k = min(k, z.shape[1])
        idx = np.argpartition(-z, k - 1, axis=1)[:, :k]
        part = np.take_along_axis(z, idx, axis=1)
        order = np.argsort(-part, axis=1, kind="stable")
        idx = np.take_along_axis(idx, order, axis=1)
        m = z.max(axis=1, keepdims=True)
        log_norm = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
        probs = np.exp(np.take_along_axis(z, idx, axis=1) - log_norm[:, None]).astype(np.float32)
        return self.vocab[idx], probs


def rms_normalise(x: F32, eps: float = 1e-6) -> F32:
    """Rows scaled to unit root mean square (embedding scales differ from h's by orders of magnitude)."""
    x = np.asarray(x, dtype=np.float32)
    return (x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)).astype(np.float32)


def embed_rows(embd: F32 | None, index: npt.NDArray[np.integer], d: int) -> F32:
    """Rows `index` of `embd` [V', d], zero where index < 0 (or embd is None) -> [n, d]."""
    index = np.asarray(index)
    if embd is None:
        return np.zeros((len(index), d), np.float32)
    rows = embd[np.where(index >= 0, index, 0)].astype(np.float32)
    rows[index < 0] = 0.0
    return rows


@dataclass(frozen=True)
class HeadsMeta:
    """What binds heads to their target, and what training measured.

    rank_accuracy[k][i]: on held-out text, the fraction of positions where head k + 1's
    i-th ranked candidate was the target's token (so top-5 accuracy is the sum of the
    first five); static trees are built from it. Empty when not measured.
    """

    target_name: str
    target_sha256: str
    architecture: str
    n_embd: int
    n_vocab: int
    rank_accuracy: tuple[tuple[float, ...], ...] = ()
    train_tokens: int = 0


@dataclass
class MedusaHeads:
    """Trained heads with the metadata that binds them to one target model."""

    weights: HeadWeights
    meta: HeadsMeta

    @property
    def n_heads(self) -> int:
        return self.weights.n_heads
