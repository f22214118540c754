"""pyaccel._core n-gram drafting (NgramIndex, NgramCache, ngram_cache_draft) against
plain-Python brute-force references."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyaccel import _core

SETTINGS = settings(max_examples=150, deadline=None)

# ---- references --------------------------------------------------------------------------


def ref_occurrences(stream: list[int], n: int) -> list[int]:
    """End positions of the earlier occurrences of the stream's last n tokens."""
    suffix = stream[len(stream) - n :]
    return [e for e in range(n - 1, len(stream) - 1) if stream[e - n + 1 : e + 1] == suffix]


def ref_agreement(stream, end, n, cap):
    """Tokens ending at `end` equal to the stream's last tokens, counted up to max(n, cap)."""
    k = n
    while k < max(cap, n) and end - k >= 0 and stream[end - k] == stream[-1 - k]:
        k += 1
    return k


def ref_lookup(stream, n_min, n_max, max_len, max_candidates, context_cap=0):
    """Brute force: prefix statistics in a dict, branches chosen by (agreement, count, most recent)."""
    for n in range(n_max, n_min - 1, -1):
        if len(stream) < n + 1 or not (ends := ref_occurrences(stream, n)):
            continue
        stats: dict[tuple, list[int]] = {}  # path -> [best agreement, count, most recent occurrence]
        source: dict[tuple, tuple[int, int]] = {}  # path -> (agreement, end) of its best occurrence
        for e in ends:
            cont = tuple(stream[e + 1 : e + 1 + max_len])
            agree = ref_agreement(stream, e, n, context_cap)
            for k in range(1, len(cont) + 1):
                s = stats.setdefault(cont[:k], [0, 0, -1])
                s[0] = max(s[0], agree)
                s[1] += 1
                s[2] = max(s[2], e)
                source[cont[:k]] = max(source.get(cont[:k], (-1, -1)), (agree, e))

        def rank(p):
            return tuple(stats[p])

        def children(p):
            return [q for q in stats if len(q) == len(p) + 1 and q[: len(p)] == p]

        index: dict[tuple, int] = {}
        order: list[tuple] = []
        frontier = children(())
        for _ in range(max_candidates):
            if not frontier:
                break
            cur = max(frontier, key=rank)
            frontier.remove(cur)
            while cur is not None:
                index[cur] = len(order)
                order.append(cur)
                kids = children(cur)
                best = max(kids, key=rank) if kids else None
                frontier += [k for k in kids if k != best]
                cur = best
        tokens = [p[-1] for p in order]
        parents = [index[p[:-1]] if len(p) > 1 else -1 for p in order]
        return (tokens, parents, [stats[p][1] for p in order], [stats[p][0] for p in order],
                [source[p][1] for p in order], n, len(ends))
    return [], [], [], [], [], 0, 0


def ref_cache(stream, n_min, n_max, start=0, into=None):
    cache = into if into is not None else {}
    for i in range(start, len(stream)):
        for n in range(n_min, min(n_max, i) + 1):
            cache.setdefault(tuple(stream[i - n : i]), Counter())[stream[i]] += 1
    return cache


def assert_cache_equals(cache: _core.NgramCache, ref: dict) -> None:
    assert len(cache) == len(ref)
    for ngram, followers in ref.items():
        assert cache.counts(list(ngram)) == dict(followers)


DEFAULTS = {
    "context_min_samples": [2, 2, 1, 1],
    "context_min_percent": [66, 50, 50, 50],
    "dynamic_min_samples": [4, 3, 2, 2],
    "dynamic_min_percent": [75, 66, 66, 66],
    "static_n": 2,
    "static_min_samples": 2,
    "static_min_percent": 50,
    "static_weight": 100,
}


def ref_vote(followers, votes, weight):
    best = None
    for tok, cnt in followers.items():
        score = cnt * (weight * votes[tok] if votes and tok in votes else 1)
        if best is None or score > best[0] or (score == best[0] and tok < best[1]):
            best = (score, tok, cnt)
    return best[1], best[2], sum(followers.values())


