"""Request bodies (validated with pydantic) and the response objects of the OpenAI API,
with pyaccel's speculation figures as an extra `timings` object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import defaults
from ..types import MAX_TOP_K, Result

# OpenAI accepts at most this many stop sequences.
MAX_STOPS = 4


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)  # as strict as the request around it: "yes" is no bool

    include_usage: bool = False


class SamplingRequest(BaseModel):
    """Fields shared by /v1/completions and /v1/chat/completions. top_k and min_p are
    extensions (as llama.cpp's server has them); fields a client sends that this server
    does not know are ignored, those it knows but cannot honour are refused. Types are
    strict, as the Python API's and OpenAI's: "3" or true is not a number of tokens."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(defaults.TEMPERATURE, ge=0.0, le=2.0)
    top_p: float = Field(defaults.TOP_P, gt=0.0, le=1.0)
    top_k: int = Field(defaults.TOP_K, ge=0, le=MAX_TOP_K)
    min_p: float = Field(defaults.MIN_P, ge=0.0, le=1.0)
    seed: int | None = None
    stop: Union[str, list[str], None] = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: Any = None
    logit_bias: Any = None
    response_format: Any = None
    # An extension, as llama.cpp's server has it: false prefills the prompt afresh.
    cache_prompt: bool = True

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data: Any) -> Any:
        """OpenAI's API lets a client send null for any optional field (many clients send
        every field they know, unset ones as null): null means the default."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="after")
    def _supported(self) -> "SamplingRequest":
        if self.n != 1:
            raise ValueError("n: only n=1 is supported (one choice per request)")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                raise ValueError(f"{name}: penalties are not supported (leave it 0)")
        if self.logprobs:
            raise ValueError("logprobs: log probabilities are not supported")
        if self.logit_bias:
            raise ValueError("logit_bias: biasing tokens is not supported")
        if self.response_format not in (None, {"type": "text"}):
            raise ValueError("response_format: only {\"type\": \"text\"} is supported (no JSON mode or schema)")
        if isinstance(self.stop, list) and len(self.stop) > MAX_STOPS:
            raise ValueError(f"stop: at most {MAX_STOPS} stop sequences")
        return self

    @property
    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: Union[str, list[dict[str, Any]], None] = None


class ChatRequest(SamplingRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    tools: Any = None
    functions: Any = None

    @model_validator(mode="after")
    def _chat_supported(self) -> "ChatRequest":
        if self.tools:
            raise ValueError("tools: tool calls are not supported")
        if self.functions:
            raise ValueError("functions: function calls are not supported")
        if self.max_tokens is None:
            self.max_tokens = self.max_completion_tokens
        return self


class CompletionRequest(SamplingRequest):
    prompt: Union[str, list[str], list[int]]
    echo: bool = False
    suffix: str | None = None
    best_of: int = 1

    @model_validator(mode="after")
    def _completion_supported(self) -> "CompletionRequest":
        if isinstance(self.prompt, list) and self.prompt and isinstance(self.prompt[0], str):
            if len(self.prompt) != 1:
                raise ValueError("prompt: only one prompt per request is supported")
        if not self.prompt or self.prompt == [""]:
            raise ValueError("prompt: the prompt is empty")
        if self.echo or self.suffix or self.best_of != 1:
            raise ValueError("echo, suffix and best_of are not supported")
        return self


def usage(result: Result) -> dict[str, int]:
    s = result.stats
    return {"prompt_tokens": s.prompt_tokens, "completion_tokens": s.new_tokens,
            "total_tokens": s.prompt_tokens + s.new_tokens}


@dataclass(frozen=True)
class TokenLimit:
    """The most new tokens an answer got, and whether that is less than its request asked
    (the server's --max-tokens capped it)."""

    max_tokens: int
    capped: bool


def timings(result: Result, method: str, limit: TokenLimit) -> dict[str, Any]:
    """How the answer was made: prefill and decode time, speed, the speculation figures and
    the token limit applied."""
    s = result.stats
    return {"prompt_tokens": s.prompt_tokens, "cached_prompt_tokens": s.cached_prompt_tokens,
            "prompt_s": s.prefill_s, "decode_s": s.decode_s, "tokens_per_s": s.tokens_per_s,
            "tau": s.tau, "drafted": s.drafted, "accepted": s.accepted,
            "acceptance_rate": s.acceptance_rate, "method": method,
            "max_tokens": limit.max_tokens, "max_tokens_capped": limit.capped}


@dataclass(frozen=True)
class Shape:
    """How one endpoint words its answer (chat: messages and deltas; completions: text)."""

    chat: bool
    id: str
    created: int
    model: str
    method: str
    limit: TokenLimit
    # A stream's usage goes in a chunk of its own after the last one, as OpenAI's does,
    # only when the request asks for it (stream_options.include_usage).
    include_usage: bool = False

    def _object(self, chunk: bool) -> str:
        if self.chat:
            return "chat.completion.chunk" if chunk else "chat.completion"
        return "text_completion"

    def _head(self, chunk: bool) -> dict[str, Any]:
        return {"id": self.id, "object": self._object(chunk), "created": self.created, "model": self.model}

    def _choice(self, text: str | None, finish: str | None, chunk: bool, first: bool = False) -> dict[str, Any]:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        if not chunk:
            return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                    "finish_reason": finish}
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        if text is not None:
            delta["content"] = text
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def response(self, result: Result) -> dict[str, Any]:
        """The whole answer of a non-streaming request."""
        return {**self._head(False), "choices": [self._choice(result.text, result.finish_reason, False)],
                "usage": usage(result), "timings": timings(result, self.method, self.limit)}

    def _stream_head(self) -> dict[str, Any]:
        head = self._head(True)
        if self.include_usage:  # OpenAI then sends the field in every chunk, null until the usage chunk
            head["usage"] = None
        return head

    def chunk(self, text: str, first: bool = False) -> dict[str, Any]:
        """A streamed piece; the first one of a chat carries the role."""
        return {**self._stream_head(), "choices": [self._choice(text, None, True, first)]}

    def last_chunk(self, result: Result) -> dict[str, Any]:
        """The one chunk with a finish_reason, with the timings."""
        return {**self._stream_head(),
                "choices": [self._choice(None if self.chat else "", result.finish_reason, True)],
                "timings": timings(result, self.method, self.limit)}

    def usage_chunk(self, result: Result) -> dict[str, Any]:
        """The chunk after the last one when the request asked for usage: no choices."""
        return {**self._head(True), "choices": [], "usage": usage(result)}
