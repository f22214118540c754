from hypothesis import given, settings
from hypothesis import strategies as st

from pyaccel.stops import StopMatcher


def _reference(text: str, stops: list[str]) -> tuple[str, bool]:
    """Character by character: generation stops where a stop string first ends, and the
    text is cut at the start of the longest stop ending there."""
    for end in range(1, len(text) + 1):
        starts = [end - len(s) for s in stops if s and text[:end].endswith(s)]
        if starts:
            return text[: min(starts)], True
    return text, False


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.text(alphabet="ab\n<|>", max_size=6), max_size=12),
    stops=st.lists(st.text(alphabet="ab\n<|>", min_size=1, max_size=4), max_size=3),
)
def test_stream_matches_truncation_at_first_stop(pieces: list[str], stops: list[str]) -> None:
    m = StopMatcher(stops)
    out = "".join(m.push(p) for p in pieces) + m.flush()
    want, stopped = _reference("".join(pieces), stops)
    assert out == want
    assert m.stopped == stopped


def test_a_stop_inside_a_longer_pending_one_stops_first() -> None:
    # 'b' completes while '<b|' is still pending: generation stops at 'b', whatever the pieces.
    for pieces in (["<b", "|"], ["<b|"], ["<", "b", "|"]):
        m = StopMatcher(["b", "<b|"])
        assert "".join(m.push(p) for p in pieces) + m.flush() == "<"
        assert m.stopped


def test_holds_back_only_possible_stop_prefixes() -> None:
    m = StopMatcher(["</end>"])
    assert m.push("hello </e") == "hello "
    assert m.push("xtra") == "</extra"
    assert m.push(" </end> more") == " "
    assert m.stopped
    assert m.push("after") == ""