def ref_draft(context, caches, static, n_draft, th):
    """llama.cpp common_ngram_cache_draft over dict caches: caches = [(ref, n_min, n_max,
    min_samples, min_percent)], static = (ref, n) or None."""
    seq, out = list(context), []
    while len(out) < n_draft:
        votes = None
        if static is not None and len(seq) >= static[1]:
            votes = static[0].get(tuple(seq[len(seq) - static[1] :]))
        token = None
        for ref, n_min, n_max, samples, percent in caches:
            for n in range(n_max, n_min - 1, -1):
                if token is not None or len(seq) < n or tuple(seq[len(seq) - n :]) not in ref:
                    continue
                tok, cnt, total = ref_vote(ref[tuple(seq[len(seq) - n :])], votes, th["static_weight"])
                if total >= samples[n - 1] and 100 * cnt >= percent[n - 1] * total:
                    token = tok
        if token is None and votes:
            tok, cnt, total = ref_vote(votes, None, 1)
            if total >= th["static_min_samples"] and 100 * cnt >= th["static_min_percent"] * total:
                token = tok
        if token is None:
            break
        out.append(token)
        seq.append(token)
    return out


# ---- NgramIndex --------------------------------------------------------------------------

ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 3), max_size=10)),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
    ),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(ops=ops_strategy, n_min=st.integers(1, 3), n_extra=st.integers(0, 2),
       max_len=st.integers(1, 6), max_candidates=st.integers(1, 5), context_cap=st.sampled_from([0, 2, 5, 64]))
def test_index_matches_brute_force_after_appends_and_truncates(ops, n_min, n_extra, max_len, max_candidates,
                                                               context_cap):
    n_max = n_min + n_extra
    index, ref = _core.NgramIndex(n_min, n_max), []
    for op, arg in ops:
        if op == "append":
            index.append(np.asarray(arg, dtype=np.int32))
            ref += arg
        else:
            keep = min(arg, len(ref))
            index.truncate(keep)
            del ref[keep:]
        assert index.tokens().tolist() == ref and len(index) == index.size() == len(ref)
        got = index.lookup(n_min, n_max, max_len, max_candidates, context_cap)
        want = ref_lookup(ref, n_min, n_max, max_len, max_candidates, context_cap)
        assert (got.tokens.tolist(), got.parents.tolist(), got.counts.tolist(), got.contexts.tolist(),
                got.sources.tolist(), got.match_len, got.n_occurrences) == want


@SETTINGS
@given(stream=st.lists(st.integers(0, 2), max_size=40), max_len=st.integers(1, 6),
       max_candidates=st.integers(1, 6))
def test_tree_properties(stream, max_len, max_candidates):
    index = _core.NgramIndex(1, 3)
    index.append(stream)
    tree = index.lookup(1, 3, max_len, max_candidates)
    n = len(tree)
    assert tree.tokens.dtype == np.int32 and tree.parents.dtype == np.int32
    if tree.match_len == 0:
        assert n == 0 and tree.n_occurrences == 0
        return
    ends = ref_occurrences(stream, tree.match_len)
    conts = [tuple(stream[e + 1 : e + 1 + max_len]) for e in ends]
    has_child = [False] * n
    for i in range(n):
        parent = tree.parents[i]
        assert -1 <= parent < i  # children of a node come after it
        if parent >= 0:
            has_child[parent] = True
        path, j = [], i
        while j >= 0:
            path.insert(0, int(tree.tokens[j]))
            j = tree.parents[j]
        # Every root-to-node path is a real continuation, and counts are its support.
        assert tree.counts[i] == sum(c[: len(path)] == tuple(path) for c in conts) > 0
    assert 1 <= n - sum(has_child) <= max_candidates
    chain = index.chain(1, 3, max_len)
    assert chain.parents.tolist() == list(range(-1, len(chain) - 1))
    assert chain.tokens.tolist() == tree.tokens[: len(chain)].tolist()  # branch 1 first


def ref_bucket(k: int, n_buckets: int) -> int:
    """floor(2 log2 k) = floor(log2 k^2), in integers, capped."""
    return min(n_buckets - 1, (max(k, 1) ** 2).bit_length() - 1)


