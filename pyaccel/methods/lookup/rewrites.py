"""Following a copy through edits: learnt rewrites for prompt lookup.

An edit such as "rename `h` to `heap`" makes the output copy its source except at every
occurrence of the old name. A plain n-gram copy breaks at each change, and its context
agreement starts again from one token. `CopyFollower` keeps the copy's alignment instead:

- an anchor: a source position aligned with the end of the output, found by an n-gram
  match that agreed over >= RESYNC tokens and then followed token by token;
- where the output leaves the source, a search for where it comes back: the nearest
  point (<= MAX_SPAN tokens skipped on either side) after which RESYNC tokens agree
  is an edit, and the skipped source span A and output span B are learnt as A -> B. A
  copy that does not come back within an edit's span is let go (a new n-gram match
  anchors the next one);
- drafts that continue the source with every confirmed edit applied, with the agreement
  counted through them; while an edit is under way, drafts from the break where the
  output's last tokens equal the source's there (a copy about to resume);
- `relation`: whether a match continues a young copy (fewer than STRONG_RUN tokens taken
  from it) that began where a code block of the prompt begins, or not. Prompt lookup keeps
  acceptance apart for each.

An edit the output contradicts is dropped; one the caller names (`named_edit`: one the
instruction asks for) is trusted from its first sight. A copy that begins where a code
block of the prompt begins (`openings`) is an OPENING until it breaks or grows strong: an
answer rewriting the prompt's code often copies it from its first line, no chance repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

MAX_SPAN = 4  # longest source or output span of a learnt edit (tokens)
RESYNC = 3  # agreeing tokens that re-establish the alignment after an edit
MAX_REWRITES = 64  # learnt edits kept at most
# A copy the output has taken this many tokens from (through edits) is a real one (an
# edit's source), not a chance repeat: it is drafted from where it broke, and it is no
# longer an opening's.
STRONG_RUN = 16

FRESH, OPENING = 0, 1  # see `CopyFollower.relation`


@dataclass(frozen=True)
class Followed:
    """A draft continuing the followed copy and the agreement (tokens) behind it."""

    tokens: list[int]
    agreement: int
    relation: int  # OPENING or FRESH (see `CopyFollower.relation`)
    # The stream index each token copies; a learnt edit's first token: the index of the
    # source span it replaces; its other tokens (and the rest of an edit begun): -1.
    positions: list[int]


@dataclass
class _Anchor:
    source: int  # stream index of the source token aligned with `out`
    out: int  # stream index of an output token
    agreement: int  # tokens agreeing up to and including these
    copied: int  # tokens the output copied from it so far, through edits
    opened: bool = False  # it began where a code block of the prompt begins


@dataclass
class _Break:
    source: int  # first source index the output did not match
    out: int  # first output index that left the source
    agreement: int  # the run before the break
    copied: int


def _resumes_at(stream: Sequence[int], i: int, m: int) -> bool:
    """Do the stream's last m tokens equal stream[i:i + m], the two spans not overlapping?"""
    n = len(stream)
    return i + m <= n - m and list(stream[i:i + m]) == list(stream[n - m:])


