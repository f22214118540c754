"""Lookahead's state (csrc/lookahead.h) and its Python planning, against plain-Python
references of the algorithm on scripted tokens: no model needed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pyaccel import CostModel, Lookahead, _core
from pyaccel.methods.lookahead.candidates import matched_depth, merge_candidates, path_probs
from pyaccel.methods.lookahead.sizing import LookaheadTuning, WindowSize, plan_window


class RefPool:
    """The pool as the algorithm states it: per first token at most g n-grams; adding a
    held one or confirming it makes it the most recent; a full key drops its oldest."""

    def __init__(self, n: int, g: int) -> None:
        self.n, self.g, self.clock = n, g, 0
        self.keys: dict[int, list[list]] = {}

    def add(self, gram: list[int]) -> bool:
        self.clock += 1
        held = self.keys.setdefault(gram[0], [])
        for entry in held:
            if entry[0] == gram[1:]:
                entry[1] = self.clock
                return False
        if len(held) < self.g:
            held.append([gram[1:], self.clock])
        else:
            held[min(range(len(held)), key=lambda k: held[k][1])] = [gram[1:], self.clock]
        return True

    def refresh(self, key: int, prefix: list[int]) -> None:
        self.clock += 1
        m = min(len(prefix), self.n - 1)
        for entry in self.keys.get(key, []):
            if entry[0][:m] == prefix[:m]:
                entry[1] = self.clock

    def continuations(self, key: int, limit: int) -> list[list[int]]:
        return [e[0] for e in sorted(self.keys.get(key, []), key=lambda e: -e[1])][:limit]


class RefWindow:
    def __init__(self, w: int, n: int) -> None:
        self.w, self.n = w, n
        self.cells = [[0] * w for _ in range(n - 1)]

    def reset(self, fill: list[int]) -> None:
        k = 0
        for lvl in range(self.n - 1):
            for i in range(self.w):
                if (lvl, i) != (0, 0):
                    self.cells[lvl][i] = fill[k % len(fill)]
                    k += 1

    def advance(self, nxt: list[int], committed: int, fill: list[int], pool: RefPool) -> None:
        for f in range(self.w):
            pool.add([self.cells[lvl][f] for lvl in range(self.n - 1)] + [nxt[f]])
        self.cells = self.cells[1:] + [list(nxt)]
        shift, k = committed - 1, 0
        for lvl in range(self.n - 1):
            old = list(self.cells[lvl])
            for i in range(self.w):
                if i + shift < self.w:
                    self.cells[lvl][i] = old[i + shift]
                else:
                    self.cells[lvl][i] = fill[k % len(fill)]
                    k += 1


def _same_pool(pool: "_core.NgramPool", ref: RefPool, vocab: int) -> None:
    for key in range(vocab):
        assert pool.continuations(key, 99) == ref.continuations(key, 99), key
    assert len(pool) == sum(len(v) for v in ref.keys.values())


@pytest.mark.parametrize("seed", range(6))
def test_window_and_pool_follow_the_reference(seed: int) -> None:
    rnd = random.Random(seed)
    w, n, g, vocab = rnd.randint(1, 6), rnd.randint(3, 6), rnd.randint(1, 3), 7  # small vocab: collisions
    prompt = [rnd.randrange(vocab) for _ in range(30)]
    window, ref = _core.JacobiWindow(w, n), RefWindow(w, n)
    pool, ref_pool = _core.NgramPool(n, g), RefPool(n, g)
    pool.add_stream(prompt)  # seeded from the prompt, in stream order
    for i in range(len(prompt) - n + 1):
        ref_pool.add(prompt[i:i + n])
    fill = [prompt[rnd.randrange(len(prompt))] for _ in range(w * n)]  # initialised from the prompt
    window.reset(fill)
    ref.reset(fill)
    for _ in range(40):
        root = rnd.randrange(vocab)
        window.set_root(root)
        ref.cells[0][0] = root
        assert window.cells() == ref.cells
        nxt = [rnd.randrange(vocab) for _ in range(w)]
        committed = rnd.choice([1, 1, 2, 3, w + 2])
        fill = [rnd.randrange(vocab) for _ in range(w * n)]
        window.advance(nxt, committed, fill, pool)
        ref.advance(nxt, committed, fill, ref_pool)
        if rnd.random() < 0.3:
            key, prefix = rnd.randrange(vocab), [rnd.randrange(vocab) for _ in range(rnd.randint(1, n))]
            pool.refresh(key, prefix)
            ref_pool.refresh(key, prefix)
        assert window.cells()[1:] == ref.cells[1:] and window.cells()[0][1:] == ref.cells[0][1:]
        _same_pool(pool, ref_pool, vocab)


def test_pool_drops_the_least_recently_useful() -> None:
    pool = _core.NgramPool(3, 2)
    assert pool.add([1, 2, 3]) and pool.add([1, 4, 5])
    pool.refresh(1, [2])  # [2, 3] was just confirmed: [4, 5] is now the oldest
    assert pool.add([1, 6, 7])
    assert pool.continuations(1, 5) == [[6, 7], [2, 3]]
    assert not pool.add([1, 2, 3]) and pool.continuations(1, 1) == [[2, 3]]


def _visible(offsets: np.ndarray, seqs: list[list[int]]) -> list[set[int]]:
    """What each auxiliary token attends to under llama.cpp's rule: a cell of a shared
    sequence at a position <= its own (-1 stands for the root, in every sequence)."""
    out = []
    for k in range(len(offsets)):
        seen = {-1}
        for j in range(len(offsets)):
            if set(seqs[j]) & set(seqs[k]) and offsets[j] <= offsets[k]:
                seen.add(j)
        out.append(seen)
    return out


@pytest.mark.parametrize("w,n", [(1, 3), (4, 4), (7, 5), (3, 6)])
def test_layout_is_the_lookahead_mask(w: int, n: int) -> None:
    """Cell (l, i) sees the root, the level-0 cells of columns 1..i and its own column's
    cells of levels 1..l: the paper's attention pattern."""
    window = _core.JacobiWindow(w, n)
    cells = [(0, i) for i in range(1, w)] + [(lvl, i) for lvl in range(1, n - 1) for i in range(w)]
    index = {c: k for k, c in enumerate(cells)}
    offsets, seqs = window.offsets(), window.seqs()
    assert len(cells) == window.n_tokens == len(window.tokens())
    assert [int(o) for o in offsets] == [lvl + i for lvl, i in cells]
    for k, seen in enumerate(_visible(offsets, seqs)):
        lvl, i = cells[k]
        want = {-1} | {index[(0, j)] for j in range(1, i + 1)} | {index[(m, i)] for m in range(1, lvl + 1)}
        assert seen == want, (lvl, i)
    assert [cells[r] for r in window.output_rows()] == [(n - 2, i) for i in range(w)]


