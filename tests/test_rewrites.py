"""Learnt rewrites (pyaccel.methods.lookup.rewrites) on synthetic token streams: no model needed."""

from __future__ import annotations

import random

from pyaccel.cost_model import CostModel
from pyaccel.methods.lookup import PromptLookup
from pyaccel.methods.lookup.rewrites import FRESH, MAX_SPAN, STRONG_RUN, CopyFollower
from pyaccel.types import Draft, SamplingConfig

GONE = 2 * MAX_SPAN + 10  # output tokens past any edit

OLD, NEW = 9, (90, 91)  # the identifier and its two-token replacement


def _source(rng: random.Random, n: int) -> list[int]:
    """Code-like tokens 1..40 with the identifier OLD every 6-12 tokens."""
    out: list[int] = []
    while len(out) < n:
        out += [rng.randrange(1, 41) for _ in range(rng.randrange(6, 13))] + [OLD]
    return out


def _renamed(source: list[int]) -> list[int]:
    return [t for s in source for t in (NEW if s == OLD else (s,))]


def test_follower_learns_an_edit_and_drafts_through_it() -> None:
    src = [1, 2, 3, 4, 5, 6, OLD, 10, 11, 12, 13, OLD, 14, 15, 16, 17, OLD, 18, 19]
    f = CopyFollower()
    stream = src + [0] + [1, 2, 3, 4, 5, 6]
    f.align(stream, 5, 6)  # the output's 1..6 agree with the source's
    f.follow(stream)
    followed = f.draft(stream, 8)  # nothing learnt yet: the plain copy
    assert followed is not None and followed.tokens == [OLD, 10, 11, 12, 13, OLD, 14, 15]
    assert followed.agreement == 6
    stream += [*NEW, 10, 11]  # the copy broke at OLD and resumed, not yet for 3 tokens
    f.follow(stream)
    assert not f.rewrites
    stream += [12]
    f.follow(stream)
    assert f.rewrites == {(OLD,): NEW}
    followed = f.draft(stream, 6)  # seen once (could be chance): the source as it is
    assert followed is not None and followed.tokens == [13, OLD, 14, 15, 16, 17]
    assert followed.agreement == 3  # a first-seen edit does not carry the agreement
    stream += [13, NEW[0]]  # the edit recurs (half-way through the new name)
    f.follow(stream)
    assert f.seen[(OLD,)] == 2
    followed = f.draft(stream, 8)
    assert followed is not None and followed.tokens == [NEW[1], 14, 15, 16, 17, *NEW, 18]
    assert followed.agreement == 3 + 2  # counted through the confirmed edit


def test_a_learnt_deletion_drafts_the_copy_past_it() -> None:
    """The output drops a token of the source (a deletion, learnt like any edit): the
    followed copy skips it, also where the draft runs to the end of the stream (a chat's
    earlier answer)."""
    dropped = 7
    src = [1, 2, 3, 4, 5, 6, dropped, 10, 11, 12, 13, dropped, 14, 15, 16, 17, dropped, 18, 19, 20]
    f = CopyFollower()
    stream = src + [0] + [1, 2, 3, 4, 5, 6]
    f.align(stream, 5, 6)
    f.follow(stream)
    stream += [10, 11, 12, 13, 14]  # dropped twice: seen twice, so it is applied
    f.follow(stream)
    assert f.rewrites == {(dropped,): ()} and f.seen[(dropped,)] == 2
    for limit in (4, 8, 50):
        followed = f.draft(stream, limit)
        assert followed is not None
        want = [15, 16, 17, 18, 19, 20, 0, 1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14][:limit]
        assert followed.tokens == want


def test_relation_without_a_strong_copy_is_fresh() -> None:
    src = list(range(100, 120))
    stream = src + [0] + src[:5]
    f = CopyFollower()
    assert f.relation(4) == FRESH
    f.align(stream, 4, 5)
    f.follow(stream)
    assert f.relation(4) == FRESH  # 5 agreeing tokens may be chance
    stream += [300 + k for k in range(GONE)]  # the output never comes back
    f.follow(stream)
    assert f.draft(stream, 4) is None and f.relation(4) == FRESH


