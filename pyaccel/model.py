"""The public API: `Model` (a GGUF model with its context) and `Generator` (a method over it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from . import registry
from .backend import ContextConfig, LlamaBackend
from .decode import NoDraft, Request, TargetCache, run
from .types import DEFAULT_MAX_TOKENS, Proposer, Result, SamplingConfig

Message = Mapping[str, Any]


class Model:
    """A GGUF model loaded in llama.cpp, by registry name (pulled on first use) or by path.

    n_seq_max bounds how many root-to-leaf paths a draft tree may have; embeddings=True also
    returns the final hidden states (Medusa heads need them).
    """

    def __init__(
        self,
        path_or_name: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        n_seq_max: int = 8,
        n_batch: int = 512,
        embeddings: bool = False,
        flash_attn: bool | None = None,
        verbose: bool = False,
        progress: bool = True,
    ) -> None:
        if path_or_name is None:
            path_or_name = registry.load_registry().default
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16 tokens, got {n_ctx}")
        self.path: Path = registry.resolve_model(path_or_name, progress=progress)
        self.name: str = os.fspath(path_or_name) if not registry.is_local_path(path_or_name) else self.path.name
        config = ContextConfig(n_ctx=n_ctx, n_threads=n_threads, n_gpu_layers=n_gpu_layers,
                               n_seq_max=n_seq_max, n_batch=n_batch, embeddings=embeddings,
                               flash_attn=flash_attn, verbose=verbose)
        self.backend = LlamaBackend(self.path, config)
        self.cache = TargetCache(self.backend)

    @property
    def registry_spec(self) -> registry.ModelSpec | None:
        models = registry.load_registry().models
        return models.get(self.name)

    @property
    def n_vocab(self) -> int:
        return self.backend.n_vocab

    @property
    def n_ctx(self) -> int:
        return self.backend.n_ctx

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return self.backend.tokenize(text, add_special=add_special, parse_special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.backend.detokenize(tokens)

    def chat_prompt(self, messages: Sequence[Message]) -> list[int]:
        """Tokens of `messages` rendered with the model's own chat template (from its GGUF metadata)."""
        if not messages:
            raise ValueError("messages is empty: give at least one {'role': ..., 'content': ...}")
        formatted = self.backend.chat_formatter()(messages=list(messages))
        return self.backend.tokenize(formatted.prompt, add_special=not formatted.added_special, parse_special=True)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Model({self.name!r}, n_ctx={self.n_ctx})"


def _as_model(target: Model | str | os.PathLike[str]) -> Model:
    return target if isinstance(target, Model) else Model(target)


def _make_proposer(method: str | Proposer | None, target: Model) -> Proposer:
    if method is None or method == "plain":
        return NoDraft()
    if isinstance(method, str):
        from .methods import make_method

        return make_method(method, target)
    return method


class Generator:
    """Generates text from `target` with a decoding method (None: plain decoding).

    `method` is a proposer object (e.g. `pyaccel.DraftModel(...)`) or a method name.
    Calls to generate on the same Generator reuse the cached common prompt prefix.
    """

    def __init__(self, target: Model | str | os.PathLike[str], method: str | Proposer | None = None) -> None:
        self.target = _as_model(target)
        self.method: Proposer = _make_proposer(method, self.target)
        bind = getattr(self.method, "bind", None)
        if bind is not None:
            bind(self.target)

    def _request(self, prompt: str | Sequence[int], max_tokens: int, stop: str | Sequence[str] | None,
                 sampling: SamplingConfig) -> Request:
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError("the prompt is empty: give at least one character of text")
            tokens = self.target.tokenize(prompt)
        else:
            tokens = [int(t) for t in prompt]
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        return Request(prompt=tokens, max_tokens=max_tokens, sampling=sampling, stop=stops)

    def stream(
        self,
        prompt: str | Sequence[int],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
    ) -> Iterator[str | Result]:
        """Yield text pieces as they are decided, then the `Result`."""
        sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        sampling.validate()
        req = self._request(prompt, max_tokens, stop, sampling)
        yield from run(self.target.backend, self.target.cache, self.method, req)

    def generate(self, prompt: str | Sequence[int], **kwargs: Any) -> Result:
        """Generate a completion of `prompt`; keyword arguments as for `stream`."""
        return _last(self.stream(prompt, **kwargs))

    def chat_stream(self, messages: Sequence[Message], **kwargs: Any) -> Iterator[str | Result]:
        """`stream` over the model's chat template applied to `messages`."""
        return self.stream(self.target.chat_prompt(messages), **kwargs)

    def chat(self, messages: Sequence[Message], **kwargs: Any) -> Result:
        """`generate` over the model's chat template applied to `messages`."""
        return _last(self.chat_stream(messages, **kwargs))


def _last(items: Iterator[str | Result]) -> Result:
    result = None
    for item in items:
        result = item
    assert isinstance(result, Result)
    return result
