"""Chat messages checked and normalized, and the built-in turn formats (pyaccel.chat_format):
no model needed."""

from __future__ import annotations

import pytest

from pyaccel.chat_format import TURN_FORMATS, normalize


def test_gemma_turn_format_folds_the_system_prompt() -> None:
    messages = normalize([{"role": "developer", "content": "Be brief."},
                          {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                          {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Name?"}])
    assert TURN_FORMATS["gemma3"].render(messages) == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nName?<end_of_turn>\n<start_of_turn>model\n")


def test_a_later_system_message_opens_the_next_user_turn_and_leaves_the_earlier_ones() -> None:
    fmt = TURN_FORMATS["gemma3"]
    before = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    later = fmt.render(before + [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name?"}])
    assert later.startswith(fmt.render(before)[:-len(fmt.generation)])
    assert later.endswith("<start_of_turn>user\nBe brief.\n\nName?<end_of_turn>\n<start_of_turn>model\n")
    alone = fmt.render([{"role": "system", "content": "S"}, {"role": "assistant", "content": "A"}])
    assert alone.startswith("<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\nA")


def test_an_assistant_turn_may_have_no_content() -> None:
    assert normalize([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None},
                      {"role": "assistant"}]) == [{"role": "user", "content": "Hi"},
                                                  {"role": "assistant", "content": ""},
                                                  {"role": "assistant", "content": ""}]


@pytest.mark.parametrize(
    ("messages", "error", "match"),
    [
        ("hello", TypeError, "list of .* dicts, got str .*generate\\(\\)"),
        (["hi"], TypeError, "messages\\[0\\] must be a .* dict, got str"),
        (None, TypeError, "got NoneType"),
        ([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}], ValueError, "messages\\[1\\].role"),
        ([{"role": "tool", "content": "x"}], ValueError, "role"),
        ([{"role": "user"}], ValueError, "messages\\[0\\] \\(user\\) has no 'content'"),
        ([{"role": "user", "content": 3}], ValueError, "string or a list of text parts"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}], ValueError, "text content parts"),
    ],
    ids=["str", "list-of-str", "none", "unknown-role", "tool-role", "no-content", "int-content", "image-part"],
)
def test_malformed_messages_are_named(messages: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        normalize(messages)  # type: ignore[arg-type]
