"""`Generator`: a decoding method over a Model, with the text / chat / streaming API."""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from . import defaults
from .decode import Request, check_request, run
from .methods import make_method
from .methods.base import Proposer
from .model import Message, Model
from .types import Result, SamplingConfig, StepTrace


def _as_model(target: Model | str | os.PathLike[str]) -> Model:
    return target if isinstance(target, Model) else Model(target)


def _as_proposer(method: str | Proposer | None) -> Proposer:
    if method is None:
        method = defaults.METHOD
    if isinstance(method, str):
        return make_method(method)
    if not isinstance(method, Proposer):
        raise TypeError(f"method must be a method name or a pyaccel.Proposer subclass instance, "
                        f"got {type(method).__name__}: derive your proposer from pyaccel.Proposer")
    return method


def _claim(method: Proposer, generator: "Generator") -> None:
    """A method object serves one open Generator (bind, then close, once): a second one
    would rebind it to its own target under the first, and closing either would close it
    under the other."""
    owner_ref = getattr(method, "_pyaccel_generator", None)
    owner = owner_ref() if owner_ref is not None else None
    if owner is not None and not owner._closed:
        raise ValueError(f"this {type(method).__name__} object already serves another open Generator: give each "
                         "Generator its own method object (or a method spec string such as 'lookup'), or close "
                         "the other Generator first")
    try:
        method._pyaccel_generator = weakref.ref(generator)  # type: ignore[attr-defined]
    except AttributeError:  # a proposer class with __slots__: not checked
        pass


def _token_ids(prompt: object) -> list[int]:
    """A prompt given as token ids, checked to be ints (bytes, floats or digit strings are
    mistakes, never ids)."""
    if isinstance(prompt, (bytes, bytearray, memoryview)):
        raise TypeError(f"prompt must be text or a sequence of token ids, got {type(prompt).__name__}: "
                        "decode it to str first")
    try:
        items = list(prompt)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"prompt must be text or a sequence of token ids, got {type(prompt).__name__}") from None
    bad = [t for t in items if isinstance(t, bool) or not isinstance(t, (int, np.integer))]
    if bad:
        raise TypeError(f"prompt token ids must be ints, got {type(bad[0]).__name__} {bad[0]!r}")
    return [int(t) for t in items]


def _stops(stop: str | Sequence[str] | None) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise TypeError(f"stop must be a string or a list of strings, got {stop!r}")
    if "" in stop:
        raise ValueError("stop holds an empty string, which would stop nothing: give the text that ends an "
                         "answer (e.g. stop=\"\\n\\n\"), or no stop")
    return list(stop)


