"""pyaccel._core sampling transforms against an independent numpy reference.

The reference implements llama-cpp-python's default chain in float64 with
plain numpy sorting: top_k -> top_p -> min_p -> temperature -> softmax, ties
ranked by lower token id.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

from pyaccel import _core

P_MIN = 1e-3  # chi-square p-value below which a sampler is declared wrong


def ref_probs(logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0,
              min_p: float = 0.0) -> np.ndarray:
    x = logits.astype(np.float64)
    n = x.size
    if temperature == 0.0:
        out = np.zeros(n)
        out[int(np.argmax(x))] = 1.0  # np.argmax: first (lowest id) maximum
        return out
    rank = np.lexsort((np.arange(n), -x))  # best first, ties to the lower id
    keep = np.ones(n, dtype=bool)
    if 0 < top_k < n:
        keep[:] = False
        keep[rank[:top_k]] = True
    m = x.max()
    if top_p < 1.0:
        ids = rank[keep[rank]]
        cum = np.cumsum(np.exp(x[ids] - m))
        n_keep = int(np.searchsorted(cum, np.float64(np.float32(top_p)) * cum[-1], side="left")) + 1
        keep[:] = False
        keep[ids[:n_keep]] = True
    if min_p > 0.0:
        floor = np.float32(m) + np.log(np.float32(min_p))  # float32, as the C++ compares
        keep &= logits >= floor
    w = np.where(keep, np.exp((x - m) / np.float64(np.float32(temperature))), 0.0)
    return w / w.sum()


def chisquare_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    counts = np.bincount(samples, minlength=p.size)
    support = p > 0
    assert counts[~support].sum() == 0, "drew a token of probability 0"
    expected = p[support] / p[support].sum() * samples.size
    return float(stats.chisquare(counts[support], expected).pvalue)


def random_logits(gen: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "normal":
        return gen.standard_normal(n, dtype=np.float32) * 3.0
    if kind == "ties":  # few distinct values: exercises the lower-id tie rule
        return gen.integers(-3, 3, n).astype(np.float32)
    if kind == "peaked":
        x = gen.standard_normal(n, dtype=np.float32)
        x[gen.integers(n)] += 25.0
        return x
    raise AssertionError(kind)


PARAMS = [
    # temperature, top_k, top_p, min_p
    (1.0, 0, 1.0, 0.0),
    (0.7, 0, 1.0, 0.0),
    (1e-3, 0, 1.0, 0.0),
    (50.0, 0, 1.0, 0.0),
    (1.0, 1, 1.0, 0.0),
    (0.8, 5, 1.0, 0.0),
    (1.0, 0, 0.9, 0.0),
    (1.0, 0, 0.5, 0.0),
    (1.0, 0, 1e-6, 0.0),
    (0.6, 0, 1.0, 0.05),
    (1.0, 0, 1.0, 0.5),
    (1.0, 0, 1.0, 1.0),
    (0.8, 40, 0.95, 0.05),  # llama-cpp-python's create_completion defaults
    (1.3, 3, 0.7, 0.2),
]


@pytest.mark.parametrize("n", [1, 2, 7, 100, 5000, 151_936])
@pytest.mark.parametrize("kind", ["normal", "ties", "peaked"])
@pytest.mark.parametrize("temperature,top_k,top_p,min_p", PARAMS)
def test_probs_matches_reference(n, kind, temperature, top_k, top_p, min_p):
    gen = np.random.default_rng([n, len(kind), int(temperature * 1000), top_k])
    logits = random_logits(gen, n, kind)
    params = _core.SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    got = _core.probs(logits, params)
    want = ref_probs(logits, temperature, top_k, top_p, min_p)
    assert got.dtype == np.float32 and got.shape == (n,)
    assert abs(float(got.sum(dtype=np.float64)) - 1.0) < 1e-5
    both = boundary_agreement(got, want, logits)
    rtol = 1e-4 if temperature < 0.01 else 2e-5
    np.testing.assert_allclose(got[both], want[both], rtol=rtol, atol=1e-7)


def boundary_agreement(got: np.ndarray, want: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Mask of tokens both keep; asserts any disagreement is a top-p cut landing
    a token earlier or later among equal logits, which float32 weights cannot
    resolve once ~1e5 tokens tie (the C++ exp is 1 ulp, not numpy's 0.5)."""
    # exp underflows float32 near 1e-38 of the top token: such tokens may be 0
    underflow = (want > 0) & (want < 1e-30)
    differ = ((got > 0) != (want > 0)) & ~underflow
    if differ.any():
        kept = logits[want > 0]
        assert differ.sum() <= 2, f"{differ.sum()} tokens kept by only one side"
        assert np.all(logits[differ] == kept.min()), "disagreement away from the cut"
        assert got[differ].sum() + want[differ].sum() < 1e-4
    return ~differ


