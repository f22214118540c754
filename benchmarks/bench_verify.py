"""Micro-benchmark of pyaccel._core.verify_tree at Qwen2.5 vocabulary size.

Not a pytest module. Run:  python benchmarks/bench_verify.py [--runs 50]

Budget (issue): verification of a 64-node tree over V = 151,936 must stay well
under 5% of a Qwen2.5-0.5B forward (~20 ms), i.e. < ~1 ms for greedy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pyaccel import _core

N_VOCAB = 151_936
N_NODES = 64


def chain_parents(n: int) -> np.ndarray:
    return np.arange(-1, n - 1, dtype=np.int32)


def wide_tree_parents(n: int, width: int = 4) -> np.ndarray:
    # Complete `width`-ary tree in breadth-first order: 4 + 16 + 44 nodes.
    return np.array([-1 if i < width else (i - width) // width for i in range(n)], dtype=np.int32)


def accepted_tokens(logits: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Tokens that make greedy accept the lowest-index root-to-leaf path entirely."""
    tokens = np.asarray(np.argmax(logits[1:], axis=1), dtype=np.int32)  # junk for off-path nodes
    node = -1
    for i, p in enumerate(parents):
        if p == node:  # first child of the current path node
            tokens[i] = int(np.argmax(logits[node + 1]))
            node = i
    return tokens


def median_ms(fn, runs: int) -> float:
    fn()  # warm-up: page in the logits, size the scratch
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def peaked(logits: np.ndarray) -> np.ndarray:
    """Every row puts ~all mass on its argmax, so that sampling accepts the
    drafted path of accepted_tokens() as greedy does."""
    out = logits.copy()
    out[np.arange(out.shape[0]), np.argmax(out, axis=1)] += 30.0
    return out


def cases(gen, logits, parents, rng):
    greedy = _core.SamplingParams()
    hot = _core.SamplingParams(temperature=1.0)
    llama_defaults = _core.SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)
    random_tokens = gen.integers(0, N_VOCAB, N_NODES, dtype=np.int32)
    full_path = accepted_tokens(logits, parents)
    # q: the draft's distribution, here the target's own logits plus noise.
    draft = logits + gen.standard_normal(logits.shape, dtype=np.float32)
    q = np.stack([_core.probs(row, hot) for row in draft])
    q_tokens = np.array([_core.sample_probs(row, rng) for row in q[:-1]], dtype=np.int32)
    return (
        ("greedy, random draft", greedy, logits, random_tokens, None),
        ("greedy, longest path accepted", greedy, logits, full_path, None),
        ("temp 1.0, random draft", hot, logits, random_tokens, None),
        ("temp 1.0, longest path accepted", hot, peaked(logits), full_path, None),
        ("temp 1.0, draft_probs q", hot, logits, q_tokens, q),
        ("temp 0.8 top_k 40 top_p 0.95 min_p 0.05", llama_defaults, logits, random_tokens, None),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    gen = np.random.default_rng(0)
    logits = gen.standard_normal((N_NODES + 1, N_VOCAB), dtype=np.float32) * 3.0
    rng = _core.Rng(0)
    print(f"verify_tree, {N_NODES} nodes, V = {N_VOCAB}, median of {args.runs} runs (ms)")
    for shape, parents in (("chain", chain_parents(N_NODES)), ("tree", wide_tree_parents(N_NODES))):
        for name, params, rows, tokens, q in cases(gen, logits, parents, rng):
            result = _core.verify_tree(rows, tokens, parents, params, rng, q)
            ms = median_ms(lambda: _core.verify_tree(rows, tokens, parents, params, rng, q), args.runs)
            print(f"  {shape:5s}  {name:42s} {ms:8.3f}   (accepted {len(result.accepted)})")
    row = logits[0]
    hot = _core.SamplingParams(temperature=1.0)
    for name, fn in (
        ("argmax(row)", lambda: _core.argmax(row)),
        ("probs(row, temperature 1)", lambda: _core.probs(row, hot)),
        ("sample(row, temperature 1)", lambda: _core.sample(row, hot, rng)),
    ):
        print(f"  single row  {name:42s} {median_ms(fn, args.runs):8.3f}")


if __name__ == "__main__":
    main()
