"""The fault suite: concurrent calls, bad proposers, NaN logits, tiny contexts, bad
arguments. Every fault is a clear error (or a wait), and the Model stays usable."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel.types import AuxTokens, Draft

from lossless import assert_greedy_equivalent

PROMPTS = ["def add(a, b):", "The capital of France is", "for i in range(10):", "Once upon a time",
           "import os\n", "SELECT * FROM", "x = [1, 2, 3]\n", "Dear Sir,"]
N_TOKENS = 12
# More new tokens than one verification batch holds (the cost model's cap is 64).
LONGER_THAN_A_BATCH = 80


# ---- concurrency ---------------------------------------------------------------------------


def test_eight_threads_over_three_generators_equal_the_same_calls_in_sequence(gemma: pyaccel.Model) -> None:
    gens = [pyaccel.Generator(gemma, "plain"), pyaccel.Generator(gemma, "lookup"), pyaccel.Generator(gemma, "ngram")]
    jobs = [(gens[i % 3], p) for i, p in enumerate(PROMPTS)]
    want = []
    for gen, prompt in jobs:
        gen.reset()
        want.append(gen.generate(prompt, max_tokens=N_TOKENS).tokens)
    got: list[list[int] | BaseException | None] = [None] * len(jobs)

    def work(k: int) -> None:
        gen, prompt = jobs[k]
        try:
            got[k] = gen.generate(prompt, max_tokens=N_TOKENS).tokens
        except BaseException as exc:  # noqa: BLE001 - reported below
            got[k] = exc

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a call hung"
    for k, (gen, prompt) in enumerate(jobs):
        assert not isinstance(got[k], BaseException), got[k]
        assert_greedy_equivalent(gemma, gemma.tokenize(prompt), want[k], got[k])  # type: ignore[arg-type]


def test_a_thread_with_an_open_stream_gets_a_clear_error(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    stream = gen.stream("Hello", max_tokens=8)
    next(stream)
    with pytest.raises(RuntimeError, match="unfinished stream"):
        gen.generate("Hi", max_tokens=4)
    stream.close()
    assert gen.generate("Hi", max_tokens=4).tokens  # the turn was released by close()


# ---- bad proposers -------------------------------------------------------------------------


class Scripted(pyaccel.Proposer):
    name = "scripted"

    def __init__(self, draft: Draft) -> None:
        self.draft = draft

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return self.draft


def _chain(tokens, **kw) -> Draft:
    tok = np.asarray(tokens)
    return Draft(tok, np.arange(-1, len(tok) - 1, dtype=np.int32), **kw)


BAD_DRAFTS = {
    "id over the vocabulary": (lambda v: _chain(np.asarray([v + 10], np.int32)), "vocabulary"),
    "negative id": (lambda v: _chain(np.asarray([-4], np.int32)), "vocabulary"),
    "parents not a tree": (lambda v: Draft(np.asarray([1, 2], np.int32), np.asarray([1, 0], np.int32)), "parent"),
    "parents of another length": (lambda v: Draft(np.asarray([1, 2], np.int32), np.asarray([-1], np.int32)),
                                  "parents"),
    "float tokens": (lambda v: Draft(np.asarray([1.5, 2.0]), np.asarray([-1, 0], np.int32)), "int"),
    "q of the wrong shape": (lambda v: _chain(np.asarray([1, 2], np.int32), q=np.ones((2, 7), np.float32)), "q"),
    "q with NaN": (lambda v: _chain(np.asarray([1], np.int32), q=np.full((2, v), np.nan, np.float32)),
                   "not a probability distribution"),
    "aux id over the vocabulary": (lambda v: Draft(np.zeros(0, np.int32), np.zeros(0, np.int32),
                                                   aux=AuxTokens.make([v + 1], [1], [[0]])), "vocabulary"),
    "aux offset 0": (lambda v: Draft(np.zeros(0, np.int32), np.zeros(0, np.int32),
                                     aux=AuxTokens.make([5], [0], [[0]])), "offset"),
    "not a Draft": (lambda v: [1, 2, 3], "Draft"),
}


@pytest.mark.parametrize("case", sorted(BAD_DRAFTS))
def test_bad_proposer_output_is_a_clear_error_and_the_model_stays_usable(gemma: pyaccel.Model, case: str) -> None:
    make, match = BAD_DRAFTS[case]
    gen = pyaccel.Generator(gemma, Scripted(make(gemma.n_vocab)))
    with pytest.raises((ValueError, TypeError), match=match):
        gen.generate("def add(a, b):", max_tokens=6, temperature=0.7 if "q" in case else 0.0, seed=1)
    # Decoding right after the fault (on whatever cache it left) is plain decoding's, up to a
    # near-tie: a continued cache batches the prompt differently from a fresh prefill, and
    # llama.cpp's logits move slightly with the batch.
    got = pyaccel.Generator(gemma, "plain").generate("def add(a, b):", max_tokens=N_TOKENS).tokens
    plain = pyaccel.Generator(gemma, "plain")
    plain.reset()
    want = plain.generate("def add(a, b):", max_tokens=N_TOKENS).tokens
    assert_greedy_equivalent(gemma, gemma.tokenize("def add(a, b):"), want, got)


@pytest.mark.parametrize(("spec", "hook"), [("lookup", "propose"), ("auto", "propose"), ("auto", "observe"),
                                           ("auto", "begin")])
def test_a_failing_builtin_method_warns_and_the_generation_goes_on_plainly(
        gemma: pyaccel.Model, monkeypatch: pytest.MonkeyPatch, spec: str, hook: str) -> None:
    """A bug inside a built-in method (here one raised on purpose at its second call) must
    not cost the user their answer: a warning, then plain decoding, the same output. The
    answer is longer than one verification batch holds, so there is a second step however
    much a step drafts on this machine's curve."""
    prompt = "a = [1, 2, 3, 4, 5, 6, 7, 8]\nb = [1, 2, 3, 4, 5, 6, 7, 8]\nc = [1, 2,"
    gen = pyaccel.Generator(gemma, spec)
    calls = {"n": 0}
    original = getattr(type(gen.method), hook)

    def failing(self, *args):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == (1 if hook == "begin" else 2):
            raise RuntimeError("injected")
        return original(self, *args)

    monkeypatch.setattr(type(gen.method), hook, failing)
    with pytest.warns(pyaccel.ProposerFailedWarning, match=f"method '{spec}' failed \\(RuntimeError: injected\\)"):
        got = gen.generate(prompt, max_tokens=LONGER_THAN_A_BATCH)
    want = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=LONGER_THAN_A_BATCH).tokens
    assert_greedy_equivalent(gemma, gemma.tokenize(prompt), want, got.tokens)
    monkeypatch.undo()
    # The next generation drafts again: asked on a curve where this copy's drafts pay, since
    # on a steep CPU curve auto may rightly decode a 12-token answer plainly.
    monkeypatch.setattr(gemma, "_costs", pyaccel.CostModel.fixed([1 + 0.02 * b for b in range(64)]))
    again = gen.generate(prompt, max_tokens=N_TOKENS)
    assert again.stats.drafted > 0


