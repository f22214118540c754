"""Medusa heads: the math shared by training, evaluation and decoding (numpy BLAS, float32).

Head k (k = 1..K) reads the target's final normed hidden state h at a position t (the
row whose logits gave token t + 1) and predicts token t + 1 + k:

    z_k = h + SiLU(W_k h + b_k)             a residual block; W_k starts at zero, so an
                                            untrained head is the target's own LM head
    logits_k = O z_k                        O: the target's output matrix restricted to a
                                            draft vocabulary of V' ids (`vocab`)

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

    w: [K, d, d] (z = h + SiLU(h @ w[k].T + b[k])), b: [K, d], out: [V', d], vocab: [V'] int32.
    """

    w: F32
    b: F32
    out: F32
    vocab: npt.NDArray[np.int32]

    def __post_init__(self) -> None:
        k, d, d2 = self.w.shape
        if d != d2 or self.b.shape != (k, d) or self.out.ndim != 2 or self.out.shape[1] != d:
            raise ValueError(f"inconsistent head shapes: w {self.w.shape}, b {self.b.shape}, out {self.out.shape}")
        if self.vocab.shape != (self.out.shape[0],):
            raise ValueError(f"vocab has {self.vocab.shape} ids for {self.out.shape[0]} output rows")

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
    def untrained(n_heads: int, out: F32, vocab: npt.NDArray[np.int32]) -> "HeadWeights":
        d = int(out.shape[1])
        return HeadWeights(np.zeros((n_heads, d, d), np.float32), np.zeros((n_heads, d), np.float32),
                           np.ascontiguousarray(out, dtype=np.float32), np.asarray(vocab, dtype=np.int32))

    def features(self, h: F32) -> F32:
        """z for every head: h [n, d] -> [K, n, d]."""
        h = np.asarray(h, dtype=np.float32)
        # One BLAS product per head (einsum's contraction path is ~10x slower for one row).
        pre = np.matmul(h[None, :, :], self.w.transpose(0, 2, 1)) + self.b[:, None, :]
        return (h[None, :, :] + silu(pre)).astype(np.float32, copy=False)

    def logits(self, h: F32) -> F32:
        """Draft-vocabulary logits of every head: h [n, d] -> [K, n, V']."""
        z = self.features(h)
        k, n, d = z.shape
        # One product over `out` for all heads: reading out ([V', d]) is the cost of a step.
        return (z.reshape(k * n, d) @ self.out.T).reshape(k, n, -1)

    def top(self, h: F32, k: int) -> tuple[npt.NDArray[np.int32], F32]:
        """The k most likely tokens of every head at one hidden state h [d], best first:
        (full-vocabulary ids [K, k], their probabilities under the head's softmax [K, k])."""
        z = self.logits(np.asarray(h, dtype=np.float32)[None, :])[:, 0, :]  # [K, V']
        k = min(k, z.shape[1])
        idx = np.argpartition(-z, k - 1, axis=1)[:, :k]
        part = np.take_along_axis(z, idx, axis=1)
        order = np.argsort(-part, axis=1, kind="stable")
        idx = np.take_along_axis(idx, order, axis=1)
        m = z.max(axis=1, keepdims=True)
        log_norm = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
        probs = np.exp(np.take_along_axis(z, idx, axis=1) - log_norm[:, None]).astype(np.float32)
        return self.vocab[idx], probs


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