def ref_path_probs(tree, hazard: list[float]) -> list[float]:
    """Per node, the product along its path of each node's conditional acceptance among
    its siblings: the first sibling h(bucket(context + depth)), the others 1 - that by count."""
    parents, counts, contexts = tree.parents.tolist(), tree.counts.tolist(), tree.contexts.tolist()

    def depth(i: int) -> int:
        return 0 if parents[i] < 0 else 1 + depth(parents[i])

    def conditional(i: int) -> float:
        siblings = [j for j in range(len(parents)) if parents[j] == parents[i]]
        first = siblings[0]
        h = hazard[ref_bucket(contexts[first] + depth(first), len(hazard))]
        return h if i == first else (1 - h) * counts[i] / sum(counts[j] for j in siblings)

    def prob(i: int) -> float:
        return conditional(i) * (1.0 if parents[i] < 0 else prob(parents[i]))

    return [prob(i) for i in range(len(parents))]


def test_agreement_buckets_match_the_integer_rule():
    ks = list(range(-2, 300)) + [2**20, 2**31 - 1]
    assert _core.agreement_buckets(ks, 15).tolist() == [ref_bucket(k, 15) for k in ks]
    assert [_core.agreement_bucket(k, 40) for k in ks] == [ref_bucket(k, 40) for k in ks]
    with pytest.raises(ValueError, match="n_buckets"):
        _core.agreement_bucket(3, 0)


@SETTINGS
@given(stream=st.lists(st.integers(0, 3), min_size=2, max_size=60), max_len=st.integers(1, 8),
       max_candidates=st.integers(1, 6), context_cap=st.integers(0, 12),
       hazard=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=16))
def test_lookup_path_probs_match_reference(stream, max_len, max_candidates, context_cap, hazard):
    index = _core.NgramIndex(1, 3)
    index.append(stream)
    tree = index.lookup(1, 3, max_len, max_candidates, context_cap)
    got = _core.lookup_path_probs(tree, hazard)
    assert got.dtype == np.float64 and len(got) == len(tree)
    np.testing.assert_allclose(got, ref_path_probs(tree, hazard), rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="hazard"):
        _core.lookup_path_probs(tree, [])


def test_lookup_handmade_prefers_longest_match_and_frequency():
    stream = [1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2]
    index = _core.NgramIndex(1, 3)
    index.append(stream)
    chain = index.chain(1, 3, 3)  # "3 1 2" occurred once, followed by 4 1 2
    assert (chain.match_len, chain.tokens.tolist(), chain.counts.tolist()) == (3, [4, 1, 2], [1, 1, 1])
    tree = index.lookup(1, 2, 2, 2)  # "1 2" occurred 3 times: 3 1 (twice), 4 1
    assert tree.tokens.tolist() == [3, 1, 4, 1] and tree.parents.tolist() == [-1, 0, -1, 2]
    assert tree.counts.tolist() == [2, 2, 1, 1] and tree.n_occurrences == 3
    # With context agreement counted, the occurrence whose longer context agrees wins over
    # the more frequent one: "1 2" after "9" happened once, followed by 5.
    copy = _core.NgramIndex(1, 2)
    copy.append([9, 1, 2, 5, 8, 1, 2, 3, 7, 1, 2, 3, 9, 1, 2])
    assert copy.chain(1, 2, 1).tokens.tolist() == [3]
    ranked = copy.lookup(1, 2, 1, 2, context_cap=8)
    assert ranked.tokens.tolist() == [5, 3] and ranked.contexts.tolist() == [3, 2]
    assert ranked.counts.tolist() == [1, 2] and ranked.sources.tolist() == [2, 10]
    # Equal counts: the most recent occurrence wins.
    recent = _core.NgramIndex(1, 1)
    recent.append([7, 5, 7, 6, 7])
    assert recent.chain(1, 1, 1).tokens.tolist() == [6]


def test_index_rejects_caller_mistakes():
    index = _core.NgramIndex(2, 3)
    index.append([1, 2, 3])
    with pytest.raises(ValueError, match="n_min"):
        index.lookup(1, 3, 4)
    with pytest.raises(ValueError, match="max_len"):
        index.lookup(2, 3, 0)
    with pytest.raises(ValueError, match="truncate"):
        index.truncate(4)
    with pytest.raises(ValueError, match=">= 0"):
        index.truncate(-1)
    with pytest.raises(ValueError, match=">= 0"):
        index.append([3, -1])
    with pytest.raises(ValueError, match="n_min"):
        _core.NgramIndex(3, 2)


