"""Prose boundaries (pyaccel.methods.lookup.boundaries) and prompt lookup's hazard at them,
on byte pieces and synthetic token streams: no model needed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pyaccel.methods.lookup.boundaries import CodeLines, ProseBoundaries, is_comment_line, is_punct, open_quote_after
from pyaccel.methods.lookup.proposer import LookupTuning
from pyaccel.methods.lookup.rewrites import FRESH, IN_LINE
from test_named import _lookup, _replay

TEXT = [b"Hello", b",", b" world", b".", b" Code", b":\n", b"```", b"python", b"\n", b"f", b"(", b"a", b",",
        b" b", b")\n", b"```", b"\n", b"Done", b" (", b"really", b")."]
# Punctuation or the token after it, outside the fenced block (its fence lines included).
WANT = [False, True, True, True, True, False, False, False, False, False, False, False, False,
        False, False, False, False, False, True, True, True]


def test_punctuation_tokens() -> None:
    assert all(map(is_punct, [b",", b" (", b").", b"'", b" \"", b"?"]))
    assert not any(map(is_punct, [b" word", b":\n", b"-", b"", b" ", b"'s", b"1."]))


def test_boundaries_are_prose_punctuation_and_the_token_after_it() -> None:
    pb = ProseBoundaries()
    pb.extend(TEXT)
    assert pb.at(np.arange(len(TEXT))).tolist() == WANT
    assert pb.at(np.array([-1, len(TEXT), 10_000])).tolist() == [False, False, False]


def _grown(pieces: list[bytes]) -> list[ProseBoundaries]:
    """`pieces` fed as the output streams in: a few at a time in 20 random ways (a block
    that opens in one step and closes steps later), and one by one as decode steps append
    them (the one-piece path)."""
    grown = []
    for seed in range(20):
        rng = random.Random(seed)
        pb, done = ProseBoundaries(), 0
        while done < len(pieces):
            n = rng.randrange(1, 4)
            pb.extend(pieces[done:done + n])
            done += n
        grown.append(pb)
    one_by_one = ProseBoundaries()
    for piece in pieces:
        one_by_one.extend([piece])
    return grown + [one_by_one]


def test_boundaries_grown_a_few_tokens_at_a_time_are_those_of_the_whole_text() -> None:
    for pb in _grown(TEXT):
        assert pb.at(np.arange(len(TEXT))).tolist() == WANT
    open_block = ProseBoundaries()
    open_block.extend(TEXT[:9] + [b"x", b",", b" y"])  # still inside the block: code
    assert not open_block.at(np.arange(9, 12)).any()


# ---- prompt lookup with a vocabulary ----------------------------------------------------------

COMMA, STOP, FENCE, NL = 1, 2, 3, 4
VOCAB = {COMMA: b",", STOP: b".", FENCE: b"```", NL: b"\n", 5: b"Summarize:\n"}
VOCAB.update({t: f" w{t}".encode() for t in range(10, 60)})


def _clauses(rng: random.Random, n: int) -> list[list[int]]:
    """n clauses of 4-9 words, each ending with a comma or a full stop."""
    return [[rng.randrange(10, 60) for _ in range(rng.randrange(4, 10))] + [rng.choice((COMMA, STOP))]
            for _ in range(n)]


def _paraphrase(clauses: list[list[int]], rng: random.Random) -> list[int]:
    """Each clause's words copied, then the answer's own ending (another punctuation and a
    word of its own), as a summary restating its source clause by clause."""
    out: list[int] = []
    for c in clauses:
        out += c[:-1] + [STOP if c[-1] == COMMA else COMMA, rng.randrange(10, 60)]
    return out


def test_a_prose_copy_that_goes_its_own_way_at_each_clause_end_costs_less() -> None:
    for seed in range(4):
        rng = random.Random(seed)
        clauses = _clauses(rng, 24)
        prompt = [5] + [t for c in clauses for t in c] + [NL]
        output = _paraphrase(clauses, rng)
        off = _replay(_lookup(VOCAB, boundary_hazard=False), prompt, output)[0]
        on = _replay(_lookup(VOCAB), prompt, output)[0]
        assert on < 0.95 * off, (off, on)


def test_a_copy_inside_a_code_block_is_unchanged() -> None:
    rng = random.Random(3)
    code = [t for c in _clauses(rng, 24) for t in c]
    prompt = [5, FENCE, NL] + code + [NL, FENCE, NL]
    output = [FENCE, NL] + code[:150]
    assert _replay(_lookup(VOCAB, boundary_hazard=False), prompt, output) == _replay(_lookup(VOCAB), prompt, output)


@pytest.mark.parametrize("copies_on", [False, True])
def test_the_boundary_hazard_is_learnt_from_what_the_output_does_there(copies_on: bool) -> None:
    rng = random.Random(11)
    clauses = _clauses(rng, 24)
    prompt = [5] + [t for c in clauses for t in c] + [NL]
    output = [t for c in clauses for t in c] if copies_on else _paraphrase(clauses, rng)
    method = _lookup(VOCAB)
    before = method._stats.boundary(FRESH)
    _replay(method, prompt, output)
    after = method._stats.boundary(FRESH)
    assert (after > before + 0.2) if copies_on else (after < before - 0.2), (before, after)


def test_a_bad_boundary_prior_is_refused() -> None:
    with pytest.raises(ValueError, match="boundary_prior"):
        LookupTuning(boundary_prior=1.5).validate()


# ---- comment line ends ------------------------------------------------------------------------

CODE = [b"Doc", b":\n", b"```", b"python", b"\n", b"def", b" f", b"():\n", b'    """', b"Say", b" hi", b"\n",
        b"    ", b"twice", b".\n\n", b'    """', b"\n", b"    #", b" loud", b"\n", b"    x", b" =", b" 1", b"  # ",
        b"one", b"\n", b"    return", b" x", b"\n", b"```", b"\n", b"End", b".\n"]
