"""pyaccel._core.verify_tree: exact rules on handmade logits, and losslessness
checked statistically: the emitted tokens must follow the target's own
distribution, computed here independently with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pyaccel import _core

P_MIN = 1e-3  # chi-square p-value below which a rule is declared lossy
N_TRIALS = 100_000
HOT = _core.SamplingParams(temperature=1.0)
GREEDY = _core.SamplingParams()


# ---------------------------------------------------------------- helpers ----

def softmax(x: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = x.astype(np.float64) / temperature
    w = np.exp(z - z.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def top_k_softmax(x: np.ndarray, k: int, temperature: float) -> np.ndarray:
    keep = np.argsort(-x, kind="stable")[:k]
    out = np.zeros(x.size)
    out[keep] = softmax(x[keep], temperature)
    return out


def chisquare_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    samples = np.asarray(samples)
    counts = np.bincount(samples.ravel(), minlength=p.size)
    support = p > 0
    assert counts[~support].sum() == 0, "emitted a token the target gives probability 0"
    expected = p[support] / p[support].sum() * samples.size
    return float(stats.chisquare(counts[support], expected).pvalue)


def draw_without_replacement(gen: np.random.Generator, q: np.ndarray, k: int) -> np.ndarray:
    """Ordered draws of k distinct tokens per row of q (Gumbel top-k), shape (..., k)."""
    with np.errstate(divide="ignore"):
        keys = np.log(q) + gen.gumbel(size=q.shape)
    return np.argsort(-keys, axis=-1)[..., :k].astype(np.int32)


def draw_categorical(gen: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(np.searchsorted(np.cumsum(p), gen.uniform(size=n) * p.sum()), p.size - 1)


def emitted(result, tokens) -> list[int]:
    return [int(tokens[i]) for i in result.accepted] + [result.next_token]


def peaked_row(v: int, token: int, height: float = 10.0) -> np.ndarray:
    row = np.zeros(v, dtype=np.float32)
    row[token] = height
    return row


def run_first_tokens(target, draft, tokens_per_trial, parents, params, seed) -> np.ndarray:
    rng = _core.Rng(seed)
    out = np.empty(len(tokens_per_trial), dtype=np.int64)
    for t, tokens in enumerate(tokens_per_trial):
        out[t] = emitted(_core.verify_tree(target, tokens, parents, params, rng, draft), tokens)[0]
    return out


# ------------------------------------------------------------ greedy, exact ----

def test_greedy_chain_accepts_all_then_emits_bonus():
    v = 10
    tokens = np.array([3, 7, 1], dtype=np.int32)
    logits = np.stack([peaked_row(v, 3), peaked_row(v, 7), peaked_row(v, 1), peaked_row(v, 9)])
    r = _core.verify_tree(logits, tokens, [-1, 0, 1], GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token, r.path) == ([0, 1, 2], 9, 0)


def test_greedy_chain_stops_at_first_mismatch():
    v = 10
    logits = np.stack([peaked_row(v, 3), peaked_row(v, 5), peaked_row(v, 1), peaked_row(v, 9)])
    r = _core.verify_tree(logits, [3, 7, 1], [-1, 0, 1], GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token) == ([0], 5)


def test_greedy_empty_draft_is_plain_decoding():
    logits = peaked_row(6, 4)[None, :]
    r = _core.verify_tree(logits, np.zeros(0, np.int32), np.zeros(0, np.int32), GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token, r.path) == ([], 4, 0)


def test_greedy_tree_follows_matching_branch():
    # root ─┬─ 0 (tok 2) ── 2 (tok 4)
    #       └─ 1 (tok 5) ─┬─ 3 (tok 6)
    #                     └─ 4 (tok 7) ── 5 (tok 8)
    v = 10
    parents = [-1, -1, 0, 1, 1, 4]
    tokens = [2, 5, 4, 6, 7, 8]
    rows = {-1: 5, 0: 0, 1: 7, 2: 0, 3: 0, 4: 8, 5: 1}
    logits = np.stack([peaked_row(v, rows[i]) for i in range(-1, 6)])
    r = _core.verify_tree(logits, tokens, parents, GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token) == ([1, 4, 5], 1)
    layout = _core.tree_layout(parents)
    assert layout.paths[r.path][:3] == [1, 4, 5]


def test_greedy_duplicate_siblings_take_the_lowest_index():
    logits = np.stack([peaked_row(5, 2), peaked_row(5, 1), peaked_row(5, 3)])
    r = _core.verify_tree(logits, [2, 2], [-1, -1], GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token) == ([0], 1)


def test_greedy_argmax_ties_go_to_lowest_token_id():
    row0 = np.array([0.0, 4.0, 1.0, 4.0], dtype=np.float32)  # ids 1 and 3 tie
    logits = np.stack([row0, peaked_row(4, 0), peaked_row(4, 2)])
    r = _core.verify_tree(logits, [3, 1], [-1, -1], GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token) == ([1], 2)
    r = _core.verify_tree(logits[:2], [3], [-1], GREEDY, _core.Rng(0))
    assert (r.accepted, r.next_token) == ([], 1)


def test_greedy_uses_no_randomness_and_ignores_draft_probs():
    logits = np.stack([peaked_row(4, 1), peaked_row(4, 2)])
    draft = np.full((2, 4), 0.25, dtype=np.float32)
    rng = _core.Rng(5)
    state = rng.get_state()
    r = _core.verify_tree(logits, [1], [-1], GREEDY, rng, draft)
    assert (r.accepted, r.next_token) == ([0], 2)
    assert rng.get_state() == state


@pytest.mark.parametrize("seed", range(25))
def test_greedy_path_index_on_random_trees(seed):
    gen = np.random.default_rng(seed)
    n = int(gen.integers(1, 40))
    parents = [-1] + [int(gen.integers(-1, i)) for i in range(1, n)]
    target = int(gen.integers(0, n))
    path = []
    node = target
    while node >= 0:
        path.append(node)
        node = parents[node]
    path.reverse()
    v = n + 1  # node i carries token i; token n is drafted nowhere
    rows = [n] * (n + 1)
    prev = -1
    for node in path:
        rows[prev + 1] = node
        prev = node
    logits = np.stack([peaked_row(v, t) for t in rows])
    r = _core.verify_tree(logits, np.arange(n), parents, GREEDY, _core.Rng(0))
    layout = _core.tree_layout(parents)
    assert r.accepted == path
    assert r.next_token == n
    assert r.path == min(layout.node_seqs[target])
    assert layout.paths[r.path][: len(path)] == path


# ------------------------------------------------------ lossless, statistical ----

def test_plain_decoding_samples_the_target():
    logits = np.random.default_rng(0).standard_normal((1, 7)).astype(np.float32)
    empty = np.zeros(0, dtype=np.int32)
    out = run_first_tokens(logits, None, [empty] * N_TRIALS, empty, HOT, seed=1)
    assert chisquare_pvalue(out, softmax(logits[0])) > P_MIN


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_siblings_drawn_from_q_without_replacement_are_lossless(k):
    # k = 1 is the chain rule of Leviathan et al. / Chen et al.
    gen = np.random.default_rng(100 + k)
    v = 8
    target = gen.standard_normal((k + 1, v)).astype(np.float32)
    q = _core.probs(gen.standard_normal(v).astype(np.float32) * 1.5, HOT)
    draft = np.tile(q, (k + 1, 1))
    trials = draw_without_replacement(gen, np.tile(q.astype(np.float64), (N_TRIALS, 1)), k)
    out = run_first_tokens(target, draft, trials, np.full(k, -1, np.int32), HOT, seed=k)
    assert chisquare_pvalue(out, softmax(target[0])) > P_MIN


@pytest.mark.parametrize("k", [1, 2, 4])
def test_deterministic_drafts_are_lossless(k):
    # One-hot q: whatever picked the children (here a distribution r unrelated
    # to p), accepting x w.p. p(x) and removing it on rejection keeps p.
    gen = np.random.default_rng(200 + k)
    v = 8
    target = gen.standard_normal((k + 1, v)).astype(np.float32)
    r = softmax(gen.standard_normal(v) * 2)
    trials = draw_without_replacement(gen, np.tile(r, (N_TRIALS, 1)), k)
    out = run_first_tokens(target, None, trials, np.full(k, -1, np.int32), HOT, seed=k)
    assert chisquare_pvalue(out, softmax(target[0])) > P_MIN


def test_truncated_distributions_are_lossless():
    params = _core.SamplingParams(temperature=0.7, top_k=3)
    gen = np.random.default_rng(7)
    v, k = 8, 2
    target = gen.standard_normal((k + 1, v)).astype(np.float32)
    q = _core.probs(gen.standard_normal(v).astype(np.float32), params)  # 3 nonzero entries
    trials = draw_without_replacement(gen, np.tile(q.astype(np.float64), (N_TRIALS, 1)), k)
    out = run_first_tokens(target, np.tile(q, (k + 1, 1)), trials, [-1, -1], params, seed=3)
    assert chisquare_pvalue(out, top_k_softmax(target[0], 3, 0.7)) > P_MIN


def test_duplicate_sibling_is_skipped_and_stays_lossless():
    gen = np.random.default_rng(8)
    v = 6
    target = gen.standard_normal((3, v)).astype(np.float32)
    q = _core.probs(gen.standard_normal(v).astype(np.float32), HOT)
    first = draw_without_replacement(gen, np.tile(q.astype(np.float64), (N_TRIALS, 1)), 1)
    trials = np.concatenate([first, first], axis=1)
    out = run_first_tokens(target, np.tile(q, (3, 1)), trials, [-1, -1], HOT, seed=4)
    assert chisquare_pvalue(out, softmax(target[0])) > P_MIN


def make_depth2_tables(seed: int, v: int):
    gen = np.random.default_rng(seed)
    t0 = gen.standard_normal(v).astype(np.float32)
    t1 = gen.standard_normal((v, v)).astype(np.float32) * 1.5  # row a: logits after token a
    q0 = _core.probs(gen.standard_normal(v).astype(np.float32), HOT)
    q1 = np.stack([_core.probs(r, HOT) for r in gen.standard_normal((v, v)).astype(np.float32)])
    return (t0, t1), (q0, q1)


def build_binary_depth2(gen, t0, t1, q0, q1, n):
    # root ─┬─ 0 ─┬─ 2      children of each node drawn from its q without
    #       │     └─ 3      replacement; rows: root, 0, 1, then unused leaves
    #       └─ 1 ─┬─ 4
    #             └─ 5
    v = t0.size
    c = draw_without_replacement(gen, np.tile(q0.astype(np.float64), (n, 1)), 2)  # (n, 2)
    g = draw_without_replacement(gen, q1[c].astype(np.float64), 2)  # (n, 2, 2)
    tokens = np.concatenate([c, g.reshape(n, 4)], axis=1)
    target = np.zeros((n, 7, v), dtype=np.float32)
    target[:, 0], target[:, 1:3] = t0, t1[c]
    draft = np.full((n, 7, v), 1.0 / v, dtype=np.float32)
    draft[:, 0], draft[:, 1:3] = q0, q1[c]
    return [-1, -1, 0, 0, 1, 1], tokens, target, draft


def build_chain2(gen, t0, t1, q0, q1, n):
    v = t0.size
    a = draw_categorical(gen, q0.astype(np.float64), n)
    u = gen.uniform(size=(n, 1))
    b = np.minimum((np.cumsum(q1[a], axis=1) < u).sum(axis=1), v - 1)  # b ~ q1[a]
    target = np.zeros((n, 3, v), dtype=np.float32)
    target[:, 0], target[:, 1] = t0, t1[a]
    draft = np.full((n, 3, v), 1.0 / v, dtype=np.float32)
    draft[:, 0], draft[:, 1] = q0, q1[a]
    return [-1, 0], np.stack([a, b], axis=1).astype(np.int32), target, draft


def build_chain2_deterministic(gen, t0, t1, q0, q1, n):
    parents, tokens, target, _ = build_chain2(gen, t0, t1, q0, q1, n)
    return parents, tokens, target, None


@pytest.mark.parametrize("build", [build_binary_depth2, build_chain2, build_chain2_deterministic],
                         ids=["tree-2x2-with-q", "chain2-with-q", "chain2-one-hot"])
def test_joint_of_two_tokens_is_the_target_product(build):
    """Emitted (token 1, token 2) pairs follow p(a) p(b | a). A step that emits
    one token is followed by a plain decoding step, as the decode loop does."""
    v = 5
    (t0, t1), (q0, q1) = make_depth2_tables(31, v)
    parents, tokens, target, draft = build(np.random.default_rng(9), t0, t1, q0, q1, N_TRIALS)
    rng = _core.Rng(9)
    pairs = np.empty((N_TRIALS, 2), dtype=np.int64)
    for t in range(N_TRIALS):
        r = _core.verify_tree(target[t], tokens[t], parents, HOT, rng, None if draft is None else draft[t])
        seq = emitted(r, tokens[t])
        if len(seq) == 1:
            seq.append(_core.sample(t1[seq[0]], HOT, rng))
        pairs[t] = seq[:2]
    expected = (softmax(t0)[:, None] * softmax(t1)).ravel()
    assert chisquare_pvalue(pairs[:, 0] * v + pairs[:, 1], expected) > P_MIN


def test_sampling_is_reproducible_with_the_same_seed():
    gen = np.random.default_rng(0)
    target = gen.standard_normal((4, 50)).astype(np.float32)
    args = (target, [1, 2, 3], [-1, -1, 0], HOT)
    a = [emitted(_core.verify_tree(*args, rng), [1, 2, 3]) for rng in [_core.Rng(77)] * 200]
    b = [emitted(_core.verify_tree(*args, rng), [1, 2, 3]) for rng in [_core.Rng(77)] * 200]
    assert a == b


# ------------------------------------------------------------------ teeth ----
# The same chi-square check must reject rules that are actually lossy.

TEETH_P = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
TEETH_Q = np.array([0.05, 0.1, 0.15, 0.2, 0.25, 0.25])


def test_teeth_sampling_p_after_rejection_is_detected():
    # Bug: on rejection sample p itself instead of norm(max(0, p - q)).
    gen = np.random.default_rng(1)
    x = draw_categorical(gen, TEETH_Q, N_TRIALS)
    accept = gen.uniform(size=N_TRIALS) < np.minimum(1.0, TEETH_P[x] / TEETH_Q[x])
    out = np.where(accept, x, draw_categorical(gen, TEETH_P, N_TRIALS))
    assert chisquare_pvalue(out, TEETH_P) < P_MIN


def test_teeth_with_replacement_residual_on_distinct_siblings_is_detected():
    # Bug: SpecInfer's with-replacement update (q unchanged after a rejection)
    # applied to siblings drawn without replacement.
    gen = np.random.default_rng(2)
    p, q = TEETH_P, TEETH_Q
    x = draw_without_replacement(gen, np.tile(q, (N_TRIALS, 1)), 2)
    u = gen.uniform(size=(N_TRIALS, 2))
    r1 = np.maximum(p - q, 0.0)
    r1 /= r1.sum()
    r2 = np.maximum(r1 - q, 0.0)
    r2 /= r2.sum()
    first = u[:, 0] < np.minimum(1.0, p[x[:, 0]] / q[x[:, 0]])
    second = u[:, 1] < np.minimum(1.0, r1[x[:, 1]] / q[x[:, 1]])
    out = np.where(first, x[:, 0], np.where(second, x[:, 1], draw_categorical(gen, r2, N_TRIALS)))
    assert chisquare_pvalue(out, p) < P_MIN


def test_teeth_draft_probs_that_did_not_generate_the_draft_is_detected():
    # verify_tree is only lossless when q is the distribution the children came
    # from: feeding it another q must show up in the same check.
    target = np.log(TEETH_P).astype(np.float32)[None, :].repeat(2, axis=0)
    claimed = np.tile(TEETH_Q.astype(np.float32), (2, 1))
    gen = np.random.default_rng(3)
    actual = softmax(np.zeros(6))  # children really drawn uniformly
    trials = draw_without_replacement(gen, np.tile(actual, (N_TRIALS, 1)), 1)
    out = run_first_tokens(target, claimed, trials, [-1], HOT, seed=5)
    assert chisquare_pvalue(out, TEETH_P) < P_MIN


# --------------------------------------------------------- typical, exact ----

def typical_threshold(row: np.ndarray, params: _core.TypicalParams, temperature: float = 1.0) -> float:
    p = softmax(row, temperature)
    entropy = -(p * np.log(p)).sum()
    return min(params.epsilon, params.delta * np.exp(-entropy))


def test_typical_accepts_by_threshold():
    tp = _core.TypicalParams()
    root = np.array([2.0, 1.0, -1.0, -3.0], dtype=np.float32)
    p = softmax(root)
    thr = typical_threshold(root, tp)
    assert p[1] > thr > p[2]  # token 1 acceptable, token 2 not
    logits = np.stack([root, peaked_row(4, 0, 60.0), peaked_row(4, 1, 60.0)])
    r = _core.verify_tree(logits, [2, 1], [-1, -1], HOT, _core.Rng(0), typical=tp)
    assert (r.accepted, r.next_token) == ([1], 1)


def test_typical_keeps_the_deepest_acceptable_path():
    # root ─┬─ 0 (acceptable leaf)
    #       └─ 1 ── 2 (both acceptable)
    flat = np.zeros(4, dtype=np.float32)
    logits = np.stack([flat, flat, flat, peaked_row(4, 3, 60.0)])
    r = _core.verify_tree(logits, [0, 1, 2], [-1, -1, 1], HOT, _core.Rng(0), typical=_core.TypicalParams())
    assert (r.accepted, r.next_token, r.path) == ([1, 2], 3, 1)


def test_typical_ties_in_depth_go_to_lowest_node_ids():
    flat = np.zeros(4, dtype=np.float32)
    logits = np.stack([flat, flat, flat, peaked_row(4, 2, 60.0), peaked_row(4, 0, 60.0)])
    r = _core.verify_tree(logits, [0, 1, 2, 3], [-1, -1, 0, 1], HOT, _core.Rng(0),
                          typical=_core.TypicalParams())
    assert (r.accepted, r.next_token) == ([0, 2], 2)


def test_typical_rejects_everything_on_a_confident_row():
    logits = np.stack([peaked_row(4, 3, 60.0), np.zeros(4, np.float32), np.zeros(4, np.float32)])
    r = _core.verify_tree(logits, [0, 1], [-1, -1], HOT, _core.Rng(0), typical=_core.TypicalParams())
    assert (r.accepted, r.next_token, r.path) == ([], 3, 0)


def test_typical_threshold_parameters():
    flat = np.zeros(4, dtype=np.float32)  # p = 0.25 everywhere, exp(-H) = 0.25
    logits = np.stack([flat, peaked_row(4, 1, 60.0)])
    loose = _core.TypicalParams(epsilon=0.09, delta=1.0)  # threshold 0.09
    strict = _core.TypicalParams(epsilon=0.3, delta=1.2)  # threshold 0.3
    assert _core.verify_tree(logits, [0], [-1], HOT, _core.Rng(0), typical=loose).accepted == [0]
    assert _core.verify_tree(logits, [0], [-1], HOT, _core.Rng(0), typical=strict).accepted == []


def test_typical_at_temperature_zero_is_greedy():
    root = np.array([2.0, 1.9, -1.0, -3.0], dtype=np.float32)  # token 1 typical but not argmax
    logits = np.stack([root, peaked_row(4, 2)])
    r = _core.verify_tree(logits, [1], [-1], GREEDY, _core.Rng(0), typical=_core.TypicalParams())
    assert (r.accepted, r.next_token) == ([], 0)


@pytest.mark.parametrize("kwargs", [{"epsilon": -0.1}, {"epsilon": 1.5}, {"delta": -1.0},
                                    {"delta": float("nan")}, {"epsilon": float("nan")}])
def test_typical_params_validation(kwargs):
    with pytest.raises(ValueError):
        _core.TypicalParams(**kwargs)


def test_typical_params_defaults():
    tp = _core.TypicalParams()
    assert tp.epsilon == pytest.approx(0.09) and tp.delta == pytest.approx(0.3)


# --------------------------------------------------------- invalid inputs ----

def good_inputs(v: int = 5):
    gen = np.random.default_rng(0)
    logits = gen.standard_normal((3, v)).astype(np.float32)
    draft = np.stack([_core.probs(r, HOT) for r in gen.standard_normal((3, v)).astype(np.float32)])
    return logits, np.array([1, 2], np.int32), np.array([-1, 0], np.int32), draft


def call(logits, tokens, parents, draft=None, params=HOT):
    return _core.verify_tree(logits, tokens, parents, params, _core.Rng(0), draft)


def test_good_inputs_pass():
    """The valid baseline of the invalid-input cases: every call returns a well-formed result."""
    logits, tokens, parents, draft = good_inputs()
    for params in (HOT, GREEDY):
        for q in (draft, None):
            res = call(logits, tokens, parents, q, params)
            assert list(res.accepted) in ([], [0], [0, 1])  # a root path of the chain
            assert 0 <= res.next_token < logits.shape[1] and res.path == 0
    greedy = call(logits, tokens, parents, None, GREEDY)
    kept = list(greedy.accepted)
    assert greedy.next_token == int(np.argmax(logits[len(kept)]))  # the bonus token is the row's argmax


def bad_cases():
    logits, tokens, parents, draft = good_inputs()
    nan0 = logits.copy()
    nan0[0, 2] = np.nan
    inf0 = logits.copy()
    inf0[0, 0] = -np.inf
    neg_q = draft.copy()
    neg_q[0] = [1.2, -0.2, 0.0, 0.0, 0.0]
    unnorm_q = draft * 1.5
    nan_q = draft.copy()
    nan_q[0, 1] = np.nan
    return {
        "too few rows": (logits[:2], tokens, parents, None),
        "too many rows": (np.vstack([logits, logits[:1]]), tokens, parents, None),
        "length mismatch": (logits, tokens, parents[:1], None),
        "parent is self": (logits, tokens, np.array([-1, 1], np.int32), None),
        "parent ahead": (logits, tokens, np.array([1, -1], np.int32), None),
        "parent below -1": (logits, tokens, np.array([-1, -2], np.int32), None),
        "token too large": (logits, np.array([1, 5], np.int32), parents, None),
        "token negative": (logits, np.array([-1, 2], np.int32), parents, None),
        "nan in row 0": (nan0, tokens, parents, None),
        "-inf in row 0": (inf0, tokens, parents, None),
        "empty vocab": (np.zeros((3, 0), np.float32), tokens, parents, None),
        "float64 logits": (logits.astype(np.float64), tokens, parents, None),
        "1-D logits": (logits[0], tokens, parents, None),
        "strided logits": (np.repeat(logits, 2, axis=1)[:, ::2], tokens, parents, None),
        "draft rows": (logits, tokens, parents, draft[:2]),
        "draft cols": (logits, tokens, parents, draft[:, :4]),
        "draft float64": (logits, tokens, parents, draft.astype(np.float64)),
        "negative q": (logits, tokens, parents, neg_q),
        "unnormalised q": (logits, tokens, parents, unnorm_q),
        "nan q": (logits, tokens, parents, nan_q),
        "float tokens": (logits, tokens.astype(np.float32), parents, None),
    }


QUIET_WHEN_GREEDY = {"negative q", "unnormalised q", "nan q"}  # greedy never reads q


@pytest.mark.parametrize("name", list(bad_cases()))
def test_invalid_inputs_raise_value_error(name):
    logits, tokens, parents, draft = bad_cases()[name]
    with pytest.raises(ValueError):
        call(logits, tokens, parents, draft, HOT)
    if name not in QUIET_WHEN_GREEDY:
        with pytest.raises(ValueError):
            call(logits, tokens, parents, draft, GREEDY)


def test_error_messages_say_what_to_do():
    logits, tokens, _, _ = good_inputs()
    with pytest.raises(ValueError, match="parent index must point to an earlier node"):
        call(logits, tokens, np.array([-1, 1], np.int32))
    with pytest.raises(ValueError, match="n \\+ 1 = 3 rows"):
        call(logits[:2], tokens, np.array([-1, 0], np.int32))
    with pytest.raises(ValueError, match="np.ascontiguousarray"):
        call(logits.astype(np.float64), tokens, np.array([-1, 0], np.int32))


def test_rows_that_are_never_read_are_not_checked():
    logits, tokens, parents, _ = good_inputs()
    logits[0] = peaked_row(5, 4)  # no child carries token 4: rows 1, 2 are never read
    logits[1:, 0] = np.nan
    r = call(logits, tokens, parents, None, GREEDY)
    assert (r.accepted, r.next_token) == ([], 4)
