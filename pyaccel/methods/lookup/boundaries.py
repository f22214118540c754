"""Clause boundaries of prose: where a copy of text (not of code) is likely to break.

An answer that copies prose from its prompt (a summary restating a sentence, an extraction
quoting a title, a RAG answer quoting a passage) copies a clause and then goes its own way,
most often at the punctuation that ends the clause in the source or at the word after it:
"were told the child would be left stateless, new evidence shows" becomes "... stateless."
On the Spec-Bench prompts a copy's next token was accepted 0.88 of the time between two
words, 0.49 at a punctuation token after a word and 0.70 at the word after it (lookup's
shadows where at least 4 tokens agree: `benchmarks/boundary_stats.py`); inside code,
punctuation is copied like the rest. So prompt lookup gives each node that copies a
*prose boundary* an acceptance of its own, learnt from the shadows
(`LookupTuning.boundary_hazard`).

A prose boundary is a stream position outside fenced code blocks whose token is
punctuation (its text, spaces aside, only punctuation marks) or follows such a token.
`ProseBoundaries` marks them incrementally over the stream (prompt and output alike), from
each token's rendered piece.

Inside code the prose is in comments and docstrings, and there a copy breaks at line ends:
an answer rewriting a docstring reuses the old one's phrases but wraps and ends its lines
elsewhere ("... a custom search\n    path." becomes "... a custom search path.\n"), where
code is copied line for line. So the same object also marks *comment line ends*: stream
positions inside a fenced block whose token holds the line break of a comment line or of a
line inside a triple-quoted string, or follows such a token (`LookupTuning.comment_hazard`).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from .named import FENCE

_PUNCT = b"!\"'(),.:;?[]{}`"
_TRIPLE = re.compile(rb'"""|\'\'\'')
_COMMENT_OPENERS = (b"#", b"//", b"/*", b"* ", b"--")
_TRAILING_COMMENTS = (b" # ", b" // ")


def is_punct(piece: bytes) -> bool:
    """Is this token's text, spaces aside, only punctuation marks (and no line break)?"""
    core = piece.strip(b" \t")
    return bool(core) and not core.translate(None, _PUNCT)


def is_comment_line(line: bytes) -> bool:
    """Does this line of code (no line break) open with a comment marker, or end in a
    comment after its code?"""
    core = line.strip()
    return core.startswith(_COMMENT_OPENERS) or core in (b"*", b"*/") or any(c in line for c in _TRAILING_COMMENTS)


def open_quote_after(quote: bytes | None, line: bytes) -> bytes | None:
    """The triple quote still open at the end of `line`, given the one open at its start."""
    pos = 0
    while True:
        if quote is None:
            m = _TRIPLE.search(line, pos)
            if m is None:
                return None
            quote, pos = m.group(), m.end()
        else:
            k = line.find(quote, pos)
            if k < 0:
                return quote
            quote, pos = None, k + len(quote)


class CodeLines:
    """Reads code piece by piece and says which pieces end a line of prose: a comment line,
    or a line that ends inside a triple-quoted string."""

    def __init__(self) -> None:
        self._quote: bytes | None = None  # the triple quote open at the current line's start
        self._line = bytearray()  # the current line so far

    def reset(self) -> None:
        self._quote, self._line = None, bytearray()

    def ends_prose(self, piece: bytes) -> bool:
        """Read the next piece: does a line break in it end a line of prose?"""
        if b"\n" not in piece:
            self._line += piece
            return False
        *done, rest = piece.split(b"\n")
        ended = False
        for seg in done:
            line = bytes(self._line) + seg
            if self._quote is None and line.lstrip().startswith(_COMMENT_OPENERS):
                ended = True
            else:
                after = open_quote_after(self._quote, line)
                ended |= after is not None or (self._quote is None and is_comment_line(line))
                self._quote = after
            self._line = bytearray()
        self._line += rest
        return ended


