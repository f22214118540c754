"""Names an instruction quotes: where a copy is likely to break, and edits to trust at once.

"Rename `enterabs` to `enter_absolute`" quotes two names. The output copies the code but
changes the first name wherever it occurs, and until an occurrence has been seen changed
nothing tells a copy of it apart from any other. So each occurrence, outside the quotes,
of a name the code holds more than twice as often as the rarest quoted name (the name to
change to is new, or rare, in the code) is marked on the prompt's tokens (`occurrence`):
a draft entering one is copying a word the output will likely change. An edit the output
makes (source bytes A -> output bytes B) that turns one quoted name into another
(`NamedWords.resolve`) is no chance re-alignment: prompt lookup drafts it from its first
sight, and the name's occurrences are no longer marked. Quoted names are what
`backticks` or "double quotes" outside fenced code blocks hold (the instruction's, not the
code's strings), where that is one identifier (dotted ones whole), not a phrase.

Everything is read from bytes (each token's rendered piece), so the names need not fall
on token boundaries. `block_openings` finds where the prompt's code blocks begin.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ... import _core

_QUOTED = re.compile(rb"`([^`\n]{1,80})`|\"([^\"\n]{1,80})\"")
FENCE = re.compile(rb"^[ \t]*```.*?(^[ \t]*```|\Z)", re.S | re.M)  # a block from a line opening with ```
_NAME = re.compile(rb"[A-Za-z_]\w*(?:\.\w+)*")  # an identifier, dotted names whole


def _quoted_spans(text: bytes) -> list[tuple[int, int]]:
    """(start, end) byte spans of the quoted texts (inside the quotes) outside fenced code
    blocks (the instruction, not the strings of the code it is about)."""
    fences = [m.span() for m in FENCE.finditer(text)]
    spans = []
    for m in _QUOTED.finditer(text):
        if _inside(m.start(), fences):
            continue
        g = 1 if m.group(1) is not None else 2
        spans.append((m.start(g), m.end(g)))
    return spans


def _inside(pos: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _edit_turns(a: bytes, b: bytes, x: bytes, y: bytes) -> bool:
    """Does replacing one occurrence of a in x by b give y (a may be empty: an insertion)?"""
    if len(y) != len(x) - len(a) + len(b):
        return False
    for k in range(len(x) - len(a) + 1):
        if x[k:k + len(a)] == a and x[:k] + b + x[k + len(a):] == y:
            return True
    return False


def _strip_common(a: bytes, b: bytes) -> tuple[bytes, bytes]:
    """a and b without their common prefix and then their common suffix."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    a, b = a[p:], b[p:]
    s = 0
    while s < min(len(a), len(b)) and a[-1 - s] == b[-1 - s]:
        s += 1
    return a[:len(a) - s], b[:len(b) - s]


class NamedWords:
    """The names a prompt quotes and where they occur in its tokens (see the module doc);
    pieces: each prompt token's bytes, in order."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        text = b"".join(pieces)
        starts = np.cumsum([0] + [len(p) for p in pieces])
        spans = _quoted_spans(text)
        quoted: list[bytes] = []
        for a, b in spans:
            if _NAME.fullmatch(text[a:b]) and text[a:b] not in quoted:  # a name, not a phrase
                quoted.append(text[a:b])
        outside = {w: [m.span() for m in re.finditer(_whole_word(w), text) if not _inside(m.start(), spans)]
                   for w in quoted}
        self.quoted = quoted
        rarest = min((len(v) for v in outside.values()), default=0)
        # occ[i]: the named occurrence prompt token i belongs to (-1: none); owner[o]: its word.
        self._occ = np.full(len(pieces), -1, dtype=np.int64)
        self._owner: list[bytes] = []
        for w in (w for w in quoted if len(outside[w]) > 2 * rarest):  # the names to change from
            for a, b in outside[w]:
                first = int(np.searchsorted(starts, a, side="right")) - 1
                last = int(np.searchsorted(starts, b, side="left")) - 1
                self._occ[first:last + 1] = len(self._owner)
                self._owner.append(w)
        self._resolved: set[bytes] = set()

    @property
    def any(self) -> bool:
        """Is any occurrence still marked?"""
        return bool(set(self._owner) - self._resolved)

    def occurrence(self, positions: np.ndarray) -> np.ndarray:
        """The named occurrence (an id, -1 for none) of the prompt token each stream position
        copies; positions past the prompt, negative ones (not a copy) and names an edit has
        already changed give -1 (the output has shown what it does there)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.full(len(positions), -1, dtype=np.int64)
        ok = (positions >= 0) & (positions < len(self._occ))
        out[ok] = self._occ[positions[ok]]
        for k in np.flatnonzero(out >= 0) if self._resolved else ():
            if self._owner[out[k]] in self._resolved:
                out[k] = -1
        return out

    def resolve(self, a: bytes, b: bytes) -> bool:
        """Is an edit of source bytes a into output bytes b one that turns a quoted name into
        another? If so, the name it changes is resolved."""
        a, b = _strip_common(a, b)
        if not a and not b:
            return False
        hits = {x for x in self.quoted for y in self.quoted if x != y and _edit_turns(a, b, x, y)}
        self._resolved |= hits
        return bool(hits)


def _whole_word(word: bytes) -> bytes:
    return rb"(?<!\w)" + re.escape(word) + rb"(?!\w)"


def hazard_starts(occ: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Per node of a tree (parents[i] < i, -1 the root): does it enter a named occurrence
    (occ >= 0) its parent is not in? Each occurrence is counted once per path."""
    occ = np.asarray(occ, dtype=np.int64)
    parents = np.asarray(parents, dtype=np.int64)
    parent_occ = np.where(parents >= 0, occ[np.maximum(parents, 0)], -1)
    return (occ >= 0) & (occ != parent_occ)


def hazard_factors(starts: np.ndarray, parents: np.ndarray, h: float) -> np.ndarray:
    """Per node: h to the number of marked nodes (`starts`) on its path, itself included:
    the factor its path probability takes (parents come before their children)."""
    return _core.tree_path_products(parents, np.where(np.asarray(starts, dtype=bool), h, 1.0))


def block_openings(pieces: Sequence[bytes]) -> frozenset[int]:
    """The tokens that end the opening line of a fenced code block (```python and its line
    break): a copy aligned there began with the block."""
    text = b"".join(pieces)
    ends = np.cumsum([len(p) for p in pieces])
    out = set()
    for m in FENCE.finditer(text):
        eol = text.find(b"\n", m.start())
        if eol >= 0:
            out.add(int(np.searchsorted(ends, eol, side="right")))
    return frozenset(out)