def test_a_builtin_methods_malformed_draft_is_its_failure_not_the_answers(
        gemma: pyaccel.Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """A draft outside the vocabulary (an n-gram cache made with another tokenizer) from a
    built-in method: a warning and plain decoding, as for any failure of one."""
    prompt = "a = [1, 2, 3, 4, 5, 6, 7, 8]\nb = [1, 2, 3, 4, 5, 6, 7, 8]\nc = [1, 2,"
    gen = pyaccel.Generator(gemma, "lookup")
    monkeypatch.setattr(type(gen.method), "propose",
                        lambda self, tokens, budget: Draft.chain([gemma.n_vocab + 5]))
    with pytest.warns(pyaccel.ProposerFailedWarning, match="outside the vocabulary"):
        got = gen.generate(prompt, max_tokens=LONGER_THAN_A_BATCH)
    want = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=LONGER_THAN_A_BATCH).tokens
    assert_greedy_equivalent(gemma, gemma.tokenize(prompt), want, got.tokens)


def test_a_users_own_proposer_that_fails_raises(gemma: pyaccel.Model) -> None:
    class Broken(pyaccel.Proposer):
        name = "broken"

        def propose(self, tokens: list[int], budget: int) -> Draft:
            raise RuntimeError("my bug")

    with pytest.raises(RuntimeError, match="my bug"):
        pyaccel.Generator(gemma, Broken()).generate("def add(a, b):", max_tokens=4)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_are_a_clear_error(gemma: pyaccel.Model, bad: float) -> None:
    gen = pyaccel.Generator(gemma, "lookup:length=3")
    calls = {"n": 0}

    def poison(rows: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] < 3:  # the prefill and one step are fine
            return rows
        out = np.array(rows)
        out[:, 7] = bad
        return out

    gemma.backend.logits_hook = poison
    try:
        with pytest.raises(ValueError, match="NaN|inf|finite"):
            gen.generate("a b a b a b a b", max_tokens=16)
    finally:
        gemma.backend.logits_hook = None
    assert pyaccel.Generator(gemma, "plain").generate("Hello", max_tokens=4).tokens


