"""Names an instruction quotes (pyaccel.methods.lookup.named), code-block openings, and what
prompt lookup does with them, on byte pieces and synthetic token streams: no model needed."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from pyaccel.cost_model import CostModel
from pyaccel.methods.lookup import PromptLookup
from pyaccel.methods.lookup.named import NamedWords, block_openings, hazard_factors, hazard_starts
from pyaccel.methods.lookup.proposer import LookupTuning
from pyaccel.methods.lookup.rewrites import FRESH, OPENING, STRONG_RUN, CopyFollower
from pyaccel.types import SamplingConfig

PROMPT = (b"Rename the method `enterabs` to `enter_absolute` and update every call. Return the "
          b"code in a single ```python code block.\n\n```python\nclass S:\n    def enterabs(self, t):\n"
          b"        return t\n\n    def enter(self, t):\n        return self.enterabs(t)  # see \"x\"\n```")


def _pieces(text: bytes, rng: random.Random) -> list[bytes]:
    """text cut into pieces of 1-4 bytes (names need not fall on token boundaries)."""
    out, i = [], 0
    while i < len(text):
        n = rng.randrange(1, 5)
        out.append(text[i:i + n])
        i += n
    return out


def test_quoted_names_and_their_occurrences_whatever_the_token_boundaries() -> None:
    for seed in range(5):
        pieces = _pieces(PROMPT, random.Random(seed))
        named = NamedWords(pieces)
        # The instruction's quotes only: not the ```python of the instruction, nor the
        # code's "x", nor the fence.
        assert named.quoted == [b"enterabs", b"enter_absolute"]
        occ = named.occurrence(np.arange(len(pieces)))
        marked = [b"".join(p for p, o in zip(pieces, occ) if o == k) for k in sorted(set(occ) - {-1})]
        assert len(marked) == 2  # the definition and the call, not the quote
        assert all(b"enterabs" in m and len(m) <= len(b"enterabs") + 6 for m in marked)
        assert named.any
        assert named.resolve(b"abs(", b"_absolute(")  # the edit seen: its occurrences are no longer marked
        assert not named.any and (named.occurrence(np.arange(len(pieces))) == -1).all()


def test_the_name_changed_to_is_not_marked_when_the_code_has_it_rarely() -> None:
    text = (b"Rename `interval` to `width`.\n```python\ndef f(interval):\n    # a fixed-width bin\n"
            b"    return interval * 2 + interval\n```")
    pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
    occ = NamedWords(pieces).occurrence(np.arange(len(pieces)))
    marked = {b"".join(p for p, o in zip(pieces, occ) if o == k) for k in set(occ) - {-1}}
    assert len(marked) >= 1 and all(b"width" not in m or b"interval" in m for m in marked)


def test_hazard_starts_and_factors_on_a_tree() -> None:
    #      root
    #     0      3
    #     1      4
    #     2
    parents = np.array([-1, 0, 1, -1, 3])
    occ = np.array([-1, 7, 7, 7, 8])  # node 1 enters 7, node 2 stays in it; 3 enters 7, 4 enters 8
    starts = hazard_starts(occ, parents)
    assert starts.tolist() == [False, True, False, True, True]
    assert np.allclose(hazard_factors(starts, parents, 0.5), [1.0, 0.5, 0.5, 0.5, 0.25])


def test_an_instruction_naming_one_thing_resolves_no_edit() -> None:
    text = b"Make `f` raise on bad input.\n```python\ndef f(x):\n    return f(x - 1)\n```"
    named = NamedWords([text])
    assert named.quoted == [b"f"] and not named.resolve(b"f(", b"g(")


def test_an_edit_between_quoted_names_is_resolved() -> None:
    named = NamedWords(_pieces(PROMPT, random.Random(0)))
    assert not named.resolve(b"abs(", b"Abs(")  # no quoted name turns into another so
    assert not named.resolve(b"x", b"x")
    assert named.resolve(b"abs(", b"_absolute(")  # enterabs -> enter_absolute, token context around
    named = NamedWords([b"Rename `h` to `heap`.\n```python\nh = []\nh.append(h)\n```"])
    assert named.resolve(b" h", b" heap")  # an insertion once the common prefix is gone


def test_a_named_edit_is_trusted_from_its_first_sight() -> None:
    old, new = 9, (90, 91)
    src = [1, 2, 3, 4, 5, 6, old, 10, 11, 12, 13, old, 14, 15, 16, 17, old, 18, 19]
    asked: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def named_edit(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        asked.append((a, b))
        return (a, b) == ((old,), new)

    f = CopyFollower(named_edit=named_edit)
    stream = src + [0] + [1, 2, 3, 4, 5, 6]
    f.align(stream, 5, 6)
    f.follow(stream)
    stream += [*new, 10, 11, 12]
    f.follow(stream)
    assert asked == [((old,), new)] and f.rewrites == {(old,): new}
    followed = f.draft(stream, 6)
    assert followed is not None and followed.tokens == [13, *new, 14, 15, 16]  # drafted through at once
    assert followed.agreement == 6 + 3 + 3 - 3  # carried through the edit: 6 before it, 3 after


# ---- prompt lookup with a vocabulary ----------------------------------------------------------

OLD, NEW = 1, (2, 3)
VOCAB = {0: b"\n", OLD: b" old", 2: b" new", 3: b"_name", 4: b"Rename `old` to `new_name`.\n",
         5: b"Add a docstring.\n", 6: b"```", 7: b"python"}
VOCAB.update({t: f" w{t}".encode() for t in range(10, 41)})


def _source(rng: random.Random, n: int) -> list[int]:
    """Tokens 10..40, then OLD every 6-12 tokens from the 80th on (a long copy reaches it)."""
    out = [rng.randrange(10, 41) for _ in range(80)]
    while len(out) < n:
        out += [rng.randrange(10, 41) for _ in range(rng.randrange(6, 13))] + [OLD]
    return out


def _lookup(vocab: dict[int, bytes] = VOCAB, **tuning: object) -> PromptLookup:
    """Prompt lookup bound to a stand-in target: `vocab`'s pieces and a compute-bound curve."""
    curve = CostModel.fixed([1.0 + 0.45 * b for b in range(64)])  # compute-bound: a wrong token costs
    method = PromptLookup(tuning=LookupTuning(**tuning))  # type: ignore[arg-type]
    backend = SimpleNamespace(n_seq_max=4, token_bytes=vocab.__getitem__)
    method.bind(SimpleNamespace(backend=backend, costs=curve))  # type: ignore[arg-type]
    return method


