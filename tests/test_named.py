"""Names an instruction quotes (pyaccel.methods.lookup.named) and what prompt lookup does
with them, on byte pieces and synthetic token streams: no model needed."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Callable

import numpy as np

from pyaccel import _core
from pyaccel.cost_model import CostModel
from pyaccel.methods.lookup import PromptLookup
from pyaccel.methods.lookup.named import NamedWords, block_openings, hazard_factors, hazard_starts, respelled
from pyaccel.methods.lookup.proposer import LookupTuning
from pyaccel.methods.lookup.rewrites import FRESH, IN_LINE, OPENING, CopyFollower, FollowerTuning
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


def _marked_text(named: NamedWords, pieces: list[bytes]) -> list[bytes]:
    """The text of each marked occurrence, from the tokens `occurrence` marks."""
    occ = named.occurrence(np.arange(len(pieces)))
    return [b"".join(p for p, o in zip(pieces, occ) if o == k) for k in sorted(set(occ) - {-1})]


def test_quoted_names_and_their_occurrences_whatever_the_token_boundaries() -> None:
    for seed in range(5):
        pieces = _pieces(PROMPT, random.Random(seed))
        named = NamedWords(pieces)
        # The instruction's quotes only: not the ```python of the instruction, nor the
        # code's "x", nor the fence.
        assert named.quoted == [b"enterabs", b"enter_absolute"]
        assert named.renamed == [b"enterabs"]
        marked = _marked_text(named, pieces)
        assert len(marked) == 2  # the definition and the call, not the quote
        assert all(b"enterabs" in m and len(m) <= len(b"enterabs") + 6 for m in marked)
        assert named.any


def test_the_name_changed_to_is_not_marked_when_the_code_has_it_rarely() -> None:
    text = (b"Rename `interval` to `width`.\n```python\ndef f(interval):\n    # a fixed-width bin\n"
            b"    return interval * 2 + interval\n```")
    named = NamedWords([text[i:i + 3] for i in range(0, len(text), 3)])
    assert named.renamed == [b"interval"]


def test_an_instruction_naming_one_thing_marks_nothing() -> None:
    text = b"Make `f` raise on bad input.\n```python\ndef f(x):\n    return f(x - 1)\n```"
    named = NamedWords([text])
    assert named.quoted == [b"f"] and named.renamed == [] and not named.any
    assert (named.occurrence(np.arange(3)) == -1).all()


def test_an_edit_between_quoted_names_resolves_the_old_one() -> None:
    pieces = _pieces(PROMPT, random.Random(0))
    for keep in (True, False):
        named = NamedWords(pieces, keep_resolved=keep)
        assert not named.resolve(b"abs(", b"Abs(")  # no quoted name turns into another so
        assert not named.resolve(b"x", b"x")
        assert named.any
        assert named.resolve(b"abs(", b"_absolute(")  # enterabs -> enter_absolute, token context around
        assert named.any == keep  # kept: the output may still keep the name somewhere
        assert (named.occurrence(np.arange(len(pieces))) >= 0).any() == keep
    text = b"Rename `h` to `heap`.\n```python\nh = []\nh.append(h)\n```"
    named = NamedWords([text])
    assert named.renamed == [b"h"]
    assert named.resolve(b" h", b" heap")  # an insertion once the common prefix is gone


def test_positions_past_the_prompt_or_not_copied_are_unmarked() -> None:
    named = NamedWords(_pieces(PROMPT, random.Random(1)))
    assert (named.occurrence(np.array([-1, 10_000])) == -1).all()


def test_hazard_starts_and_factors_on_a_tree() -> None:
    #      root
    #     0      3
    #     1      4
    #     2
    parents = np.array([-1, 0, 1, -1, 3])
    occ = np.array([-1, 7, 7, 7, 8])  # node 1 enters 7, node 2 stays in it; 3 enters 7, 4 enters 8
    starts = hazard_starts(occ, parents)
    assert starts.tolist() == [False, True, False, True, True]
    assert _core.tree_layout(parents).depth.tolist() == [1, 2, 3, 1, 2]  # what positions are counted from
    h = np.array([0.9, 0.5, 0.9, 0.5, 0.4])  # per node; only where it enters an occurrence
    assert np.allclose(hazard_factors(starts, parents, h), [1.0, 0.5, 0.5, 0.5, 0.2])


def test_hazard_factors_on_random_trees_are_the_products_along_each_path() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        parents = np.array([-1] + [int(rng.integers(-1, i)) if rng.random() < 0.3 else i - 1 for i in range(1, n)])
        starts, h = rng.random(n) < 0.3, rng.random(n)
        want = []
        for i in range(n):  # walk up from each node
            f, j = 1.0, i
            while j >= 0:
                f *= h[j] if starts[j] else 1.0
                j = int(parents[j])
            want.append(f)
        assert np.allclose(hazard_factors(starts, parents, h), want)
        assert np.allclose(hazard_factors(starts, parents, 0.5), hazard_factors(starts, parents, np.full(n, 0.5)))


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
    assert followed.positions == [10, 11, -1, 12, 13, 14]  # copied from / replacing (the edit's first token)
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
    backend = SimpleNamespace(n_seq_max=4, token_bytes=vocab.__getitem__, tokenize=_tokenize(vocab))
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


def test_a_rename_the_output_makes_only_in_part_costs_less_with_the_hazard_after_it() -> None:
    rng = random.Random(7)
    for _ in range(3):
        source = _source(rng, 240)
        seen = [k for k, s in enumerate(source) if s == OLD]
        kept = set(seen[2::3])  # every third occurrence keeps the old name (prose, another scope)
        output = [t for k, s in enumerate(source) for t in (NEW if s == OLD and k not in kept else (s,))]
        prompt = [4] + source + [0]
        before_only = _cost(_lookup(hazard_after_edit=False), prompt, output)
        after_too = _cost(_lookup(), prompt, output)
        assert after_too < 0.95 * before_only, (before_only, after_too)


def test_the_named_hazard_is_learnt_where_the_name_is_kept() -> None:
    rng = random.Random(6)
    source = _source(rng, 240)
    method = _lookup()
    before = method._stats.named()[0]
    _cost(method, [4] + source + [0], source)  # the output keeps `old` everywhere
    assert method._stats.named()[0] > before + 0.3


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
    # The output copies on: strong_run tokens after the opening, the copy is in-line.
    grown = stream + src[:FollowerTuning().strong_run]
    f.follow(grown)
    end = 2 + FollowerTuning().strong_run
    assert f.relation(end) == IN_LINE
    assert f.draft(grown, 4).relation == IN_LINE


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


def test_a_draft_reaching_a_blocks_opening_is_offered_as_a_probe() -> None:
    """Prompt lookup flags the candidates that copy the end of a block's opening line
    (`Candidate.probe`): the step before the block's first line, not the steps inside it
    or text with no block."""
    rng = random.Random(3)
    source = [rng.randrange(10, 41) for _ in range(40)]
    prompt = [5, 6, 7, 0] + source + [0, 6, 0]
    method = _lookup()
    method.begin(prompt, SamplingConfig())
    probes = {}
    for out in ([6, 7], [6, 7, 0], [6, 7, 0] + source[:3]):
        cands = method.candidates(prompt + out, 16)
        assert cands, out
        probes[len(out)] = any(c.probe for c in cands)
    assert probes == {2: True, 3: False, 6: False}
    plain = _lookup(block_openings=False)
    plain.begin(prompt, SamplingConfig())
    assert not any(c.probe for c in plain.candidates(prompt + [6, 7], 16))


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
    assert on < off and on_passes <= off_passes - 2, replays


class _Recorder:
    def __init__(self) -> None:
        self.named: list[tuple[bool, bool]] = []

    def observe_position(self, bucket: int, accepted: bool) -> None:
        pass

    def observe_named(self, edited: bool, accepted: bool) -> None:
        self.named.append((edited, accepted))


def test_a_named_occurrence_is_scored_whole() -> None:
    """An occurrence spanning chain positions 2..3 (`enter` + `abs`): the output writing
    `enter` and then `_absolute` fails it, though its first token was right."""
    from pyaccel.methods.lookup.proposer import _BucketObserver

    for outcomes, want in (([True, True, True, False], [(False, False)]),
                           ([True, True, True, True, True], [(False, True)]),
                           ([True, True, False], [(False, False)]),
                           ([True, False], [])):
        stats = _Recorder()
        observer = _BucketObserver(stats, [0] * 6, {2: (3, False)})  # type: ignore[arg-type]
        for position, ok in enumerate(outcomes):
            observer.observe_position(position, ok)
            if not ok:
                break
        assert stats.named == want, outcomes


def test_a_rename_is_recorded_only_when_the_edit_shows_the_whole_names() -> None:
    text = b"Rename `delims` to `delimiter_counts` and `quotes` to `quote_counts`.\n```python\n" + \
        b"def f(data, delimiters):\n    quotes = delims = 0\n    return quotes, delims, quotes, delims\n```"
    named = NamedWords([text])
    # "delimiters" -> "delimiter_counts" also turns "quotes" into "quote_counts" once the
    # common ends are gone: the name is resolved (a hazard), but no rename is recorded.
    assert named.resolve(b" delimiters", b" delimiter_counts")
    assert named.renames == {}
    assert named.resolve(b" delims", b" delimiter_counts")
    assert named.renames == {b"delims": b"delimiter_counts"}
    assert respelled(b"(delims) delims_x delims", b"delims", b"d") == b"(d) delims_x d"


# Names glued to the text before them: the renamed name's tokens differ from the old one's
# beyond the name itself, at every kind of glue.
GLUED = {50: b"(old", 51: b".old", 52: b"[old"}
GLUE_VOCAB = {**VOCAB, **GLUED, 53: b"(", 54: b".", 55: b"[", 56: b"new", 57: b"_"}


def _tokenize(vocab: dict[int, bytes]) -> Callable[..., list[int]]:
    """Greedy longest-match tokenization over `vocab` (a stand-in for the model's)."""
    by_piece = {v: k for k, v in vocab.items()}

    def tokenize(text: str, **_: bool) -> list[int]:
        data, out = text.encode(), []
        while data:
            piece = max((p for p in by_piece if data.startswith(p)), key=len)
            out.append(by_piece[piece])
            data = data[len(piece):]
        return out
    return tokenize


def test_a_quoted_rename_respelled_in_context_costs_less() -> None:
    rng = random.Random(11)
    for _ in range(3):
        source = [t if t != OLD or rng.random() < 0.4 else rng.choice(list(GLUED)) for t in _source(rng, 300)]
        glued_new = {t: tuple(_tokenize(GLUE_VOCAB)(GLUE_VOCAB[t][:1].decode() + "new_name")) for t in GLUED}
        output = [t for s in source for t in (NEW if s == OLD else glued_new.get(s, (s,)))]
        prompt = [4] + source + [0]
        costs = []
        for respell in (False, True):
            method = _lookup(GLUE_VOCAB, respell_renames=respell)
            costs.append(_cost(method, prompt, output))
        assert costs[1] < costs[0], costs
