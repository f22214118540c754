"""Stop strings over a stream of text pieces."""

from __future__ import annotations

from typing import Sequence


class StopMatcher:
    """Releases text as it streams in, holding back only what could still start a stop string.

    `push(piece)` returns the text that is safe to emit; `stopped` turns true at the first
    stop string to complete, and the stop string itself and everything after it are never
    released. "First" is the earliest end (where generation would stop), the longest stop
    among those ending there: the same cut however the text is split into pieces.
    """

    def __init__(self, stops: Sequence[str] = ()) -> None:
        self._stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False

    def _holdback(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for k in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:k]):
                    best = k
                    break
        return best

    def push(self, piece: str) -> str:
        if self.stopped:
            return ""
        text = self._held + piece
        found = [(i + len(s), i) for i, s in ((text.find(s), s) for s in self._stops) if i >= 0]
        if found:  # the held text holds no whole stop, so each found one ends in `piece`
            self.stopped = True
            self._held = ""
            return text[: min(found)[1]]
        keep = self._holdback(text)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        out, self._held = ("" if self.stopped else self._held), ""
        return out
