"""Greedy output equality against plain decoding: identical, near-tie difference, or real difference.

llama.cpp's logits depend slightly on how many tokens share a batch (DESIGN.md, "llama.cpp
facts"), so a lossless method's greedy output equals plain decoding's, or first differs
where plain decoding's top-1 / top-2 logit gap was small: a near-tie. A first difference
where plain decoding's choice was clear is a real difference: the method changed the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..model import Model

# A first difference where plain decoding's top-1 / top-2 logit gap is below this is a near-tie.
NEAR_TIE = 0.5


class Equality(str, Enum):
    IDENTICAL = "identical"
    NEAR_TIE = "near-tie"
    REAL = "real"


@dataclass(frozen=True)
class Verdict:
    """How one output compares with plain decoding's. position: the first differing token
    (None when identical); gap: plain decoding's top-1 / top-2 logit gap there."""

    equality: Equality
    position: int | None = None
    gap: float | None = None

    def describe(self) -> str:
        if self.equality is Equality.IDENTICAL:
            return "identical"
        return f"{self.equality.value} difference at token {self.position} (plain's top-2 gap {self.gap:.3f})"


IDENTICAL = Verdict(Equality.IDENTICAL)


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where `a` and `b` differ (a length difference counts); None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def top2_gap(model: "Model", prompt: Sequence[int], generated: Sequence[int]) -> float:
    """Plain decoding's own top-1 / top-2 logit gap for the token after prompt + generated.

    Replays plain decoding's batch shapes (the prompt in one prefill, then one token per
    decode), so the logits are exactly those of the plain run. Empties the target cache."""
    with model.turn():
        model.cache.truncate(0)
        backend = model.backend
        try:
            backend.prefill(list(prompt), start_pos=0)
            for i, tok in enumerate(generated):
                backend.decode([tok], [len(prompt) + i])
            row = backend.logits_rows()[-1]
        finally:
            model.cache.truncate(0)
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def classify(plain: Sequence[int], other: Sequence[int], gap_at: Callable[[int], float],
             near_tie: float = NEAR_TIE) -> Verdict:
    """Compare `other` with `plain`; gap_at(i) is plain's top-1 / top-2 gap before its token i.

    A length difference with equal tokens is a difference at the shorter length: one output
    ended (an end-of-generation token) where the other went on."""
    i = first_difference(plain, other)
    if i is None:
        return IDENTICAL
    gap = gap_at(i)
    return Verdict(Equality.NEAR_TIE if gap < near_tie else Equality.REAL, i, gap)


class PlainGaps:
    """Plain decoding's top-2 gaps on one prompt, each replayed once however many methods ask."""

    def __init__(self, model: "Model", prompt: Sequence[int], plain: Sequence[int]) -> None:
        self.model = model
        self.prompt = list(prompt)
        self.plain = list(plain)
        self._gaps: dict[int, float] = {}

    def __call__(self, position: int) -> float:
        if position not in self._gaps:
            self._gaps[position] = top2_gap(self.model, self.prompt, self.plain[:position])
        return self._gaps[position]