class CopyFollower:
    """Anchor + learnt rewrites over one token stream (prompt + output so far)."""

    def __init__(self, min_seen: int = 2,
                 named_edit: Callable[[tuple[int, ...], tuple[int, ...]], bool] | None = None) -> None:
        """min_seen: an edit drafts only once it has been seen this often (a chance
        re-alignment looks like an edit once, a rename recurs). named_edit(source span,
        output span): is this edit one the caller expects (it is then trusted at once, as if
        seen min_seen times)?"""
        if min_seen < 1:
            raise ValueError(f"lookup min_seen must be >= 1, got {min_seen}")
        self.min_seen = min_seen
        self.named_edit = named_edit
        self.openings: frozenset[int] = frozenset()  # stream indices ending a code block's opening line
        self.rewrites: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.seen: dict[tuple[int, ...], int] = {}
        self._anchor: _Anchor | None = None
        self._broke: _Break | None = None  # where the output left the followed copy
        self._pending: list[int] = []  # the rest of an edit's output span already begun
        self._firsts: set[int] = set()  # first source tokens of the learnt edits
        self._length = 0  # of the stream at the last `follow`

    def _strong(self, copied: int) -> bool:
        return copied >= STRONG_RUN

    def _rewrite_at(self, stream: Sequence[int], i: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The learnt edit whose source span starts at stream[i], if any (the longest)."""
        if i >= len(stream) or stream[i] not in self._firsts:
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
                self._firsts = {a[0] for a in self.rewrites}
                self.seen.pop(src, None)
            if i < j and stream[i] == stream[j]:
                i, j, run = i + 1, j + 1, run + 1
                continue
            break
        copied = a.copied + run - a.agreement
        if j < n:  # the output left the source at j
            self._broke, self._anchor, self._pending = _Break(i, j, run, copied), None, []
        else:
            self._anchor, self._pending = _Anchor(i - 1, n - 1, run, copied, a.opened), pending

    def _resync(self, stream: Sequence[int]) -> None:
        """After a break: find where the copy resumes within MAX_SPAN tokens on both sides
        (an edit: it is learnt and the agreement carries on through it) and re-anchor
        there; once an edit could have shown itself and has not, let the copy go."""
        b = self._broke
        assert b is not None
        n, r = len(stream), RESYNC
        for gap in range(1, 2 * MAX_SPAN + 1):
            for g_src in range(max(0, gap - MAX_SPAN), min(gap, MAX_SPAN) + 1):
                i, j = b.source + g_src, b.out + gap - g_src
                if j + r > n or i + r > j or stream[i] != stream[j]:
                    continue
                if list(stream[i:i + r]) != list(stream[j:j + r]):
                    continue
                src = tuple(int(t) for t in stream[b.source:i])
                out = tuple(int(t) for t in stream[b.out:j])
                if src and (len(self.rewrites) < MAX_REWRITES or src in self.rewrites):
                    same = self.rewrites.get(src) == out
                    self.rewrites[src] = out
                    self._firsts.add(src[0])
                    self.seen[src] = self.seen.get(src, 0) + 1 if same else 1
                    if not same and self.named_edit is not None and self.named_edit(src, out):
                        self.seen[src] = max(self.seen[src], self.min_seen)
                # Through a confirmed edit the copy goes on; a first-seen one may be chance.
                carried = b.agreement if src and self.seen.get(src, 0) >= self.min_seen else 0
                self._resume(i + r - 1, j + r - 1, carried + r, b.copied + r)
                return
        if not self._in_edit(n, b):  # the tokens that would show an edit have come: none did
            self._broke = None

    def _resume(self, source: int, out: int, agreement: int, copied: int) -> None:
        self._broke = None
        self._anchor, self._pending = _Anchor(source, out, agreement, copied), []

    def follow(self, stream: Sequence[int]) -> None:
        """Catch up with the stream (call once per step, before drafting)."""
        self._length = len(stream)
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
        `source_end`. It anchors the copy when it agrees over more than what is followed.
        A copy broken so recently that it may yet resume through an edit (`_resync` has
        not seen the tokens it needs) is still the followed one, so a caller stepping one
        token at a time does not lose to a chance repeat of the edit's first new tokens
        the copy that a caller stepping over the edit keeps."""
        if agreement < RESYNC or self._broke is not None:
            return
        if self._anchor is None or agreement > self._anchor.agreement:
            self._broke = None
            self._anchor = _Anchor(source_end, len(stream) - 1, agreement, agreement,
                                   self._began_at_opening(source_end, agreement))
            self._pending = []

    def _began_at_opening(self, source_end: int, agreement: int) -> bool:
        """Did a match agreeing over `agreement` tokens up to `source_end` begin at one of
        `openings`: does its agreed span hold the end of a block's opening line and a token
        before it (the output opened the block as the prompt does, and a step that drafted
        the line's end and the block's first tokens leaves the match past the opening)?"""
        return any(source_end - agreement + 1 < o <= source_end for o in self.openings)

    def _in_edit(self, length: int, b: "_Break") -> bool:
        """Has the copy broken at `b` so recently that it may yet resume through an edit
        (`_resync` has not seen the tokens it needs), in a stream of `length` tokens?"""
        return length - b.out < MAX_SPAN + RESYNC

    def relation(self, source_end: int) -> int:
        """How a match ending at `source_end` stands to the followed copy (as of the last
        `follow`): OPENING when it continues a copy not yet strong that began at one of
        `openings`, FRESH otherwise."""
        a = self._anchor
        opening = a is not None and a.opened and not self._strong(a.copied) and source_end == a.source
        return OPENING if opening else FRESH

    # ---- drafting -------------------------------------------------------------------------

    def draft(self, stream: Sequence[int], limit: int) -> Followed | None:
        """The followed source continued with every learnt edit applied. While an edit is
        under way: the source's continuation from the break where the output's last 1 or 2
        tokens equal the source's there (a copy about to resume), with that agreement."""
        if limit < 1:
            return None
        a = self._anchor
        if a is not None and a.out == len(stream) - 1:
            pending = list(self._pending[:limit])
            return self._continue(stream, a.source + 1, pending, [-1] * len(pending), a.agreement,
                                  self.relation(a.source), limit)
        b = self._broke
        if b is None or not self._strong(b.copied):
            return None
        for m in range(RESYNC - 1, 0, -1):
            if _resumes_at(stream, b.source, m):
                return self._continue(stream, b.source + m, [], [], m, FRESH, limit)
        return None

    def _continue(self, stream: Sequence[int], i: int, out: list[int], positions: list[int], agreement: int,
                  relation: int, limit: int) -> Followed | None:
        if not any(n >= self.min_seen for n in self.seen.values()):  # no edit to apply: a plain copy
            more = [int(t) for t in stream[i:i + max(0, limit - len(out))]]
            out += more
            positions += range(i, i + len(more))
            i = len(stream)
        while len(out) < limit and i < len(stream):
            hit = self._rewrite_at(stream, i)
            if hit is not None and self.seen.get(hit[0], 0) >= self.min_seen:
                out += hit[1]
                positions += [i] + [-1] * (len(hit[1]) - 1) if hit[1] else []  # a deletion drafts nothing
                i += len(hit[0])
            else:
                out.append(int(stream[i]))
                positions.append(i)
                i += 1
        return Followed(out[:limit], agreement, relation, positions[:limit]) if out else None