# ---- small contexts ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["plain", "lookup", "ngram", "draft", "auto"])
def test_every_method_works_at_the_smallest_context(qwen_path: Path, qwen_draft_path: Path, method: str) -> None:
    with pyaccel.Model(qwen_path, n_ctx=64) as model:
        spec = {"draft": pyaccel.DraftModel(str(qwen_draft_path))}.get(method, method)
        gen = pyaccel.Generator(model, spec)
        result = gen.generate("def add(a, b):", max_tokens=model.n_ctx)
        assert result.tokens and result.finish_reason in ("stop", "length")
        gen.close()


# ---- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(max_tokens=2.5), TypeError, "max_tokens"),
    (dict(max_tokens="8"), TypeError, "max_tokens"),
    (dict(max_tokens=True), TypeError, "max_tokens"),
    (dict(stop=5), TypeError, "stop"),
    (dict(stop=["a", 3]), TypeError, "stop"),
    (dict(temperature="hot"), TypeError, "temperature"),
    (dict(top_k=1.5), TypeError, "top_k"),
    (dict(top_p=None), TypeError, "top_p"),
    (dict(seed=1.5), TypeError, "seed"),
    (dict(min_p=float("nan")), ValueError, "min_p"),
    (dict(temperature=float("nan")), ValueError, "temperature"),
    (dict(max_tokens=-1), ValueError, "max_tokens"),
])
def test_invalid_argument_types_are_clear(gemma: pyaccel.Model, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        pyaccel.Generator(gemma, "plain").generate("hello", **kwargs)


def test_prompt_token_ids_are_checked(gemma: pyaccel.Model) -> None:
    with pytest.raises(ValueError, match="vocabulary"):
        pyaccel.Generator(gemma, "plain").generate([1, gemma.n_vocab + 3], max_tokens=2)


# ---- quiet by default, registry pairs by path ------------------------------------------------


def test_llama_cpp_stays_silent_unless_verbose(gemma_path: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "pyaccel", "generate", "-m", str(gemma_path), "--max-tokens", "4", "Hello"]
    quiet = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.strip() == "", quiet.stderr
    loud = subprocess.run(cmd + ["--verbose"], capture_output=True, text=True, timeout=300)
    assert loud.returncode == 0 and "llama" in loud.stderr


def test_a_registry_model_opened_by_path_finds_its_draft_pair(qwen_path: Path) -> None:
    with pyaccel.Model(qwen_path, n_ctx=256) as model:
        spec = model.registry_spec
        assert spec is not None and spec.draft == "qwen2.5-coder-0.5b-instruct"
