"""`Model`: a GGUF model loaded in llama.cpp, with its one KV-cache record and its one cost model."""

from __future__ import annotations

import contextlib
import os
import shlex
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import chat_format, defaults, registry, vocab
from .backend import ContextConfig, LlamaBackend
from .cost_model import CostModel
from .kvcache import TargetCache
from .turns import TurnLock

Message = Mapping[str, Any]

# llama.cpp's context and model parameters are C ints: ctypes keeps only the low bits of a
# larger Python int (n_ctx = 2**32 + 16 became 16, and llama.cpp aborted the process).
C_INT_MAX = 2**31 - 1
# ggml's thread pool holds at most this many threads (GGML_MAX_N_THREADS); far more threads
# than that abort the process (std::bad_alloc).
MAX_THREADS = 512


def _check_int(name: str, value: object, least: int, most: int, rule: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not least <= value <= most:
        raise ValueError(f"{name} must be {rule}, got {value}")


def check_model_options(n_ctx: object, n_threads: object, n_gpu_layers: object, n_seq_max: object,
                        n_batch: object, flash_attn: object, flags: Mapping[str, object]) -> None:
    """TypeError or ValueError naming the first wrong option of `Model(...)`, before any
    file is read; `flags` are the options that are True or False."""
    _check_int("n_ctx", n_ctx, 16, C_INT_MAX, f"at least 16 tokens (and at most {C_INT_MAX})")
    if n_threads is not None:
        _check_int("n_threads", n_threads, 0, MAX_THREADS,
                   f">= 1 (0 or None: the default) and at most {MAX_THREADS}, llama.cpp's most")
    _check_int("n_gpu_layers", n_gpu_layers, -1, C_INT_MAX, "-1 (every layer) or >= 0")
    _check_int("n_seq_max", n_seq_max, 1, C_INT_MAX, ">= 1")
    _check_int("n_batch", n_batch, 1, C_INT_MAX, ">= 1 (tokens llama.cpp evaluates in one call)")
    if flash_attn is not None and not isinstance(flash_attn, (bool, np.bool_)):
        raise TypeError(f"flash_attn must be True, False or None (llama.cpp decides), got "
                        f"{type(flash_attn).__name__} {flash_attn!r}")
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


class Model:
    """A GGUF model loaded in llama.cpp, by registry name (pulled on first use) or by path.

    n_seq_max bounds how many root-to-leaf paths a draft tree may have; embeddings=True also
    returns the final hidden states (Medusa heads need them). amx=True lets llama.cpp put
    weights in its AMX buffer type where it has one: off by default, since llama.cpp's AMX
    matmul crashes on some Intel CPUs that report AMX (the weights then go where llama.cpp
    puts them without AMX: its repacked CPU kernels, at their usual speed).
    """

    def __init__(
        self,
        path_or_name: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = defaults.N_CTX,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        n_seq_max: int = defaults.N_SEQ_MAX,
        n_batch: int = defaults.N_BATCH,
        embeddings: bool = False,
        flash_attn: bool | None = None,
        amx: bool = False,
        verbose: bool = False,
        progress: bool = True,
    ) -> None:
        check_model_options(n_ctx, n_threads, n_gpu_layers, n_seq_max, n_batch, flash_attn,
                            {"embeddings": embeddings, "amx": amx, "verbose": verbose, "progress": progress})
        if path_or_name is None:
            path_or_name = registry.load_registry().default
        self.path: Path = registry.resolve_model(path_or_name, progress=progress)
        self.name: str = registry.model_name(path_or_name, self.path)
        config = ContextConfig(n_ctx=n_ctx, n_threads=n_threads, n_gpu_layers=n_gpu_layers,
                               n_seq_max=n_seq_max, n_batch=n_batch, embeddings=embeddings,
                               flash_attn=flash_attn, amx=amx, verbose=verbose)
        self.backend = LlamaBackend(self.path, config)
        if 0 < self.backend.n_ctx_train < n_ctx:
            warnings.warn(f"n_ctx={n_ctx} is beyond the {self.backend.n_ctx_train} tokens {self.path.name} was "
                          "trained on: past those, expect worse output (and the cache costs memory for every token)",
                          stacklevel=2)
        self.cache = TargetCache(self.backend)
        self.progress = progress
        self._costs: CostModel | None = None
        self._turns = TurnLock()

    def turn(self) -> "contextlib.AbstractContextManager[None]":
        """Exclusive use of this model's context; callers from other threads wait in
        arrival order (llama.cpp's context is not thread-safe). Generators take it for
        every generation; take it yourself around direct backend calls."""
        return self._turns.turn()

    @property
    def turns(self) -> TurnLock:
        """The lock behind `turn()`."""
        return self._turns

    @property
    def closed(self) -> bool:
        return self.backend.closed

    @property
    def costs(self) -> CostModel:
        """The cost model of this model on this device (cached on disk per model file,
        device, threads and offload): the full measurement if `pyaccel models costs
        --remeasure` made one, else learnt from this model's own decodes after a calibration
        of a few seconds on first use. Assign a `CostModel.fixed(...)` to study another
        device's curve."""
        if self._costs is None:
            with self._turns.exclusive():  # a calibration decodes: not while another thread generates
                if self._costs is None:
                    # A calibration needs room in the context: it starts from an empty cache (the
                    # prefix of the last prompt is dropped once), so any context size works.
                    self.cache.truncate(0)
                    self.costs = CostModel.of(self.backend, progress=self.progress)
        assert self._costs is not None
        return self._costs

    @costs.setter
    def costs(self, value: CostModel) -> None:
        self._costs = value
        self.cache.recorder = value.learnt  # only a learnt curve learns from this model's decodes

    @property
    def registry_spec(self) -> registry.ModelSpec | None:
        """The registry entry of this model, by name or, opened by path, by file name and size."""
        return registry.spec_for(self.name, self.path)

    @property
    def cli_arg(self) -> str:
        """How `-m` names this model in a command to run, shell-quoted: its registry name
        (also when it was opened by a path to the registry's file), else its path."""
        spec = self.registry_spec
        return shlex.quote(spec.name if spec is not None else os.fspath(self.path))

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
        """Tokens of `messages` up to where the assistant's answer begins, rendered with the
        model's own chat template (from its GGUF metadata), or with its family's turn format
        when the file ships none and pyaccel knows the family's (Gemma)."""
        plain = chat_format.normalize(messages)
        if not plain:
            raise ValueError("messages is empty: give at least one {'role': ..., 'content': ...}")
        if self.backend.chat_template is not None:
            formatter = self.backend.chat_formatter()

            def render(m: list[dict[str, str]]) -> tuple[str, bool]:
                formatted = formatter(messages=m)  # BOS is added unless the template wrote it
                return formatted.prompt, not formatted.added_special

            return vocab.tokenize_chat(self.backend, render, plain)
        fmt = chat_format.TURN_FORMATS.get(self.backend.metadata("general.architecture") or "")
        if fmt is None:
            raise ValueError(f"{self.path.name} has no chat template in its metadata and pyaccel knows no turn "
                             "format for its architecture: give the prompt as raw text (generate() in Python, "
                             "no --chat in the CLI) or use a GGUF file with a chat template")
        return vocab.tokenize_chat(self.backend, lambda m: (fmt.render(m), True), plain)

    def close(self) -> None:
        """Free the model. A generation running in another thread finishes first (close
        waits its turn); a stream this thread still holds open fails at its next step."""
        with self._turns.exclusive():
            if self._costs is not None and self._costs.learnt is not None:
                self._costs.learnt.save()
            self.backend.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Model({self.name!r}, n_ctx={self.n_ctx})"
