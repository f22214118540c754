"""Malformed input to every C++ entry point: a clear ValueError / TypeError, never a crash.

A user's proposer feeds the core directly (tokens, parents, q rows), and a model can return
NaN or inf logits. Hypothesis throws arrays of any dtype, shape and content at each entry
point; the only acceptable outcomes are a result or a caller-mistake exception.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pyaccel import _core

CALLER_MISTAKES = (ValueError, TypeError, OverflowError)
DTYPES = st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.int8, np.uint32, np.bool_])
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)


def arrays(max_dims: int = 2, max_side: int = 12) -> st.SearchStrategy[np.ndarray]:
    """Any dtype, 0..max_dims dimensions, NaN / inf / huge values included."""
    return DTYPES.flatmap(lambda dt: hnp.arrays(
        dt, hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side),
        elements=FLOATS if np.dtype(dt).kind == "f" else None))


def _call(fn, *args):
    try:
        fn(*args)
    except CALLER_MISTAKES:
        pass


PARAMS = [_core.SamplingParams(), _core.SamplingParams(temperature=1.0, top_k=3, top_p=0.9)]


@settings(max_examples=150, deadline=None)
@given(arrays(), st.sampled_from(PARAMS))
def test_sampling_entry_points(a, params) -> None:
    rng = _core.Rng(1)
    _call(_core.argmax, a)
    _call(_core.probs, a, params)
    _call(_core.sample, a, params, rng)
    _call(_core.sample_probs, a, rng)


@settings(max_examples=150, deadline=None)
@given(arrays(max_dims=2), st.sampled_from(PARAMS))
def test_tree_layout_and_plans(parents, params) -> None:
    _call(_core.tree_layout, parents)
    curve = _core.CostCurve([1.0, 1.5, 2.0, 2.5, 3.0])
    _call(_core.tree_plan, curve, np.linspace(0.9, 0.1, max(parents.size, 1)), parents, 3)
    _call(_core.chain_plan, curve, parents.ravel()[:8] if parents.dtype.kind == "f" else [0.5], 0.1, 3)
    _call(_core.CostCurve, parents.ravel())


@settings(max_examples=200, deadline=None)
@given(logits=arrays(), tokens=arrays(max_dims=1, max_side=6), parents=arrays(max_dims=1, max_side=6),
       q=st.one_of(st.none(), arrays()), typical=st.booleans(), params=st.sampled_from(PARAMS))
def test_verify_tree_with_anything(logits, tokens, parents, q, typical, params) -> None:
    t = _core.TypicalParams() if typical else None
    _call(_core.verify_tree, logits, tokens, parents, params, _core.Rng(2), q, t)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 5), vocab=st.integers(1, 40), data=st.data(), params=st.sampled_from(PARAMS))
def test_verify_tree_with_well_shaped_but_wrong_values(n, vocab, data, params) -> None:
    """Right dtypes and shapes, wrong values: ids out of range, cyclic parents, NaN rows."""
    logits = data.draw(hnp.arrays(np.float32, (n + 1, vocab), elements=FLOATS))
    tokens = np.asarray(data.draw(st.lists(st.integers(-3, vocab + 3), min_size=n, max_size=n)), np.int32)
    parents = np.asarray(data.draw(st.lists(st.integers(-3, n + 1), min_size=n, max_size=n)), np.int32)
    q = data.draw(st.one_of(st.none(), hnp.arrays(np.float32, (n + 1, vocab), elements=FLOATS)))
    _call(_core.verify_tree, logits, tokens, parents, params, _core.Rng(3), q)


@settings(max_examples=100, deadline=None)
@given(stream=arrays(max_dims=1, max_side=30), n_min=st.integers(-2, 6), n_max=st.integers(-2, 6),
       max_len=st.integers(-2, 10), cands=st.integers(-2, 5))
def test_ngram_entry_points(stream, n_min, n_max, max_len, cands) -> None:
    try:
        index = _core.NgramIndex(n_min, n_max)
    except CALLER_MISTAKES:
        index = _core.NgramIndex()
    _call(index.append, stream)
    _call(index.lookup, n_min, n_max, max_len, cands)
    _call(index.truncate, max_len)
    cache = _core.NgramCache()
    _call(cache.update, stream, max(n_min, 0))
    _call(cache.counts, stream)
    _call(_core.ngram_cache_draft, stream, cache, cache, None, max_len)