def test_a_contradicted_rewrite_is_dropped() -> None:
    src = [1, 2, 3, 4, OLD, 5, 6, 7, 8, OLD, 20, 21]
    stream = src + [0] + [1, 2, 3, 4]
    f = CopyFollower()
    f.align(stream, 3, 4)
    stream += [*NEW, 5, 6, 7, 8]
    f.follow(stream)
    assert f.rewrites == {(OLD,): NEW}
    stream += [OLD]  # this time the output kept the old name
    f.follow(stream)
    assert not f.rewrites
    followed = f.draft(stream, 4)
    assert followed is not None and followed.tokens == [20, 21, 0, 1]  # the source copied on


def test_an_unrelated_continuation_learns_nothing() -> None:
    src = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    stream = src + [0] + [1, 2, 3, 4] + [30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42]
    f = CopyFollower()
    f.align(stream[:15], 3, 4)
    f.follow(stream)
    assert not f.rewrites and f.draft(stream, 4) is None  # the output went elsewhere


def _replay(method: PromptLookup, prompt: list[int], output: list[int]) -> int:
    """Greedy steps a lookup needs to reproduce `output` (acceptance by exact match)."""
    method.begin(prompt, SamplingConfig())
    history, done, steps = prompt + output[:1], 1, 0
    while done < len(output):
        draft = method.propose(history, min(63, len(output) - done - 1)) if done < len(output) - 1 else Draft.empty()
        parent, n = -1, 0
        for tok in output[done:]:
            kids = [i for i in range(len(draft)) if draft.parents[i] == parent and draft.tokens[i] == tok]
            if not kids:
                break
            parent, n = kids[0], n + 1
        history += output[done:done + n + 1]
        done += n + 1
        steps += 1
    method.end()
    return steps


def test_a_rename_costs_fewer_steps_with_rewrites() -> None:
    rng = random.Random(3)
    curve = CostModel.fixed([1.0 + 0.02 * b for b in range(64)])  # verification nearly free
    for _ in range(5):
        source = _source(rng, 200)
        prompt = [0] + source + [0]
        output = _renamed(source)
        steps = {}
        for rewrites in (False, True):
            method = PromptLookup(rewrites=rewrites, costs=curve)
            steps[rewrites] = _replay(method, prompt, output)
        assert steps[True] < 0.7 * steps[False], steps


def test_no_edit_means_no_rewrites() -> None:
    rng = random.Random(4)
    source = _source(rng, 120)
    method = PromptLookup(costs=CostModel.fixed([1.0 + 0.02 * b for b in range(64)]))
    _replay(method, [0] + source + [0], source)
    assert method._follower.rewrites == {}
    _replay(method, [0] + source + [0], list(reversed(source)))  # no copy at all
    assert method._follower.rewrites == {}


def test_a_copy_grows_strong_through_its_edits() -> None:
    """Strength counts every token taken from the copy, across breaks: 10 + 3 + 3 >= 16."""
    src = list(range(100, 130))
    stream = src + [0] + src[:10]
    f = CopyFollower()
    f.align(stream, 9, 10)
    f.follow(stream)
    stream += [500] + src[11:14]  # source token 10 replaced, then 3 agree: resynced
    f.follow(stream)
    assert f._anchor is not None and not f._strong(f._anchor.copied)  # 13 copied
    stream += src[14:17]
    f.follow(stream)
    assert f._anchor is not None and f._strong(f._anchor.copied) and STRONG_RUN == 16


def _longest_match(stream: list[int], cap: int = 64) -> tuple[int, int]:
    """(end index, agreement) of the earlier occurrence agreeing longest with the stream's
    end (the latest among equals): the match prompt lookup would align the follower with."""
    n, best = len(stream), (-1, 0)
    for end in range(n - 1):
        k = 0
        while k < min(cap, end + 1) and stream[end - k] == stream[n - 1 - k]:
            k += 1
        if k >= best[1]:
            best = (end, k)
    return best


