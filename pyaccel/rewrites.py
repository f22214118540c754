"""Copying through systematic edits: learnt rewrites for prompt lookup.

An edit such as "rename `h` to `heap`" makes the output copy its source except at every
occurrence of the old name. A plain n-gram copy breaks at each of them: the draft ends,
and after the new name the context agreement starts again from one token, so drafts stay
short for several steps. `CopyFollower` keeps the copy's alignment instead:

- an anchor: a source position aligned with the end of the output, found by an n-gram
  match that agreed over >= `resync` tokens and then followed token by token;
- where the output leaves the source, a search for where it comes back: the nearest
  point (<= max_span tokens skipped on either side) after which `resync` tokens agree
  again. The skipped source span A and output span B are learnt as an edit A -> B;
- drafts that continue the source with every learnt edit applied, with the agreement
  counted through the edits.

Without learnt edits it drafts nothing (the n-gram index drafts the same copy), so it
only acts once an edit has been seen. An edit the output contradicts is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MAX_SPAN = 4  # longest source or output span of a learnt edit, in tokens
RESYNC = 3  # agreeing tokens that re-establish the alignment after an edit
MAX_REWRITES = 64
# An edit drafts only once it has been seen this often: a chance re-alignment in prose
# looks like an edit once, a rename recurs.
MIN_SEEN = 2


@dataclass(frozen=True)
class Followed:
    """A draft continuing the anchored copy and the agreement (tokens) behind it."""

    tokens: list[int]
    agreement: int


@dataclass
class _Anchor:
    source: int  # stream index of the source token aligned with `out`
    out: int  # stream index of an output token
    agreement: int  # tokens agreeing up to and including these


class CopyFollower:
    """Anchor + learnt rewrites over one token stream (prompt + output so far)."""

    def __init__(self, max_span: int = MAX_SPAN, resync: int = RESYNC) -> None:
        self.max_span, self.resync = max_span, resync
        self.rewrites: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.seen: dict[tuple[int, ...], int] = {}
        self._anchor: _Anchor | None = None
        self._broke: _Anchor | None = None  # first unmatched source / output index, run before
        self._pending: list[int] = []  # the rest of an edit's output span already begun

    def _rewrite_at(self, stream: Sequence[int], i: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The learnt edit whose source span starts at stream[i], if any (the longest)."""
        if not self.rewrites or i >= len(stream):
            return None
        first = stream[i]
        best = None
        for a, b in self.rewrites.items():
            if a[0] == first and tuple(stream[i:i + len(a)]) == a and (best is None or len(a) > len(best[0])):
                best = (a, b)
        return best

    # ---- following the output -------------------------------------------------------------

    def _walk(self, stream: Sequence[int]) -> None:
        """Advance the anchor over the output tokens since it; note where the output leaves."""
        a = self._anchor
        assert a is not None
        n = len(stream)
        i, j, run = a.source + 1, a.out + 1, a.agreement
        pending = self._pending
        while j < n:
            if pending:
                if stream[j] != pending[0]:
                    break
                pending, j, run = pending[1:], j + 1, run + 1
                continue
            hit = self._rewrite_at(stream, i) if i < j else None
            if hit is not None:
                src, out = hit
                if list(stream[j:j + len(out)]) == list(out[:n - j]):
                    i, pending = i + len(src), list(out)
                    self.seen[src] = self.seen.get(src, 0) + 1  # the edit recurred
                    continue
                del self.rewrites[src]  # the output did not make this edit here
                self.seen.pop(src, None)
            if i < j and stream[i] == stream[j]:
                i, j, run = i + 1, j + 1, run + 1
                continue
            break
        if j < n:  # the output left the source at j
            self._broke, self._anchor, self._pending = _Anchor(i, j, run), None, []
        else:
            self._anchor, self._pending = _Anchor(i - 1, n - 1, run), pending

    def _resync(self, stream: Sequence[int]) -> None:
        """After a break: find where the copy resumes, learn the edit, re-anchor there."""
        b = self._broke
        assert b is not None
        n, r = len(stream), self.resync
        for gap in range(1, 2 * self.max_span + 1):
            for g_src in range(max(0, gap - self.max_span), min(gap, self.max_span) + 1):
                i, j = b.source + g_src, b.out + gap - g_src
                if j + r > n or i + r > j:
                    continue
                if list(stream[i:i + r]) != list(stream[j:j + r]):
                    continue
                src = tuple(int(t) for t in stream[b.source:i])
                out = tuple(int(t) for t in stream[b.out:j])
                if src and (len(self.rewrites) < MAX_REWRITES or src in self.rewrites):
                    same = self.rewrites.get(src) == out
                    self.rewrites[src] = out
                    self.seen[src] = self.seen.get(src, 0) + 1 if same else 1
                self._broke = None
                self._anchor, self._pending = _Anchor(i + r - 1, j + r - 1, b.agreement + r), []
                return
        if n - b.out > 2 * self.max_span + r:
            self._broke = None  # too far: not an edit of a copy

    def follow(self, stream: Sequence[int]) -> None:
        """Catch up with the stream (call once per step, before drafting)."""
        for _ in range(4):  # a walk may break, resync and walk on; a step holds few edits
            if self._anchor is not None:
                self._walk(stream)
            if self._broke is None:
                return
            self._resync(stream)
            if self._anchor is None:
                return

    def align(self, stream: Sequence[int], source_end: int, agreement: int) -> None:
        """An n-gram match: the stream's last `agreement` tokens equal those ending at
        `source_end`. It anchors the copy when nothing better does."""
        if agreement < self.resync or self._broke is not None:
            return
        if self._anchor is None or agreement > self._anchor.agreement:
            self._anchor, self._pending = _Anchor(source_end, len(stream) - 1, agreement), []

    # ---- drafting -------------------------------------------------------------------------

    def draft(self, stream: Sequence[int], limit: int) -> Followed | None:
        """The anchored source continued with every learnt edit applied; None without edits."""
        a = self._anchor
        if a is None or limit < 1 or a.out != len(stream) - 1 or max(self.seen.values(), default=0) < MIN_SEEN:
            return None
        out = list(self._pending[:limit])
        i = a.source + 1
        while len(out) < limit and i < len(stream):
            hit = self._rewrite_at(stream, i)
            if hit is not None and self.seen.get(hit[0], 0) >= MIN_SEEN:
                out += hit[1]
                i += len(hit[0])
            else:
                out.append(int(stream[i]))
                i += 1
        return Followed(out[:limit], a.agreement) if out else None
