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
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .named import FENCE

_PUNCT = b"!\"'(),.:;?[]{}`"


def is_punct(piece: bytes) -> bool:
    """Is this token's text, spaces aside, only punctuation marks (and no line break)?"""
    core = piece.strip(b" \t")
    return bool(core) and not core.translate(None, _PUNCT)


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
        if any(b"`" in p for p in pieces):
            self._find_blocks()
            first = 0
        else:
            self._code[first:self._n] = self._open
        self._mark(first)

    def _append(self, piece: bytes) -> None:
        """`extend` by one piece with no backtick (a decode step's token), in scalars."""
        n = self._n
        self._starts.append(len(self._text))
        self._text += piece
        self._grow(n + 2)
        punct, code = is_punct(piece), self._open
        self._punct[n], self._code[n] = punct, code
        self._flag[n] = not code and (punct or bool(self._punct[n - 1] and not self._code[n - 1]))
        self._n = n + 1

    def _grow(self, n: int) -> None:
        if n > len(self._flag):
            more = max(n, 2 * len(self._flag)) - len(self._flag)
            self._punct, self._code, self._flag = (np.concatenate([a, np.zeros(more, dtype=bool)])
                                                   for a in (self._punct, self._code, self._flag))

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

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Per position (stream indices; negative or unseen ones: False): a prose boundary?"""
        return self._flag[np.minimum(np.asarray(positions, dtype=np.int64), len(self._flag) - 1)]
