"""Closing, first reads of the cost model and streams handed between threads, while a
generation runs: each waits its turn on the Model (llama.cpp's context is not
thread-safe; freeing it under a decode crashed the process). And what a Generator
refuses up front: a method object serving another Generator, bad stream arguments."""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

import pyaccel
from conftest import TEST_N_CTX

PROMPT = "Write a long story about a dragon who"
N_TOKENS = 24


def _background(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _stream_in_thread(gen: pyaccel.Generator, started: threading.Event) -> Callable[[], pyaccel.Result]:
    """Work that opens a stream, says so after its first piece, then finishes it."""
    def work() -> pyaccel.Result:
        stream = gen.stream(PROMPT, max_tokens=N_TOKENS)
        next(stream)
        started.set()
        *_, result = stream
        return result
    return work


@pytest.mark.parametrize("method", ["plain", "lookup"])
def test_closing_a_model_waits_for_the_generation_of_another_thread(gemma_path: Path, method: str) -> None:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX)
    gen = pyaccel.Generator(model, method)
    want = gen.generate(PROMPT, max_tokens=N_TOKENS).tokens
    started = threading.Event()
    thread, out = _background(_stream_in_thread(gen, started))
    assert started.wait(120)
    model.close()  # freed only once the other thread's stream has ended
    thread.join(120)
    assert "error" not in out, out.get("error")
    assert out["value"].tokens == want
    with pytest.raises(RuntimeError, match="Model is closed"):
        gen.generate(PROMPT, max_tokens=2)


def test_closing_a_generator_waits_for_its_generation_in_another_thread(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "lookup")
    started = threading.Event()
    thread, out = _background(_stream_in_thread(gen, started))
    assert started.wait(120)
    gen.close()
    thread.join(120)
    assert "error" not in out, out.get("error")
    assert len(out["value"].tokens) == N_TOKENS


@pytest.mark.parametrize("method", ["plain", "lookup", "auto"])
def test_a_model_closed_under_this_threads_open_stream_ends_it_with_a_clear_error(gemma_path: Path,
                                                                                  method: str) -> None:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX)
    stream = pyaccel.Generator(model, method).stream(PROMPT, max_tokens=N_TOKENS)
    next(stream)
    model.close()  # this thread holds the turn between two pieces: nothing decodes now
    with warnings.catch_warnings():
        warnings.simplefilter("error", pyaccel.ProposerFailedWarning)  # not "a bug in pyaccel"
        with pytest.raises(RuntimeError, match="Model is closed"):
            next(stream)


def test_the_first_read_of_the_cost_model_waits_for_a_generation(gemma_path: Path) -> None:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX)
    gen = pyaccel.Generator(model, "plain")  # plain never reads the cost model
    want = gen.generate(PROMPT, max_tokens=N_TOKENS).tokens
    started = threading.Event()
    thread, out = _background(_stream_in_thread(gen, started))
    assert started.wait(120)
    assert model.costs.max_nodes(64) >= 1  # calibrates: only once the stream has ended
    thread.join(120)
    model.close()
    assert "error" not in out, out.get("error")
    assert out["value"].tokens == want


def test_a_stream_resumed_on_another_thread_frees_the_first_to_wait_its_turn(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    first, second = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    try:
        stream = gen.stream(PROMPT, max_tokens=N_TOKENS)
        first.submit(next, stream).result(60)
        second.submit(next, stream).result(60)
        # The first thread no longer advances the stream: a call there waits for it, not raises.
        other = first.submit(gen.generate, "Hello", max_tokens=4)
        with pytest.raises(TimeoutError):
            other.result(1.0)
        rest = second.submit(list, stream).result(120)
        assert isinstance(rest[-1], pyaccel.Result)
        assert len(other.result(60).tokens) == 4
    finally:
        first.shutdown()
        second.shutdown()


def test_a_method_object_serves_one_open_generator(gemma: pyaccel.Model) -> None:
    method = pyaccel.PromptLookup()
    first = pyaccel.Generator(gemma, method)
    with pytest.raises(ValueError, match="already serves another open Generator"):
        pyaccel.Generator(gemma, method)
    first.close()
    assert pyaccel.Generator(gemma, method).generate("Hi", max_tokens=2).tokens  # free again


@pytest.mark.parametrize("kwargs, error, match", [
    ({"temperature": -1.0}, ValueError, "temperature"),
    ({"cache_prompt": "no"}, TypeError, "cache_prompt must be True or False"),
    ({"max_tokens": "3"}, TypeError, "max_tokens must be an int"),
])
def test_a_stream_checks_its_arguments_when_it_is_made(gemma: pyaccel.Model, kwargs: dict[str, Any],
                                                       error: type, match: str) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    with pytest.raises(error, match=match):
        gen.stream("Hi", **kwargs)  # not at the first next()
    gen.close()
    with pytest.raises(RuntimeError, match="Generator is closed"):
        gen.stream("Hi")


def test_kept_draft_tokens_past_a_stop_string_are_not_counted_accepted(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "auto")
    prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add"
    gen.generate(prompt, max_tokens=30)
    result = gen.generate(prompt, max_tokens=30, stop=":")
    stats = result.stats
    assert result.text.endswith(")") and stats.decoded_tokens < 8
    assert stats.accepted <= stats.decoded_tokens
    assert sum(stats.accepted_by.values()) == stats.accepted
    assert sum(stats.accepted_per_position) == stats.accepted


class SetAfter(threading.Event):
    """An event that reads as set from its `n`-th check on: a cancel at a chosen point."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.checks = n, 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.n


def test_a_cancelled_prompt_evaluation_stops_between_chunks_and_leaves_the_cache_sound(gemma_path: Path) -> None:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX, n_batch=32)
    gen = pyaccel.Generator(model, "lookup")
    prompt = " ".join(f"item{i}" for i in range(150))  # several 32-token chunks
    want = gen.generate(prompt, max_tokens=8, cache_prompt=False).tokens
    gen.reset()
    cancel = SetAfter(3)
    result = gen.generate(prompt, max_tokens=8, cancel=cancel)
    assert (result.finish_reason, result.text, result.tokens) == ("cancelled", "", [])
    assert cancel.checks == 3 and len(model.cache) == 0  # two chunks were evaluated, and dropped
    assert gen.generate(prompt, max_tokens=8).tokens == want
    model.close()


def test_a_cancelled_generation_ends_before_its_next_step_with_what_it_has(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    want = gen.generate(PROMPT, max_tokens=N_TOKENS).tokens
    result = gen.generate(PROMPT, max_tokens=N_TOKENS, cancel=SetAfter(5))  # the prompt, then 4 steps
    assert result.finish_reason == "cancelled"
    assert result.tokens == want[:4] and result.text == gemma.detokenize(want[:4])
    with pytest.raises(TypeError, match="cancel must be a threading.Event"):
        gen.stream(PROMPT, cancel=True)  # type: ignore[arg-type]
