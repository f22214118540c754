"""The n-gram oracle: the most any n-gram (copy) drafter can speed up a given greedy output.

It replays the plain greedy output y of prompt x. At the step whose root is y[i] an oracle
that knows the future could draft up to a[i] tokens that are right: the longest run of
y[i+1:] that follows an earlier occurrence (in x + y[:i+1]) of a suffix n-gram. It then
chooses every step's draft length to minimise the measured verification cost of the whole
output, so its speedup bounds every n-gram drafter on this machine's cost curve.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

import numpy as np

# One relative cost curve, or a function of the context depth giving the curve there.
Costs = Union[Sequence[float], Callable[[int], Sequence[float]]]

# Longest copy the oracle considers (the lookup drafts at most this deep as well).
ORACLE_MAX_COPY = 64


def accept_lengths(prompt: Sequence[int], output: Sequence[int], cap: int = ORACLE_MAX_COPY) -> np.ndarray:
    """a[i], i = 0..len(output)-2: how many tokens after output[i] a perfect n-gram drafter gets right.

    Every occurrence of a longer suffix n-gram is also an occurrence of the 1-gram ending
    it, so the best over n = 1..4 is the best over the earlier positions j holding the
    root token itself. Copies come only from tokens known at that step (j + 1 + k <= root).
    """
    s = np.asarray(list(prompt) + list(output), dtype=np.int64)
    p, n = len(prompt), len(output)
    a = np.zeros(max(n - 1, 0), dtype=np.int64)
    for i in range(n - 1):
        root = p + i
        alive = np.flatnonzero(s[:root] == s[root])
        limit = min(cap, n - 1 - i)
        length = 0
        while alive.size and length < limit:
            nxt = alive + 1 + length
            alive = alive[nxt <= root]
            alive = alive[s[alive + 1 + length] == s[root + 1 + length]]
            if alive.size:
                length += 1
        a[i] = length
    return a


def oracle_cost(accept: Sequence[int], relative_costs: Sequence[float] | Sequence[Sequence[float]]) -> float:
    """Least total cost to commit len(accept) decode-phase tokens.

    From root i a step verifies L <= accept[i] drafted tokens, costs t[L] (one decode of
    L + 1 tokens) and commits L + 1 tokens. t is `relative_costs`, or its row i where it
    holds one curve per root (the curve of that root's context depth). Dynamic programming
    from the end.
    """
    t = np.asarray(relative_costs, dtype=np.float64)
    if t.size == 0:
        raise ValueError("the cost curve is empty: measure it with pyaccel.costs.decode_costs")
    n = len(accept)
    rows = t if t.ndim == 2 else np.broadcast_to(t, (n, t.size))
    if len(rows) < n:
        raise ValueError(f"need one cost curve per root: got {len(rows)} for {n} roots")
    cost = np.full(n + 1, np.inf)
    cost[n] = 0.0
    for i in range(n - 1, -1, -1):
        longest = min(int(accept[i]), n - 1 - i, rows.shape[1] - 1)
        cost[i] = float(np.min(rows[i, : longest + 1] + cost[i + 1 : i + longest + 2]))
    return float(cost[0])


def oracle_speedup(prompt: Sequence[int], output: Sequence[int], relative_costs: Costs) -> float:
    """(decode-phase tokens) / least cost, costs relative to one token's (1.0 when there is
    nothing to decode). `relative_costs`: one curve, or depth -> the curve at that depth."""
    accept = accept_lengths(prompt, output)
    if len(accept) == 0:
        return 1.0
    if callable(relative_costs):
        rows = [relative_costs(len(prompt) + i + 1) for i in range(len(accept))]
        return len(accept) / oracle_cost(accept, [[c / r[0] for c in r] for r in rows])
    return len(accept) * float(relative_costs[0]) / oracle_cost(accept, relative_costs)