# ---- NgramCache --------------------------------------------------------------------------


@SETTINGS
@given(stream=st.lists(st.integers(0, 4), max_size=60), split=st.integers(0, 60),
       other=st.lists(st.integers(0, 4), max_size=30), n_min=st.integers(1, 4), n_extra=st.integers(0, 3))
def test_cache_update_and_merge_match_dict_reference(stream, split, other, n_min, n_extra):
    n_max = min(4, n_min + n_extra)
    split = min(split, len(stream))
    cache = _core.NgramCache(n_min, n_max)
    cache.update(stream[:split])
    cache.update(stream, start=split)  # incremental: only the new tokens are counted
    ref = ref_cache(stream, n_min, n_max)
    assert_cache_equals(cache, ref)
    extra = _core.NgramCache(n_min, n_max)
    extra.update(np.asarray(other, dtype=np.int32))
    cache.merge(extra)
    assert_cache_equals(cache, ref_cache(other, n_min, n_max, into=ref))


def test_cache_save_load_round_trip_is_exact_and_deterministic(tmp_path: Path):
    rng = np.random.default_rng(0)
    cache = _core.NgramCache(1, 4)
    cache.update(rng.integers(0, 50, 3000, dtype=np.int32))
    first, second = tmp_path / "a.ngc", tmp_path / "b.ngc"
    cache.save(first)
    loaded = _core.NgramCache.load(str(first))
    assert (loaded.n_min, loaded.n_max, len(loaded)) == (1, 4, len(cache))
    loaded.save(second)
    assert first.read_bytes() == second.read_bytes()
    for ngram in ([1], [2, 3], [4, 5, 6], [7, 8, 9, 10]):
        assert loaded.counts(ngram) == cache.counts(ngram)


def write_cache_file(path: Path, entries: dict, vocab_field: int) -> None:
    """An n = 1..2 cache file written from the layout in ngram_cache.cpp; vocab_field 0 is
    what the first layout wrote in that (then reserved) field."""
    def fnv(data: bytes, h: int) -> int:
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return h

    payload = b"".join(struct.pack(f"<I{len(k)}iI", len(k), *k, len(entries[k])) +
                       b"".join(struct.pack("<iI", *tc) for tc in sorted(entries[k].items()))
                       for k in sorted(entries, key=lambda k: list(k) + [-1] * (4 - len(k))))
    header = b"PYACNGC\0" + struct.pack("<IIIIQQ", 1, 1, 2, vocab_field, len(entries), len(payload))
    path.write_bytes(header + struct.pack("<Q", fnv(payload, fnv(header, 0xCBF29CE484222325))) + payload)


def test_cache_vocab_is_saved_in_the_header_and_old_files_load_with_0(tmp_path: Path):
    cache = _core.NgramCache(1, 2)
    assert cache.vocab == 0  # unknown until set
    cache.update([1, 2, 3, 1, 2, 4])
    cache.vocab = 0xDEADBEEF
    cache.save(tmp_path / "v.ngc")
    loaded = _core.NgramCache.load(tmp_path / "v.ngc")
    assert loaded.vocab == 0xDEADBEEF and loaded.counts([1, 2]) == {3: 1, 4: 1}
    entries = {(1,): {2: 2}, (2,): {3: 1, 4: 1}, (3,): {1: 1}, (1, 2): {3: 1, 4: 1}, (2, 3): {1: 1}, (3, 1): {2: 1}}
    write_cache_file(tmp_path / "w.ngc", entries, 0xDEADBEEF)
    assert (tmp_path / "w.ngc").read_bytes() == (tmp_path / "v.ngc").read_bytes()
    write_cache_file(tmp_path / "old.ngc", entries, 0)
    old = _core.NgramCache.load(tmp_path / "old.ngc")
    assert (old.vocab, len(old), old.counts([1, 2])) == (0, 6, {3: 1, 4: 1})
    with pytest.raises(TypeError):
        cache.vocab = -1


