"""The n-gram oracle: the most any n-gram (copy) drafter can speed up a given greedy output.

It replays the plain greedy output y of prompt x. At the step whose root is y[i] an oracle
that knows the future could draft up to a[i] tokens that are right: the longest run of
y[i+1:] that follows an earlier occurrence (in x + y[:i+1]) of a suffix n-gram. It then
chooses every step's draft length to minimise the measured verification cost of the whole
output, so its speedup bounds every n-gram drafter on this machine's cost curve.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

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


def oracle_cost(accept: Sequence[int], relative_costs: Sequence[float]) -> float:
    """Least total cost to commit len(accept) decode-phase tokens.

    From root i a step verifies L <= accept[i] drafted tokens, costs relative_costs[L]
    (one decode of L + 1 tokens) and commits L + 1 tokens. Dynamic programming from the end.
    """
    t = np.asarray(relative_costs, dtype=np.float64)
    if t.size == 0:
        raise ValueError("the cost curve is empty: measure it with pyaccel.costs.decode_costs")
    n = len(accept)
    cost = np.full(n + 1, np.inf)
    cost[n] = 0.0
    for i in range(n - 1, -1, -1):
        longest = min(int(accept[i]), n - 1 - i, t.size - 1)
        cost[i] = float(np.min(t[: longest + 1] + cost[i + 1 : i + longest + 2]))
    return float(cost[0])


def oracle_speedup(prompt: Sequence[int], output: Sequence[int], relative_costs: Sequence[float]) -> float:
    """(decode-phase tokens) * t[1] / least cost; 1.0 when there is nothing to decode."""
    accept = accept_lengths(prompt, output)
    if len(accept) == 0:
        return 1.0
    return len(accept) * float(relative_costs[0]) / oracle_cost(accept, relative_costs)