class Generator:
    """Generates text from `target` with a decoding method (None: `defaults.METHOD`, "auto").

    `method` is a proposer object (e.g. `pyaccel.DraftModel(...)`) or a method spec such as
    "lookup" or "draft:length=3". Calls on the same Generator reuse the cached common prompt
    prefix. Calls on one Model from several threads (through any of its Generators) run
    one at a time, in arrival order.

    `trace`, a callable, sees every decode step of every call as a `pyaccel.StepTrace`: the
    context depth, the batch, the drafted, accepted and committed tokens and the step's times
    (the proposer's, the target's pass, verification). It runs in the generating thread after
    the step's tokens are committed, before the stream yields their text; what it raises ends
    the generation. Without one (None, the default) the loop records nothing per step.
    """

    def __init__(self, target: Model | str | os.PathLike[str], method: str | Proposer | None = None, *,
                 trace: Callable[[StepTrace], None] | None = None) -> None:
        if trace is not None and not callable(trace):
            raise TypeError(f"trace must be a callable taking a pyaccel.StepTrace (or None), got "
                            f"{type(trace).__name__}")
        self.target = _as_model(target)
        self.method: Proposer = _as_proposer(method)
        self.trace = trace
        self._closed = False
        _claim(self.method, self)
        with self.target.turn():  # binding may measure costs on the target's context
            self.method.bind(self.target)

    def _request(self, prompt: str | Sequence[int], max_tokens: int, stop: str | Sequence[str] | None,
                 sampling: SamplingConfig, cache_prompt: bool) -> Request:
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError("the prompt is empty: give at least one character of text")
            tokens = self.target.tokenize(prompt)
        else:
            tokens = _token_ids(prompt)
        return Request(prompt=tokens, max_tokens=max_tokens, sampling=sampling, stop=_stops(stop),
                       cache_prompt=bool(cache_prompt))

    def stream(
        self,
        prompt: str | Sequence[int],
        *,
        max_tokens: int = defaults.MAX_TOKENS,
        temperature: float = defaults.TEMPERATURE,
        top_k: int = defaults.TOP_K,
        top_p: float = defaults.TOP_P,
        min_p: float = defaults.MIN_P,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        cache_prompt: bool = True,
        cancel: threading.Event | None = None,
    ) -> Iterator[str | Result]:
        """Yield text pieces as they are decided, then the `Result`. `cache_prompt=False`
        prefills the whole prompt afresh instead of reusing the prefix an earlier call left
        in the model's cache (slower, but a greedy answer then does not depend on it).
        `cancel`: a `threading.Event` that, set from any thread, ends the generation before
        its next prompt chunk or decode step, with finish_reason "cancelled" (a stop button;
        a long prompt's evaluation cannot otherwise be left). Arguments are checked here,
        before the first piece is asked for."""
        self._check_open()
        sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, seed=seed)
        sampling.validate()
        if seed == -1:  # llama.cpp's "random seed"
            sampling = replace(sampling, seed=None)
        if not isinstance(cache_prompt, (bool, np.bool_)):
            raise TypeError(f"cache_prompt must be True or False, got {type(cache_prompt).__name__} {cache_prompt!r}")
        if cancel is not None and not isinstance(cancel, threading.Event):
            raise TypeError(f"cancel must be a threading.Event, got {type(cancel).__name__}")
        req = replace(self._request(prompt, max_tokens, stop, sampling, bool(cache_prompt)), cancel=cancel)
        check_request(self.target.backend, req)
        return self._run(req)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Generator is closed (close() released what its method opened): "
                               "make a new Generator")
        if self.target.closed:
            raise RuntimeError("this Generator's Model is closed: open the model again and make a new Generator")

    def _run(self, req: Request) -> Iterator[str | Result]:
        turns = self.target.turns
        with self.target.turn():
            before = dict(self.method.counters)
            for item in run(self.target.backend, self.target.cache, self.method, req, self.trace):
                if isinstance(item, Result):
                    item.stats.accepted_by = accepted_by(self.method, before, item.stats.accepted)
                yield item
                turns.adopt()  # resumed, maybe on another thread (a pool): it holds the turn now
                self._check_open()  # closed between two pieces, by this thread

    def generate(self, prompt: str | Sequence[int], **kwargs: Any) -> Result:
        """Generate a completion of `prompt`; keyword arguments as for `stream`."""
        return _last(self.stream(prompt, **kwargs))

    def chat_stream(self, messages: Sequence[Message], **kwargs: Any) -> Iterator[str | Result]:
        """`stream` over `messages` as the model's chat prompt (`Model.chat_prompt`)."""
        return self.stream(self.target.chat_prompt(messages), **kwargs)

    def chat(self, messages: Sequence[Message], **kwargs: Any) -> Result:
        """`generate` over `messages` as the model's chat prompt (`Model.chat_prompt`)."""
        return _last(self.chat_stream(messages, **kwargs))

    def reset(self) -> None:
        """Forget every cached prefix (the target's and the method's), so the next call
        prefills from scratch."""
        with self.target.turn():
            self.target.cache.truncate(0)
            self.method.reset()

    def close(self) -> None:
        """Release what the method opened (the target Model stays open); the Generator
        refuses work afterwards. Closing twice is harmless. A generation running in another
        thread finishes first; a stream this thread still holds open fails at its next step."""
        with self.target.turns.exclusive():  # a generation in another thread finishes first
            if not self._closed:
                self._closed = True
                self.method.close()

    def __enter__(self) -> "Generator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def accepted_by(method: Proposer, before: Mapping[str, float], accepted: int) -> dict[str, int]:
    """This generation's accepted draft tokens per proposer: from the method's
    `accepted_<proposer>` counters where it keeps them (auto), else all the method's own.
    The counters also hold kept draft tokens past a stop string or the end token, which
    are not in the output (`accepted`): those few come off the largest count."""
    after = method.counters
    by = {k[len("accepted_"):]: int(round(v - before.get(k, 0.0))) for k, v in after.items()
          if k.startswith("accepted_") and k != "accepted_shared"}
    by = {k: v for k, v in by.items() if v > 0}
    if not by:
        return {method.name: accepted} if accepted else {}
    excess = sum(by.values()) - accepted
    for name in sorted(by, key=by.__getitem__, reverse=True):
        cut = min(max(0, excess), by[name])
        by[name] -= cut
        excess -= cut
    return {k: v for k, v in by.items() if v > 0}


def _last(items: Iterator[str | Result]) -> Result:
    result = None
    for item in items:
        result = item
    assert isinstance(result, Result)
    return result