class ProseBoundaries:
    """Per stream position: is it a prose boundary? Grown with `extend` as the stream grows
    (the prompt's pieces first, then each step's new tokens)."""

    def __init__(self) -> None:
        self._text = bytearray()
        self._starts: list[int] = []  # byte offset of each token's piece in _text
        # Per position, with room beyond the stream (always some: index -1 reads False).
        self._punct = np.zeros(256, dtype=bool)
        self._code = np.zeros(256, dtype=bool)
        self._flag = np.zeros(256, dtype=bool)  # a prose boundary
        self._end = np.zeros(256, dtype=bool)  # the piece ends a line of prose inside code
        self._comment = np.zeros(256, dtype=bool)  # a comment line end
        self._lines = CodeLines()
        self._n = 0
        self._open = False  # the text ends inside a fenced block

    def __len__(self) -> int:
        return self._n

    def extend(self, pieces: Sequence[bytes]) -> None:
        """Append the next tokens' pieces. Fenced blocks are found again only when a piece
        holds a backtick (a fence may have opened or closed); otherwise the new tokens are
        code exactly when the text ends inside a block."""
        if len(pieces) == 1 and b"`" not in pieces[0]:
            self._append(pieces[0])
            return
        if not pieces:
            return
        first = self._n
        for p in pieces:
            self._starts.append(len(self._text))
            self._text += p
        self._grow(self._n + len(pieces) + 1)
        self._n += len(pieces)
        self._punct[first:self._n] = [is_punct(p) for p in pieces]
        start = first  # where the comment line ends are read again
        if any(b"`" in p for p in pieces):
            was_code = self._code[:first].copy()
            self._find_blocks()
            self._mark(0)
            # From the start of the code run holding the first position whose flag moved
            # (a closed fence may turn a long tail into prose): the state there is fresh.
            moved = np.flatnonzero(was_code != self._code[:first])
            lo = int(moved[0]) if len(moved) else first
            prose = np.flatnonzero(~self._code[:lo])
            start = int(prose[-1]) + 1 if len(prose) else 0
            self._lines.reset()
        else:
            self._code[first:self._n] = self._open
            self._mark(first)
        self._mark_line_ends(start)

    def _mark_line_ends(self, start: int) -> None:
        """The comment line end flags of positions start .. the stream's end, reading the
        code positions' pieces on from the line state at `start` (fresh where start - 1 is
        not code)."""
        n, prev = self._n, start - 1
        self._end[start:n] = False
        for i in (np.flatnonzero(self._code[start:n]) + start).tolist():
            if i != prev + 1:
                self._lines.reset()
            self._end[i] = self._lines.ends_prose(bytes(self._text[self._starts[i]:self._starts[i + 1] if i + 1 < n
                                                                   else len(self._text)]))
            prev = i
        if not self._code[n - 1]:
            self._lines.reset()
        before = self._end[start - 1] if start > 0 else False
        after_end = np.concatenate([[before], self._end[start:n - 1]])
        self._comment[start:n] = self._code[start:n] & (self._end[start:n] | after_end)

    def _append(self, piece: bytes) -> None:
        """`extend` by one piece with no backtick (a decode step's token), in scalars."""
        n = self._n
        self._starts.append(len(self._text))
        self._text += piece
        self._grow(n + 2)
        punct, code = is_punct(piece), self._open
        self._punct[n], self._code[n] = punct, code
        self._flag[n] = not code and (punct or bool(self._punct[n - 1] and not self._code[n - 1]))
        self._mark_line_end(n, piece)
        self._n = n + 1

    def _mark_line_end(self, i: int, piece: bytes | bytearray) -> None:
        """The comment line end flags of position i (code flag set, i - 1's flags final)."""
        if self._code[i]:
            self._end[i] = self._lines.ends_prose(bytes(piece))
        else:
            self._lines.reset()
            self._end[i] = False
        self._comment[i] = self._code[i] and (self._end[i] or self._end[i - 1])

    def _grow(self, n: int) -> None:
        if n > len(self._flag):
            more = max(n, 2 * len(self._flag)) - len(self._flag)
            self._punct, self._code, self._flag, self._end, self._comment = (
                np.concatenate([a, np.zeros(more, dtype=bool)])
                for a in (self._punct, self._code, self._flag, self._end, self._comment))

    def _find_blocks(self) -> None:
        """Mark every token whose piece overlaps a fenced block (its fence lines included)."""
        text = bytes(self._text)
        starts = np.asarray(self._starts, dtype=np.int64)
        ends = np.append(starts[1:], len(text))
        code = np.zeros(self._n, dtype=bool)
        self._open = False
        for m in FENCE.finditer(text):
            lo = int(np.searchsorted(ends, m.start(), side="right"))
            hi = int(np.searchsorted(starts, m.end(), side="left"))
            code[lo:hi] = True
            self._open = not m.group(1)
        self._code[:self._n] = code

    def _mark(self, lo: int) -> None:
        """The boundary flags of positions lo .. the stream's end."""
        n = self._n
        prose_punct = self._punct[max(0, lo - 1):n] & ~self._code[max(0, lo - 1):n]
        after = prose_punct[:-1] if lo > 0 else np.concatenate([[False], prose_punct[:-1]])
        self._flag[lo:n] = ~self._code[lo:n] & (self._punct[lo:n] | after)

    @property
    def flags(self) -> np.ndarray:
        """Per position, a prose boundary? With room beyond the stream (all False); valid
        until the next `extend`."""
        return self._flag

    @property
    def comment_flags(self) -> np.ndarray:
        """Per position, a comment line end? With room beyond the stream (all False); valid
        until the next `extend`."""
        return self._comment

    def comment_at(self, positions: np.ndarray) -> np.ndarray:
        """Per position (stream indices; negative or unseen ones: False): a comment line end?"""
        return self._comment[np.minimum(np.asarray(positions, dtype=np.int64), len(self._comment) - 1)]

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Per position (stream indices; negative or unseen ones: False): a prose boundary?"""
        return self._flag[np.minimum(np.asarray(positions, dtype=np.int64), len(self._flag) - 1)]