def _cost(method: PromptLookup, prompt: list[int], output: list[int]) -> float:
    """Greedy verification of `output` replayed step by step; the curve's units spent."""
    return _replay(method, prompt, output)[0]


def _replay(method: PromptLookup, prompt: list[int], output: list[int]) -> tuple[float, int]:
    """`_cost`, and the passes taken."""
    curve = method._costs
    assert curve is not None
    method.begin(prompt, SamplingConfig())
    history, done, units, passes = list(prompt), 0, 0.0, 0
    while done < len(output):
        draft = method.propose(history, len(output) - done)
        n = 0
        while n < len(draft) and done + n < len(output) and draft.tokens[n] == output[done + n] \
                and draft.parents[n] == n - 1:
            n += 1
        c = curve.curve(len(history))
        units += c.cost_at(1 + len(draft)) / c.cost_at(1)
        passes += 1
        history += output[done:done + n + 1]
        done += n + 1
    method.end()
    return units, passes


def test_a_quoted_rename_costs_less() -> None:
    rng = random.Random(5)
    for _ in range(4):
        source = _source(rng, 240)
        prompt = [4] + source + [0]
        output = [t for s in source for t in (NEW if s == OLD else (s,))]
        off = _cost(_lookup(quoted_edits=False, named_hazard=False), prompt, output)
        edits = _cost(_lookup(named_hazard=False), prompt, output)
        both = _cost(_lookup(), prompt, output)
        assert edits < off and both < edits, (off, edits, both)


def test_the_named_hazard_is_learnt_where_the_name_is_kept() -> None:
    rng = random.Random(6)
    source = _source(rng, 240)
    method = _lookup()
    before = method._hazard.stats.alpha()[0]
    _cost(method, [4] + source + [0], source)  # the output keeps `old` everywhere
    assert method._hazard.stats.alpha()[0] > before + 0.3