def _step_over(f: CopyFollower, stream: list[int], positions: list[int]) -> None:
    """Drive the follower as prompt lookup does: at each step, catch up, then align with
    the longest match."""
    for n in positions:
        f.follow(stream[:n])
        end, agreement = _longest_match(stream[:n])
        f.align(stream[:n], end, agreement)


def test_a_strong_copy_survives_a_chance_match_at_its_edit_whatever_the_steps() -> None:
    """The copy breaks at a first-seen rename, and its first new tokens, with the 7 before,
    also occur in the instruction (8 agreeing tokens: a jump). A caller stepping one token
    at a time must end up where one stepping over the edit does: following the copy."""
    src = list(range(100, 120)) + [OLD] + list(range(121, 140))
    instruction = [50, *src[13:20], *NEW, 51, 52, 53]
    base = len(instruction) + 1
    output = src[:20] + list(NEW) + src[21:26]
    stream = instruction + [0] + src + [0] + output
    start = len(stream) - len(output) + 5
    ends = {}
    for name, positions in (("token by token", list(range(start, len(stream) + 1))),
                            ("over the edit", [start, len(stream)])):
        f = CopyFollower()
        _step_over(f, stream, positions)
        followed = f.draft(stream, 5)
        ends[name] = (f._anchor.source if f._anchor else None, followed.tokens if followed else None)
    assert ends["over the edit"] == (base + 25, src[26:31])
    assert ends["token by token"] == ends["over the edit"]


def test_a_similar_line_ahead_is_not_the_copy_while_it_may_resume_through_an_edit() -> None:
    """The copy breaks at a rename; the output's last tokens, the new name's first one
    included, also occur at a similar line further down the source. Right after the
    break the copy is still the followed one (it may resume through an edit); once no
    edit can explain the gap, it is let go."""
    head, line = list(range(60, 80)), list(range(100, 118))
    src = head + line + [OLD] + list(range(120, 140)) + line + [NEW[0], 141, 142] + list(range(150, 170))
    similar_end = src.index(NEW[0])  # where the output's last 19 tokens also end
    output = head + line + [NEW[0]]  # copied 38 tokens, then began the new name
    stream = src + [0] + output
    f = CopyFollower()
    _step_over(f, stream, list(range(len(src) + 11, len(stream) + 1)))
    assert f._broke is not None and f._broke.source == src.index(OLD) and f._anchor is None
    f.align(stream, similar_end, 19)  # the similar line's match does not take the copy over
    assert f._broke is not None and f._anchor is None
    stream += list(range(300, 300 + 2 * MAX_SPAN))  # longer than any edit
    f.follow(stream)
    assert f._broke is None and f._anchor is None


def test_an_edit_repeated_at_a_similar_line_ahead_is_not_taken_for_the_copy_resuming() -> None:
    """A two-token rename whose new tokens, and the token after them, also occur at a
    similar line further down the source: three tokens in, they look like the copy
    resuming there. A caller stepping token by token must still find the edit once the
    copy resumes after it, and follow the copy, not the similar line."""
    head, line, mid = list(range(60, 80)), list(range(100, 118)), list(range(120, 140))
    src = head + line + [OLD] + mid + line + [*NEW, mid[0], 141, 142] + list(range(150, 170))
    similar = len(head + line + [OLD] + mid + line)  # where NEW follows the line again
    output = head + line + [*NEW] + mid[:6]
    stream = src + [0] + output
    f = CopyFollower()
    anchored = []
    for n in range(len(src) + 11, len(stream) + 1):
        _step_over(f, stream, [n])
        if f._anchor is not None:
            anchored.append(f._anchor.source)
    assert not any(similar <= s < similar + 4 for s in anchored)  # never at the similar line
    assert f._anchor is not None and f._anchor.source == src.index(mid[5])
    assert f.rewrites == {(OLD,): NEW}