@pytest.mark.parametrize("n", [1, 5, 151_936])
def test_greedy_probs_is_one_hot_at_argmax(n):
    logits = random_logits(np.random.default_rng(n), n, "ties")
    got = _core.probs(logits, _core.SamplingParams(temperature=0.0, top_k=3, top_p=0.5))
    want = np.zeros(n, dtype=np.float32)
    want[int(np.argmax(logits))] = 1.0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, 3, 1000, 151_936])
def test_argmax_matches_numpy_and_prefers_lowest_id(n):
    gen = np.random.default_rng(n)
    for kind in ("normal", "ties", "peaked"):
        logits = random_logits(gen, n, kind)
        assert _core.argmax(logits) == int(np.argmax(logits))
    flat = np.zeros(n, dtype=np.float32)
    assert _core.argmax(flat) == 0
    if n > 2:
        flat[[n - 1, 1]] = 2.0  # tie between ids 1 and n-1, across SIMD blocks for large n
        assert _core.argmax(flat) == 1


def test_argmax_extreme_finite_values():
    x = np.array([-np.finfo(np.float32).max, np.finfo(np.float32).max, 0.0], dtype=np.float32)
    assert _core.argmax(x) == 1
    p = _core.probs(x, _core.SamplingParams(temperature=1.0))
    np.testing.assert_array_equal(p, [0.0, 1.0, 0.0])


def test_sample_greedy_is_argmax_and_uses_no_randomness():
    logits = np.array([0.5, 3.0, 3.0, -1.0], dtype=np.float32)
    rng = _core.Rng(7)
    before = rng.get_state()
    assert _core.sample(logits, _core.SamplingParams(), rng) == 1
    assert rng.get_state() == before


@pytest.mark.parametrize("temperature,top_k,top_p,min_p", [
    (1.0, 0, 1.0, 0.0), (0.5, 0, 1.0, 0.0), (2.0, 4, 1.0, 0.0), (1.0, 0, 0.8, 0.0), (0.9, 0, 1.0, 0.1),
])
def test_sample_distribution_matches_probs(temperature, top_k, top_p, min_p):
    gen = np.random.default_rng(11)
    logits = gen.standard_normal(8, dtype=np.float32)
    params = _core.SamplingParams(temperature, top_k, top_p, min_p)
    rng = _core.Rng(1234)
    draws = np.array([_core.sample(logits, params, rng) for _ in range(100_000)])
    assert chisquare_pvalue(draws, ref_probs(logits, temperature, top_k, top_p, min_p)) > P_MIN


def test_sample_probs_distribution():
    p = np.array([0.1, 0.0, 0.25, 0.05, 0.6], dtype=np.float32)
    rng = _core.Rng(99)
    draws = np.array([_core.sample_probs(p, rng) for _ in range(100_000)])
    assert chisquare_pvalue(draws, p.astype(np.float64)) > P_MIN


def test_sample_large_vocab_stays_in_support():
    gen = np.random.default_rng(5)
    logits = gen.standard_normal(151_936, dtype=np.float32) * 3
    params = _core.SamplingParams(temperature=0.8, top_k=40)
    allowed = set(np.argsort(-logits)[:40].tolist())
    rng = _core.Rng(0)
    assert all(_core.sample(logits, params, rng) in allowed for _ in range(2000))


def test_sampling_is_reproducible_with_the_same_seed():
    logits = np.random.default_rng(0).standard_normal(1000, dtype=np.float32)
    params = _core.SamplingParams(temperature=1.0)
    a, b, c = _core.Rng(42), _core.Rng(42), _core.Rng(43)
    seq_a = [_core.sample(logits, params, a) for _ in range(200)]
    seq_b = [_core.sample(logits, params, b) for _ in range(200)]
    seq_c = [_core.sample(logits, params, c) for _ in range(200)]
    assert seq_a == seq_b
    assert seq_a != seq_c


def test_rng_uniform_range_and_moments():
    rng = _core.Rng(3)
    u = np.array([rng.uniform() for _ in range(50_000)])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > P_MIN