def test_cache_merge_vocab_rule():
    a, b, other = _core.NgramCache(1, 2), _core.NgramCache(1, 2), _core.NgramCache(1, 2)
    b.update([1, 2, 1, 2])
    b.vocab, other.vocab = 7, 8
    a.merge(b)  # a 0 side adopts the other's
    a.merge(_core.NgramCache(1, 2))  # and a 0 other leaves it
    assert a.vocab == 7 and a.counts([1]) == {2: 2}
    other.update([1, 3])
    with pytest.raises(ValueError, match="different tokenizers"):
        a.merge(other)
    assert a.vocab == 7 and a.counts([1]) == {2: 2}, "a refused merge changes nothing"


def test_cache_file_damage_is_a_value_error_naming_the_file(tmp_path: Path):
    cache = _core.NgramCache(1, 2)
    cache.update([1, 2, 3, 1, 2, 4])
    path = tmp_path / "c.ngc"
    cache.save(path)
    data = path.read_bytes()
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"c\.ngc.*rebuild"):
            _core.NgramCache.load(path)
    for at in range(len(data)):  # any single flipped byte, header or payload
        damaged = bytearray(data)
        damaged[at] ^= 0x40
        path.write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match=r"c\.ngc.*rebuild"):
            _core.NgramCache.load(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(ValueError, match="corrupted"):
        _core.NgramCache.load(path)
    with pytest.raises(ValueError, match="cannot open"):
        _core.NgramCache.load(tmp_path / "missing.ngc")


def test_cache_rejects_caller_mistakes():
    cache = _core.NgramCache(1, 2)
    for start in (3, -1):
        with pytest.raises(ValueError, match="start"):
            cache.update([1, 2], start=start)
    with pytest.raises(ValueError, match="n range"):
        cache.merge(_core.NgramCache(1, 3))
    with pytest.raises(ValueError, match="counts n in 1..2"):
        cache.counts([1, 2, 3])
    with pytest.raises(ValueError, match="n_max"):
        _core.NgramCache(1, 5)


# ---- ngram_cache_draft -------------------------------------------------------------------


def test_draft_continues_a_repeated_pattern():
    context = [5, 6, 7, 8] * 3 + [5, 6]
    ctx = _core.NgramCache()
    ctx.update(context)
    draft = _core.ngram_cache_draft(context, ctx, _core.NgramCache(), None, 5)
    assert draft.dtype == np.int32 and draft.tolist() == [7, 8, 5, 6, 7]
    assert _core.ngram_cache_draft(context, ctx, _core.NgramCache(), None, 0).tolist() == []


def test_draft_thresholds_gate_and_dynamic_cache_fills_in():
    context = [1, 2, 3]
    ctx = _core.NgramCache()
    ctx.update(context)  # "2" was followed by "3" once: below 2 samples for n = 1
    empty = _core.NgramCache()
    assert _core.ngram_cache_draft([9, 2], ctx, empty, None, 3).tolist() == []
    lax = _core.NgramDraftThresholds(context_min_samples=[1, 1, 1, 1])
    assert _core.ngram_cache_draft([9, 2], ctx, empty, None, 1, lax).tolist() == [3]
    dyn = _core.NgramCache()
    dyn.update([2, 4] * 4)  # the dynamic cache saw "2 -> 4" four times
    assert _core.ngram_cache_draft([9, 2], ctx, dyn, None, 1).tolist() == [4]


def test_static_cache_votes_and_drafts_alone():
    context = [1, 2, 3, 1, 2, 3, 1, 2, 4, 1, 2]  # "1 2" -> 3 twice, 4 once
    ctx = _core.NgramCache()
    ctx.update(context)
    empty = _core.NgramCache()
    assert _core.ngram_cache_draft(context, ctx, empty, None, 1).tolist() == [3]
    static = _core.NgramCache(2, 2)
    static.update([1, 2, 4] * 3)  # the corpus says "1 2" -> 4
    assert _core.ngram_cache_draft(context, ctx, empty, static, 1).tolist() == [4]
    assert _core.ngram_cache_draft([1, 2], empty, empty, static, 2).tolist() == [4, 1]
    with pytest.raises(ValueError, match="static_n"):
        _core.ngram_cache_draft(context, ctx, empty, _core.NgramCache(3, 3), 1)


def test_thresholds_validate_and_default():
    th = _core.NgramDraftThresholds()
    assert {k: getattr(th, k) for k in DEFAULTS} == DEFAULTS
    with pytest.raises(ValueError, match="percent"):
        th.context_min_percent = [50, 50, 50, 101]
    assert th.context_min_percent == [66, 50, 50, 50]  # unchanged after a rejected set
    with pytest.raises(ValueError, match="static_weight"):
        _core.NgramDraftThresholds(static_weight=0)


thresholds_strategy = st.fixed_dictionaries({
    "context_min_samples": st.lists(st.integers(0, 3), min_size=4, max_size=4),
    "context_min_percent": st.lists(st.integers(0, 100), min_size=4, max_size=4),
    "dynamic_min_samples": st.lists(st.integers(0, 3), min_size=4, max_size=4),
    "dynamic_min_percent": st.lists(st.integers(0, 100), min_size=4, max_size=4),
    "static_n": st.integers(1, 3),
    "static_min_samples": st.integers(0, 3),
    "static_min_percent": st.integers(0, 100),
    "static_weight": st.integers(1, 200),
})


@SETTINGS
@given(context=st.lists(st.integers(0, 3), max_size=30), history=st.lists(st.integers(0, 3), max_size=30),
       corpus=st.one_of(st.none(), st.lists(st.integers(0, 3), max_size=40)),
       ranges=st.tuples(st.integers(1, 4), st.integers(1, 4)), n_draft=st.integers(0, 6),
       th=st.one_of(st.just(DEFAULTS), thresholds_strategy))
def test_draft_matches_reference(context, history, corpus, ranges, n_draft, th):
    lo, hi = min(ranges), max(ranges)
    ctx, dyn = _core.NgramCache(lo, hi), _core.NgramCache(1, 4)
    ctx.update(context)
    dyn.update(history)
    static, static_ref = None, None
    if corpus is not None:
        static = _core.NgramCache(th["static_n"], th["static_n"])
        static.update(corpus)
        static_ref = (ref_cache(corpus, th["static_n"], th["static_n"]), th["static_n"])
    caches = [
        (ref_cache(context, lo, hi), lo, hi, th["context_min_samples"], th["context_min_percent"]),
        (ref_cache(history, 1, 4), 1, 4, th["dynamic_min_samples"], th["dynamic_min_percent"]),
    ]
    got = _core.ngram_cache_draft(context, ctx, dyn, static, n_draft, _core.NgramDraftThresholds(**th))
    assert got.tolist() == ref_draft(context, caches, static_ref, n_draft, th)


@SETTINGS
@given(stream=st.lists(st.integers(0, 3), min_size=2, max_size=60), max_len=st.integers(1, 8),
       max_candidates=st.integers(1, 6), context_cap=st.integers(0, 12), n_buckets=st.integers(1, 20))
def test_lookup_chain_matches_the_tree(stream, max_len, max_candidates, context_cap, n_buckets):
    index = _core.NgramIndex(1, 3)
    index.append(stream)
    tree = index.lookup(1, 3, max_len, max_candidates, context_cap)
    tokens, parents, chain, buckets, positions, ends = _core.lookup_chain(tree, n_buckets)
    par = tree.parents.tolist()
    n = 0
    while n < len(par) and par[n] == n - 1:
        n += 1
    assert tokens.tolist() == tree.tokens.tolist() and parents.tolist() == par
    assert chain == tree.tokens[:n].tolist()
    assert buckets == [ref_bucket(int(tree.contexts[i]) + i, n_buckets) for i in range(n)]

    def depth(i: int) -> int:
        return 1 if par[i] < 0 else 1 + depth(par[i])

    assert positions.dtype == np.int64
    assert positions.tolist() == [int(tree.sources[i]) + depth(i) for i in range(len(par))]
    # a node copies the stream token at its position
    assert all(stream[p] == t for p, t in zip(positions.tolist(), tree.tokens.tolist()))
    if n == 0:
        assert ends is None
    else:
        assert ends == (tree.sources[0], tree.sources[n - 1], tree.contexts[0], tree.contexts[n - 1])