def test_bad_window_arguments_are_clear() -> None:
    with pytest.raises(ValueError, match="must be in \\[3, 64\\]"):
        _core.JacobiWindow(4, 2)
    with pytest.raises(ValueError, match="fill is empty"):
        _core.JacobiWindow(4, 4).reset([])
    with pytest.raises(ValueError, match="window width is 4"):
        _core.JacobiWindow(4, 4).advance([1, 2], 1, [1], None)
    with pytest.raises(ValueError, match="3-grams"):
        _core.NgramPool(3, 2).add([1, 2])
    with pytest.raises(ValueError, match="guesses"):
        Lookahead(guesses=0)
    with pytest.raises(ValueError, match="init"):
        Lookahead(init="noise")


def test_candidates_merge_into_a_prefix_tree() -> None:
    tree = merge_candidates([[5, 6, 7], [5, 6, 8], [9, 1], [5, 6, 7]], max_leaves=8)
    assert tree.tokens.tolist() == [5, 6, 7, 8, 9, 1]
    assert tree.parents.tolist() == [-1, 0, 1, 1, -1, 4]
    assert tree.support.tolist() == [3, 3, 2, 1, 1, 1]
    assert tree.n_leaves == 3
    assert merge_candidates([[5, 6, 7], [5, 6, 8], [9, 1]], max_leaves=1).tokens.tolist() == [5, 6, 7]
    assert matched_depth(tree, [5, 6, 8, 2]) == 3 and matched_depth(tree, [4]) == 0
    p = path_probs(tree, [0.5, 0.5, 0.5])
    # depth 1 shares 0.5 by support 3 : 1; deeper nodes multiply the parent's.
    assert np.allclose(p, [0.375, 0.1875, 0.0625, 0.03125, 0.125, 0.0625])


def test_window_sizing_follows_the_curve() -> None:
    tuning = LookaheadTuning(tau={(7, 5, 7): 1.7, (4, 4, 4): 1.4, (15, 5, 15): 2.2})
    cpu = CostModel.fixed([1.0 + 0.27 * b for b in range(128)])  # ~0.27 of a token per extra token
    assert plan_window(cpu, 0, tuning, max_seqs=32, max_tokens=512) is None
    flat = CostModel.fixed([1.0 + 0.002 * b for b in range(128)])
    plan = plan_window(flat, 0, tuning, max_seqs=32, max_tokens=512)
    assert plan is not None and plan.size == WindowSize(15, 5, 15) and plan.expected_speedup > 1.7
    # Too few sequences for W + G, or a pass over the batch: the next best size.
    assert plan_window(flat, 0, tuning, max_seqs=16, max_tokens=512).size == WindowSize(7, 5, 7)
    assert plan_window(flat, 0, tuning, max_seqs=32, max_tokens=40).size == WindowSize(4, 4, 4)
    # A user's limits bound the sizes the plan chooses among.
    method = Lookahead(window=8, tuning=tuning)
    method._n_seq_max, method._max_batch = 32, 512
    assert method.plan(flat, 0).size == WindowSize(7, 5, 7)
