"""Prose boundaries (pyaccel.methods.lookup.boundaries) and prompt lookup's hazard at them,
on byte pieces and synthetic token streams: no model needed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pyaccel.methods.lookup.boundaries import ProseBoundaries, is_punct
from pyaccel.methods.lookup.proposer import LookupTuning
from pyaccel.methods.lookup.rewrites import FRESH
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


def test_boundaries_grown_a_few_tokens_at_a_time_are_those_of_the_whole_text() -> None:
    """As the output streams in: a block that opens in one step and closes steps later."""
    for seed in range(20):
        rng = random.Random(seed)
        pb, done = ProseBoundaries(), 0
        while done < len(TEXT):
            n = rng.randrange(1, 4)
            pb.extend(TEXT[done:done + n])
            done += n
        assert pb.at(np.arange(len(TEXT))).tolist() == WANT
    one_by_one = ProseBoundaries()  # as decode steps append them (the one-piece path)
    for piece in TEXT:
        one_by_one.extend([piece])
    assert one_by_one.at(np.arange(len(TEXT))).tolist() == WANT
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