# The line break of a docstring line, of a comment line or of a line ending in a comment
# (inside the block only), and the token after it.
COMMENT_WANT = [False] * 11 + [True, True, False, True, True] + [False] * 3 + [True, True] + [False] * 4 \
    + [True, True] + [False] * 6


def test_comment_lines_and_quoted_lines() -> None:
    assert all(map(is_comment_line, [b"# x", b"   // y", b"  /* z", b" * w", b" */", b"x = 1  # one", b"-- sql"]))
    assert not any(map(is_comment_line, [b"x = 1", b"a#b", b"s = 'http://x'", b""]))
    assert open_quote_after(None, b'    """Doc') == b'"""'
    assert open_quote_after(b'"""', b"    twice.") == b'"""'
    assert open_quote_after(b'"""', b'    """') is None
    assert open_quote_after(None, b"    '''One line.'''") is None
    assert open_quote_after(None, b"    s = \"\"\"a'''b") == b'"""'  # the other quote inside it


def test_code_lines_end_prose_where_a_quote_is_open_or_a_comment_ends() -> None:
    lines = CodeLines()
    got = [lines.ends_prose(p) for p in [b'"""', b"Doc", b"\n", b"more", b'"""\n', b"x", b" = 1\n", b"#", b" c\n"]]
    assert got == [False, False, True, False, False, False, False, False, True]


def test_comment_line_ends_inside_code_blocks() -> None:
    pb = ProseBoundaries()
    pb.extend(CODE)
    assert pb.comment_at(np.arange(len(CODE))).tolist() == COMMENT_WANT
    assert pb.comment_at(np.array([-1, len(CODE)])).tolist() == [False, False]


def test_comment_line_ends_grown_a_few_tokens_at_a_time_are_those_of_the_whole_text() -> None:
    for pb in _grown(CODE):
        assert pb.comment_at(np.arange(len(CODE))).tolist() == COMMENT_WANT


def test_both_flags_grown_in_any_steps_are_those_of_the_whole_text() -> None:
    """Random streams of fences, inline code, quotes, comments and line breaks."""
    alphabet = [b"```", b"```python\n", b" `x`", b'"""', b"    #", b" c", b"\n", b".\n\n", b" w", b",", b"  # "]
    for seed in range(30):
        rng = random.Random(seed)
        pieces = [rng.choice(alphabet) for _ in range(120)]
        whole = ProseBoundaries()
        whole.extend(pieces)
        every = np.arange(len(pieces))
        for pb in _grown(pieces):
            assert pb.at(every).tolist() == whole.at(every).tolist()
            assert pb.comment_at(every).tolist() == whole.comment_at(every).tolist()


QQQ, INDENT = 6, 7
CODE_VOCAB = {**VOCAB, QQQ: b'    """', INDENT: b"    "}


def _docstring(lines: list[list[int]]) -> list[int]:
    """A fenced block holding a docstring of these lines of words."""
    body = [t for line in lines for t in [INDENT] + line + [NL]]
    return [FENCE, NL, QQQ] + body + [QQQ, NL, FENCE, NL]


def _rewritten(lines: list[list[int]], rng: random.Random) -> list[int]:
    """The docstring rewritten: each line's words, then a word of its own before the line
    ends (where the old line ended, the copy breaks)."""
    return _docstring([line + [rng.randrange(10, 60)] for line in lines])


def _lines(rng: random.Random, n: int) -> list[list[int]]:
    return [[rng.randrange(10, 60) for _ in range(rng.randrange(6, 10))] for _ in range(n)]


def test_a_rewritten_docstring_costs_less() -> None:
    totals = np.zeros(2)
    for seed in range(5):
        rng = random.Random(seed)
        lines = _lines(rng, 20)
        prompt, output = [5] + _docstring(lines), _rewritten(lines, rng)
        off = _replay(_lookup(CODE_VOCAB, comment_hazard=False), prompt, output)[0]
        on = _replay(_lookup(CODE_VOCAB), prompt, output)[0]
        assert on < off, (seed, off, on)
        totals += off, on
    assert totals[1] < 0.98 * totals[0], totals


def test_a_docstring_copied_line_for_line_costs_about_the_same() -> None:
    rng = random.Random(7)
    lines = _lines(rng, 20)
    prompt = [5] + _docstring(lines)
    off = _replay(_lookup(CODE_VOCAB, comment_hazard=False), prompt, prompt[1:])[0]
    on = _replay(_lookup(CODE_VOCAB), prompt, prompt[1:])[0]
    assert on <= 1.1 * off, (off, on)


@pytest.mark.parametrize("copies_on", [False, True])
def test_the_comment_hazard_is_learnt_from_what_the_output_does_there(copies_on: bool) -> None:
    rng = random.Random(11)
    lines = _lines(rng, 20)
    prompt = [5] + _docstring(lines)
    output = prompt[1:] if copies_on else _rewritten(lines, rng)
    method = _lookup(CODE_VOCAB)
    before = [method._stats.comment(r) for r in (FRESH, IN_LINE)]
    _replay(method, prompt, output)
    after = [method._stats.comment(r) for r in (FRESH, IN_LINE)]
    moves = [a - b for a, b in zip(after, before)]
    assert (max(moves) > 0.05) if copies_on else (min(moves) < -0.2), (before, after)


def test_a_bad_comment_prior_is_refused() -> None:
    with pytest.raises(ValueError, match="comment_prior"):
        LookupTuning(comment_prior=-0.1).validate()
