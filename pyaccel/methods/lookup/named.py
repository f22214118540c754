"""Names an instruction quotes: edits to trust at once.

"Rename `enterabs` to `enter_absolute`" quotes two names. The output copies the code but
changes the first name wherever it occurs; an edit it makes (source bytes A -> output
bytes B) that turns one quoted name into another (`NamedWords.resolve`) is no chance
re-alignment, so prompt lookup drafts it from its first sight. Quoted names are what
`backticks` or "double quotes" outside fenced code blocks hold (the instruction's, not the
code's strings), where that is one identifier (dotted ones whole), not a phrase.

Everything is read from bytes (each token's rendered piece), so the names need not fall
on token boundaries. `block_openings` finds where the prompt's code blocks begin.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

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
    """The names a prompt quotes (see the module doc); pieces: each prompt token's bytes."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        text = b"".join(pieces)
        quoted: list[bytes] = []
        for a, b in _quoted_spans(text):
            if _NAME.fullmatch(text[a:b]) and text[a:b] not in quoted:  # a name, not a phrase
                quoted.append(text[a:b])
        self.quoted = quoted

    def resolve(self, a: bytes, b: bytes) -> bool:
        """Is an edit of source bytes a into output bytes b one that turns a quoted name into
        another?"""
        a, b = _strip_common(a, b)
        if not a and not b:
            return False
        return any(x != y and _edit_turns(a, b, x, y) for x in self.quoted for y in self.quoted)


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
