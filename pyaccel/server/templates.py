"""Chat prompts for `pyaccel chat` and `pyaccel serve`: messages as OpenAI clients send
them, rendered with the model's own chat template, or with a built-in turn format for
GGUF files that ship none (Gemma 3 270M has no template in its metadata)."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from ..model import Model

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
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        if system and turns and turns[0]["role"] == "user":
            turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
        elif system:
            turns.insert(0, {"role": "user", "content": system})
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
    """Plain {"role", "content"} dicts with string content; "developer" becomes "system"."""
    out = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(ROLES)}, got {role!r}")
        out.append({"role": "system" if role == "developer" else str(role),
                    "content": message_text(message.get("content"))})
    return out


def chat_tokens(model: "Model", messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Prompt tokens of `messages`, ending where the assistant's answer begins."""
    plain = normalize(messages)
    if not plain:
        raise ValueError("messages is empty: give at least one {'role': ..., 'content': ...}")
    if model.backend.metadata("tokenizer.chat_template"):
        return model.chat_prompt(plain)
    fmt = TURN_FORMATS.get(model.backend.metadata("general.architecture") or "")
    if fmt is None:
        raise ValueError(f"{model.path.name} has no chat template in its metadata and pyaccel knows no turn "
                         "format for its architecture: use a GGUF file with a chat template")
    return model.tokenize(fmt.render(plain))
