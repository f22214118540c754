"""The greedy "lossless" check from DESIGN.md, shared by every method's tests.

llama.cpp's logits depend slightly on how many tokens share a batch, so an accelerated
greedy run must equal plain greedy decoding, or first differ where plain decoding's top-1 /
top-2 logit gap was small (a near-tie).
"""

from __future__ import annotations

import numpy as np

import pyaccel

NEAR_TIE = 0.5


def top2_gap(model: pyaccel.Model, context: list[int]) -> float:
    """Plain decoding's top-1 / top-2 logit gap for the token after `context`."""
    model.cache.truncate(0)
    model.backend.prefill(context, start_pos=0)
    row = model.backend.logits_rows()[-1]
    model.cache.truncate(0)
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def assert_greedy_equivalent(model: pyaccel.Model, prompt: list[int], plain: list[int], fast: list[int]) -> bool:
    """True when identical; passes at a near-tie divergence; fails otherwise."""
    i = first_difference(plain, fast)
    if i is None:
        return True
    if i >= min(len(plain), len(fast)):
        raise AssertionError(f"outputs agree but lengths differ: plain {len(plain)}, accelerated {len(fast)}")
    gap = top2_gap(model, prompt + plain[:i])
    assert gap < NEAR_TIE, f"first difference at token {i} where plain decoding's top-2 gap was {gap:.3f}"
    return False