def test_a_named_occurrence_is_scored_whole() -> None:
    """An occurrence spanning chain positions 2..3 (`enter` + `abs`): the output writing
    `enter` and then `_absolute` fails it, though its first token was right."""
    from pyaccel.methods.lookup.proposer import CopyStats, _BucketObserver

    for outcomes, want in (([True, True, True, False], 0), ([True, True, True, True, True], 1),
                           ([True, True, False], 0), ([True, False], None)):
        named = CopyStats((0.5,), 1.0, 1.0, True)
        observer = _BucketObserver(CopyStats((0.5,) * 15, 1.0, 1.0, True), np.zeros(6, np.int64), named, {2: 3})
        for position, ok in enumerate(outcomes):
            observer.observe_position(position, ok)
            if not ok:
                break
        alpha = named.alpha()[0]
        assert alpha == (0.5 if want is None else pytest.approx((0.5 + want) / 2)), outcomes


def test_block_openings_end_the_fence_line_not_an_inline_mention() -> None:
    text = b"Return it in a single ```python code block.\n\n```python\ndef f():\n    pass\n```\n"
    pieces = [text[i:i + 1] for i in range(len(text))]
    assert block_openings(pieces) == frozenset({text.index(b"python\n") + len(b"python")})
    assert block_openings([b"no code here"]) == frozenset()


def test_a_copy_beginning_with_a_block_is_an_opening_until_it_grows_strong() -> None:
    src = list(range(100, 140))
    stream = [7, 8, 9] + src + [0] + [7, 8, 9]  # the output opened the block as the prompt does
    for openings, want in ((frozenset(), FRESH), (frozenset({2}), OPENING)):
        f = CopyFollower()
        f.openings = openings
        f.follow(stream)
        f.align(stream, 2, 3)
        f.follow(stream)
        assert f.relation(2) == want and f.relation(30) == FRESH
        followed = f.draft(stream, 4)
        assert followed is not None and followed.tokens == src[:4] and followed.relation == want
    # The output copies on: STRONG_RUN tokens after the opening, the copy is no chance
    # repeat any more, and no longer an opening's.
    grown = stream + src[:STRONG_RUN]
    f.follow(grown)
    end = 2 + STRONG_RUN
    assert f.relation(end) == FRESH
    assert f.draft(grown, 4).relation == FRESH


def test_a_match_past_the_opening_is_an_opening_if_it_agrees_back_over_the_fence() -> None:
    """A step that drafted the fence line's end and the block's first tokens leaves the
    first match past the opening: it still began with the block where its agreed span
    holds the opening and a token before it (the fence), and not otherwise."""
    src = list(range(100, 140))
    stream = [7, 8, 9] + src + [0] + [7, 8, 9] + src[:2]  # opened as the prompt does, 2 tokens in
    for agreement, want in ((5, OPENING), (4, OPENING), (3, FRESH), (2, FRESH)):
        f = CopyFollower()
        f.openings = frozenset({2})
        f.follow(stream)
        f.align(stream, 4, agreement)
        f.follow(stream)
        assert f.relation(4) == want, agreement
        if want == OPENING:
            followed = f.draft(stream, 4)
            assert followed is not None and followed.tokens == src[2:6] and followed.relation == OPENING


def test_answers_that_copy_the_prompt_block_from_its_first_line_learn_to_draft_there() -> None:
    """An OPENING copy's statistics are kept from call to call: after one answer that
    copied the prompt's code block from its opening line on, the next one drafts long from
    there at once, where fresh-match statistics ramp up again."""
    block = [6, 7, 0]  # ```python + line break
    replays = {}
    for openings in (False, True):
        rng = random.Random(9)  # the same two prompts for each
        method = _lookup(block_openings=openings)
        for _ in range(2):
            source = [rng.randrange(10, 41) for _ in range(120)]
            prompt = [5] + block + source + [0, 6, 0]
            replays[openings] = _replay(method, prompt, block + source)  # the second call's
    (on, on_passes), (off, off_passes) = replays[True], replays[False]
    assert on < off and on_passes < off_passes, replays
