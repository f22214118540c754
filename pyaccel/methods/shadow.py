"""Shadow drafting: learn per-position acceptance from drafts nobody had to verify.

An n-gram proposer can draft at full depth for free every step. It remembers that
"shadow" draft and, as the real tokens arrive, scores it the way greedy verification
would have: position i counts only while positions < i were right. So every draft
position gets evidence (not only the ones actually verified), and a copy-heavy stretch is
noticed while nothing is being drafted, without paying for probes. Under greedy decoding
a shadow's outcome is exactly what verification would have accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


class PositionObserver(Protocol):
    """What a shadow reports to; `_core.AcceptanceStats` is one."""

    def observe_position(self, position: int, accepted: bool) -> None: ...


@dataclass
class _Shadow:
    start: int  # index in the token history of the first drafted token
    tokens: list[int]
    stats: PositionObserver
    checked: int = 0  # positions already scored


class ShadowScorer:
    """Shadow drafts waiting for their real tokens, each scored into its own tracker."""

    def __init__(self) -> None:
        self._waiting: list[_Shadow] = []

    def add(self, start: int, tokens: Sequence[int], stats: PositionObserver) -> None:
        """A draft of `tokens` for history positions start, start + 1, ...; scored into `stats`."""
        if len(tokens):
            self._waiting.append(_Shadow(start, [int(t) for t in tokens], stats))

    def settle(self, history: Sequence[int]) -> None:
        """Score every position whose real token is now in `history` (the whole stream)."""
        waiting = []
        for sh in self._waiting:
            known = min(len(history) - sh.start, len(sh.tokens))
            alive = True
            while sh.checked < known:
                ok = history[sh.start + sh.checked] == sh.tokens[sh.checked]
                sh.stats.observe_position(sh.checked, ok)
                sh.checked += 1
                if not ok:
                    alive = False
                    break
            if alive and sh.checked < len(sh.tokens):
                waiting.append(sh)
        self._waiting = waiting

    def clear(self) -> None:
        self._waiting = []

    def __len__(self) -> int:
        return len(self._waiting)
