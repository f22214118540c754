"""Chat messages as OpenAI clients send them, checked and normalized, and the built-in turn
formats for GGUF files that ship no chat template (Gemma 3 270M has none in its metadata).
`Model.chat_prompt` renders them; `Generator.chat`, `pyaccel chat` and `pyaccel serve` go
through it."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

# Roles a chat may carry; "developer" is OpenAI's newer name for "system".
ROLES = ("system", "developer", "user", "assistant")


@dataclass(frozen=True)
class TurnFormat:
    """One family's turn markup: every turn is `turn` with {role} and {content}; the
    assistant's answer opens with `generation`. The system text goes in front of the
    first user message (the family has no system turn)."""

    turn: str
    roles: Mapping[str, str]
    generation: str

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The prompt text. The family has no system role: system text opens the user turn
        right after it (a user turn of its own before an assistant turn or at the end), so
        a system message added later in a conversation leaves the earlier turns, and their
        cached prefix, as they were."""
        turns: list[dict[str, str]] = []
        pending: list[str] = []
        for m in messages:
            if m["role"] == "system":
                pending.append(m["content"])
                continue
            if pending:
                own = [m["content"]] if m["role"] == "user" else []
                turns.append({"role": "user", "content": "\n\n".join(pending + own)})
                pending = []
                if own:
                    continue
            turns.append(dict(m))
        if pending:
            turns.append({"role": "user", "content": "\n\n".join(pending)})
        body = "".join(self.turn.format(role=self.roles[m["role"]], content=m["content"]) for m in turns)
        return body + self.generation


_GEMMA = TurnFormat("<start_of_turn>{role}\n{content}<end_of_turn>\n",
                    MappingProxyType({"user": "user", "assistant": "model"}), "<start_of_turn>model\n")
# By `general.architecture`: the formats llama.cpp itself falls back to for these families.
TURN_FORMATS: Mapping[str, TurnFormat] = MappingProxyType({"gemma": _GEMMA, "gemma2": _GEMMA, "gemma3": _GEMMA})


def message_text(content: Any) -> str:
    """The text of an OpenAI message content: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported")
            texts.append(part["text"])
        return "\n".join(texts)
    raise ValueError(f"message content must be a string or a list of text parts, got {type(content).__name__}")


def normalize(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Plain {"role", "content"} dicts with string content; "developer" becomes "system".
    Raises TypeError when `messages` is not a list of mappings and ValueError naming the
    message at fault otherwise."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts, got "
                        f"{type(messages).__name__} (for a plain prompt use generate())")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"messages[{i}] must be a {{'role': ..., 'content': ...}} dict, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        if "content" not in message and role != "assistant":
            raise ValueError(f"messages[{i}] ({role}) has no 'content'")
        out.append({"role": "system" if role == "developer" else str(role),
                    "content": message_text(message.get("content"))})
    return out
