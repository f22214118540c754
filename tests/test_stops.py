from hypothesis import given, settings
from hypothesis import strategies as st

from pyaccel.stops import StopMatcher


def _reference(text: str, stops: list[str]) -> tuple[str, bool]:
    cuts = [text.find(s) for s in stops if s and s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)


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


def test_holds_back_only_possible_stop_prefixes() -> None:
    m = StopMatcher(["</end>"])
    assert m.push("hello </e") == "hello "
    assert m.push("xtra") == "</extra"
    assert m.push(" </end> more") == " "
    assert m.stopped
    assert m.push("after") == ""