def test_rng_state_round_trip_and_pickle():
    rng = _core.Rng(2024)
    for _ in range(10):
        rng.uniform()
    state = rng.get_state()
    assert isinstance(state, bytes) and len(state) == 32
    ahead = [rng.uniform() for _ in range(5)]
    rng.set_state(state)
    assert [rng.uniform() for _ in range(5)] == ahead
    other = _core.Rng(0)
    other.set_state(state)
    assert [other.uniform() for _ in range(5)] == ahead
    rng.set_state(state)
    clone = pickle.loads(pickle.dumps(rng))
    assert [clone.uniform() for _ in range(5)] == ahead


@pytest.mark.parametrize("seed", [0, 1, -1, 2**64 - 1, 2**64, 10**30])
def test_rng_accepts_any_int_seed(seed):
    assert 0.0 <= _core.Rng(seed).uniform() < 1.0


def test_rng_distinct_seeds_distinct_streams():
    firsts = {_core.Rng(s).uniform() for s in range(100)}
    assert len(firsts) == 100


@pytest.mark.parametrize("state", [b"", b"\x01" * 31, b"\x01" * 33, b"\x00" * 32])
def test_rng_set_state_rejects_bad_state(state):
    with pytest.raises(ValueError):
        _core.Rng(0).set_state(state)


def test_sampling_params_defaults_and_repr():
    p = _core.SamplingParams()
    assert (p.temperature, p.top_k, p.top_p, p.min_p) == (0.0, 0, 1.0, 0.0)
    assert "top_k=0" in repr(p)
    p.temperature = 0.5
    assert p.temperature == 0.5


@pytest.mark.parametrize("kwargs", [
    {"temperature": -0.1}, {"temperature": float("nan")}, {"temperature": float("inf")},
    {"top_k": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"top_p": float("nan")},
    {"min_p": -0.01}, {"min_p": 1.01}, {"min_p": float("nan")},
])
def test_sampling_params_reject_out_of_range(kwargs):
    with pytest.raises(ValueError):
        _core.SamplingParams(**kwargs)
    params = _core.SamplingParams()
    (name, value), = kwargs.items()
    with pytest.raises(ValueError):
        setattr(params, name, value)
    assert (params.temperature, params.top_k, params.top_p, params.min_p) == (0.0, 0, 1.0, 0.0)


GOOD = np.array([0.0, 1.0, 2.0], dtype=np.float32)
BAD_LOGITS = [
    np.zeros(0, dtype=np.float32),
    np.zeros((2, 3), dtype=np.float32),
    np.array([0.0, np.nan, 1.0], dtype=np.float32),
    np.array([0.0, np.inf, 1.0], dtype=np.float32),
    np.array([-np.inf, 0.0, 1.0], dtype=np.float32),
    np.array([0.0, 1.0, 2.0], dtype=np.float64),
    np.zeros(6, dtype=np.float32)[::2],
    [0.0, 1.0, 2.0],
    np.float32(1.0),
]


@pytest.mark.parametrize("logits", BAD_LOGITS, ids=range(len(BAD_LOGITS)))
def test_bad_logits_raise_value_error(logits):
    rng = _core.Rng(0)
    hot = _core.SamplingParams(temperature=1.0)
    for call in (lambda: _core.argmax(logits), lambda: _core.probs(logits, hot),
                 lambda: _core.sample(logits, hot, rng), lambda: _core.sample(logits, _core.SamplingParams(), rng)):
        with pytest.raises(ValueError):
            call()


def test_nan_far_from_the_max_is_still_rejected():
    x = np.random.default_rng(0).standard_normal(151_936, dtype=np.float32)
    x[-1] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        _core.argmax(x)


@pytest.mark.parametrize("p", [
    np.array([0.5, 0.6], dtype=np.float32),
    np.array([0.5, 0.4], dtype=np.float32),
    np.array([1.5, -0.5], dtype=np.float32),
    np.array([np.nan, 1.0], dtype=np.float32),
    np.zeros(0, dtype=np.float32),
    np.array([[0.5, 0.5]], dtype=np.float32),
    np.array([0.5, 0.5], dtype=np.float64),
])
def test_sample_probs_rejects_non_distributions(p):
    with pytest.raises(ValueError):
        _core.sample_probs(p, _core.Rng(0))


def test_read_only_and_sliced_views_are_accepted_without_copy():
    block = np.random.default_rng(0).standard_normal((4, 50), dtype=np.float32)
    block.setflags(write=False)
    row = block[2]
    assert _core.argmax(row) == int(np.argmax(row))
    np.testing.assert_allclose(_core.probs(row, _core.SamplingParams(1.0)), ref_probs(row, 1.0), rtol=2e-5)
