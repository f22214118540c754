"""The fault suite, API: generated arguments to the Python API (hypothesis, a fixed seed).

Any input is either accepted, and then works, or refused with a ValueError or TypeError
that names what is wrong: never another exception, a crash or a llama.cpp abort. The
reference for "valid" is each argument's documented rule, written out here."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the test extra installs hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import pyaccel  # noqa: E402
from pyaccel import _core  # noqa: E402
from pyaccel.methods import make_method  # noqa: E402
from pyaccel.types import MAX_TOP_K, AuxTokens, Draft, StepOutcome  # noqa: E402

from lossless import assert_greedy_equivalent  # noqa: E402

pytestmark = pytest.mark.faults

# derandomize: the same examples on every run, so CI is repeatable; no example database.
FIXED = settings(derandomize=True, database=None, deadline=None, max_examples=60,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Examples that generate cost a prefill and a few decodes each: fewer of those.
GENERATING = settings(FIXED, max_examples=40)
PROMPT = "def add(a, b):"
N_TOKENS = 4
REFUSED = (ValueError, TypeError)

ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=4),
    st.binary(max_size=3), st.lists(st.integers(-2, 5), max_size=3), st.sampled_from(
        [np.float32(0.5), np.float64(0.25), np.int64(3), np.uint64(2**63), np.bool_(True), complex(1, 1), object(),
         np.array([1]), 10**400, -0.0, 5e-324]))


def _real(v: object) -> bool:
    """A number the API takes where a float is asked (np.float64 is a float)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _f32(v: Any) -> float:
    """What a 32-bit float (the sampler's) makes of the number `v`."""
    try:
        with np.errstate(over="ignore"):
            return float(np.float32(float(v)))
    except OverflowError:
        return math.inf


# Numbers at the edges of a 32-bit float: finite in Python, infinite or 0 to the sampler.
EDGES = st.sampled_from([1e308, 1e39, 3.4e38, 5e-324, 1e-46, 1.0000001, 10**400, -0.0])


def _mostly(good: Any, bad: Any) -> Any:
    """`good` five times in six: most inputs then have one fault at most, so that each
    fault is met where every other argument is valid (and it alone decides)."""
    return st.integers(0, 5).flatmap(lambda i: bad if i == 0 else good)


# Each keyword of Generator.stream: values to draw, and the documented rule of a valid one.
KWARGS: dict[str, tuple[Any, Any]] = {
    "max_tokens": (st.integers(1, 6), lambda v: _integer(v) and v >= 0),
    "temperature": (st.one_of(st.floats(0, 2), EDGES), lambda v: _real(v) and v >= 0 and math.isfinite(_f32(v))),
    "top_k": (st.integers(0, 50), lambda v: _integer(v) and 0 <= v <= MAX_TOP_K),
    "top_p": (st.one_of(st.floats(0, 1), EDGES), lambda v: _real(v) and 0 < v <= 1 and _f32(v) > 0),
    "min_p": (st.one_of(st.floats(0, 1), EDGES), lambda v: _real(v) and 0 <= v <= 1),
    "seed": (st.one_of(st.none(), st.integers(-2, 2**64)), lambda v: v is None or _integer(v) and -1 <= v < 2**64),
    "stop": (st.one_of(st.none(), st.text(max_size=2), st.lists(st.text(max_size=2), max_size=3)),
             lambda v: v is None or (isinstance(v, str) and v != "") or
             isinstance(v, (list, tuple)) and all(isinstance(s, str) and s for s in v)),
    "cache_prompt": (st.booleans(), lambda v: isinstance(v, (bool, np.bool_))),
    "cancel": (st.one_of(st.none(), st.builds(threading.Event)), lambda v: v is None or isinstance(v, threading.Event)),
}
UNKNOWN = ("temprature", "max_new_tokens", "n")


def _kwargs() -> Any:
    optional = {name: _mostly(good, ANYTHING) for name, (good, _) in KWARGS.items()}
    known = st.fixed_dictionaries({}, optional=optional)  # type: ignore[arg-type]
    unknown = _mostly(st.just({}), st.dictionaries(st.sampled_from(UNKNOWN), ANYTHING, min_size=1, max_size=1))
    return st.tuples(known, unknown).map(
        lambda kw: {**kw[0], **kw[1]})


def _bad_keys(kwargs: dict[str, Any]) -> list[str]:
    return [k for k, v in kwargs.items() if k not in KWARGS or not KWARGS[k][1](v)]


@pytest.fixture(scope="module")
def plain(gemma: pyaccel.Model) -> list[int]:
    """Greedy plain decoding of PROMPT: the reference every greedy answer here is held to."""
    gen = pyaccel.Generator(gemma, "plain")
    gen.reset()
    return gen.generate(PROMPT, max_tokens=N_TOKENS).tokens


@GENERATING
@given(kwargs=_kwargs())
def test_stream_keyword_arguments_are_accepted_or_refused_by_name(gemma: pyaccel.Model, kwargs: dict) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    bad = _bad_keys(kwargs)
    try:
        stream = gen.stream(PROMPT, **kwargs)
    except REFUSED as exc:
        assert bad, f"refused valid arguments {kwargs}: {exc!r}"
        assert any(k in str(exc) for k in bad), f"{exc!r} names none of {bad}"
        return
    assert not bad, f"accepted {bad} in {kwargs}"
    try:
        assert isinstance(next(stream), (str, pyaccel.Result))  # the first piece: sampling with these options
    finally:
        stream.close()


PROMPTS = st.one_of(
    st.text(max_size=24), st.text(st.characters(exclude_categories=()), max_size=8),
    st.lists(st.integers(-3, 300), max_size=12), st.lists(st.integers(262_140, 262_150), min_size=1, max_size=3),
    st.lists(ANYTHING, max_size=3), hnp.arrays(st.sampled_from(["i4", "i8", "u2", "f4", "b1"]), st.integers(0, 5),
                                               elements=st.integers(0, 1)),
    st.just([1] * 2000), ANYTHING)


def _valid_prompt(prompt: object, n_vocab: int, n_ctx: int) -> bool:
    if isinstance(prompt, str):
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return prompt != ""
    if isinstance(prompt, np.ndarray) and prompt.dtype.kind not in "iu":
        return False
    if isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, (list, tuple, np.ndarray)):
        return False
    return 0 < len(prompt) < n_ctx and all(_integer(t) and 0 <= t < n_vocab for t in prompt)


@settings(FIXED, max_examples=30)
@given(prompt=PROMPTS)
def test_any_prompt_is_answered_or_refused(gemma: pyaccel.Model, prompt: object) -> None:
    valid = _valid_prompt(prompt, gemma.n_vocab, gemma.n_ctx)
    try:
        result = pyaccel.Generator(gemma, "plain").generate(prompt, max_tokens=2)  # type: ignore[arg-type]
    except REFUSED as exc:
        assert not valid, f"refused a valid prompt {prompt!r}: {exc!r}"
        assert "prompt" in str(exc) or "text" in str(exc), exc
        return
    assert valid, f"accepted {prompt!r}"
    assert len(result.tokens) <= 2 and all(0 <= t < gemma.n_vocab for t in result.tokens)


# Model(...) options: the documented rule of each (C ints; at most 512 threads, ggml's most).
C_INT_MAX = 2**31 - 1
MODEL_OPTIONS: dict[str, tuple[Any, Any]] = {
    "n_ctx": (st.integers(0, 2**33), lambda v: _integer(v) and 16 <= v <= C_INT_MAX),
    "n_threads": (st.one_of(st.none(), st.integers(-2, 600)), lambda v: v is None or _integer(v) and 0 <= v <= 512),
    "n_gpu_layers": (st.integers(-3, 99), lambda v: _integer(v) and -1 <= v <= C_INT_MAX),
    "n_seq_max": (st.integers(-1, 2**32), lambda v: _integer(v) and 1 <= v <= C_INT_MAX),
    "n_batch": (st.integers(-1, 2**33), lambda v: _integer(v) and 1 <= v <= C_INT_MAX),
    "flash_attn": (st.one_of(st.none(), st.booleans()), lambda v: v is None or isinstance(v, (bool, np.bool_))),
    **{flag: (st.booleans(), lambda v: isinstance(v, (bool, np.bool_)))
       for flag in ("embeddings", "amx", "verbose", "progress")},
}


@pytest.fixture(scope="module")
def not_a_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file llama.cpp cannot load: options that pass their checks meet it, no model loads."""
    path = tmp_path_factory.mktemp("model") / "not-a-model.gguf"
    path.write_bytes(b"junk" * 16)
    return path


@FIXED
@given(options=st.fixed_dictionaries({}, optional={k: _mostly(good, ANYTHING)  # type: ignore[arg-type]
                                                   for k, (good, _) in MODEL_OPTIONS.items()}))
def test_model_options_are_checked_before_any_file_is_read(not_a_model: Path, options: dict) -> None:
    bad = [k for k, v in options.items() if not MODEL_OPTIONS[k][1](v)]
    with pytest.raises(REFUSED) as exc:
        pyaccel.Model(not_a_model, **options)
    if bad:
        assert any(k in str(exc.value) for k in bad), f"{exc.value!r} names none of {bad}"
    else:
        assert isinstance(exc.value, pyaccel.ModelLoadError) and "not a GGUF" in str(exc.value), exc.value


def _option_names() -> dict[str, list[str]]:
    """The options a spec can give each method (constructor arguments and tuning fields)."""
    from pyaccel.methods.auto.proposer import Auto, AutoTuning
    from pyaccel.methods.lookahead import Lookahead
    from pyaccel.methods.lookahead.sizing import LookaheadTuning
    from pyaccel.methods.lookup import PromptLookup
    from pyaccel.methods.lookup.tuning import LookupTuning
    from pyaccel.methods.tuning import scalar_fields, spec_writable

    def names(cls: Any, tuning: Any = None) -> list[str]:
        return sorted(set(spec_writable(cls)) | set(scalar_fields(tuning) if tuning is not None else ()))

    return {"plain": [], "lookup": names(PromptLookup, LookupTuning), "lookahead": names(Lookahead, LookaheadTuning),
            "ngram": names(pyaccel.NgramCacheDrafter), "draft": names(pyaccel.DraftModel),
            "auto": names(Auto, AutoTuning)}


OPTIONS = _option_names()
# Options that name files or load models: not to be made up (a spec would write them).
NOT_MADE_UP = frozenset({"static_path", "dynamic_path", "draft", "heads", "model"})
# Methods whose generators are made and run here (the others would load another model).
RUN = frozenset({"plain", "lookup", "ngram", "lookahead"})
VALUES = st.one_of(st.integers(-3, 70).map(str), st.sampled_from(
    ["0", "-1", "1e308", "nan", "inf", "-inf", "true", "false", "none", "0.5", "1.5", "", "x", "10" * 12, "2**3"]))


@st.composite
def _specs(draw: Any) -> str:
    name = draw(st.one_of(st.sampled_from(sorted(OPTIONS)), st.text("abcdefghijklmnopqrstuvwxyz:=, ", max_size=6)))
    known = [k for k in OPTIONS.get(name, []) if k not in NOT_MADE_UP]
    keys = draw(st.lists(st.one_of(st.sampled_from(known or ["x"]), st.sampled_from(["x", "max", ""])), max_size=3))
    return name + (":" + ",".join(f"{k}={draw(VALUES)}" for k in keys) if keys else "")


@GENERATING
@given(spec=_specs())
def test_any_method_spec_makes_a_working_method_or_is_refused(gemma: pyaccel.Model, plain: list[int],
                                                               spec: str) -> None:
    try:
        method = make_method(spec)
        if spec.partition(":")[0].strip() not in RUN:
            return
        gen = pyaccel.Generator(gemma, method)
    except REFUSED:
        return
    with gen:
        got = gen.generate(PROMPT, max_tokens=N_TOKENS).tokens
    assert_greedy_equivalent(gemma, gemma.tokenize(PROMPT), plain, got)


# ---- drafts and what observe() is told ----------------------------------------------------


class Scripted(pyaccel.Proposer):
    """Proposes one generated Draft every step, and checks every StepOutcome it is shown."""

    name = "scripted"

    def __init__(self, draft: Any, n_vocab: int) -> None:
        self.draft, self.n_vocab = draft, n_vocab

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return self.draft  # type: ignore[no-any-return]

    def observe(self, outcome: StepOutcome) -> None:
        path = [int(n) for n in outcome.accepted]
        parents = outcome.draft.parents
        assert all(int(parents[n]) == (path[i - 1] if i else -1) for i, n in enumerate(path)), "not a root path"
        assert outcome.accepted_tokens == [int(outcome.draft.tokens[n]) for n in path]
        assert outcome.tip_row == (1 + path[-1] if path else 0) < outcome.logits.shape[0]
        assert outcome.logits.shape[0] >= 1 + len(outcome.draft) and 0 <= outcome.next_token < self.n_vocab


def _ids(n: int) -> Any:
    return _mostly(st.lists(st.integers(0, 300), min_size=n, max_size=n).map(lambda t: np.asarray(t, np.int32)),
                   st.one_of(hnp.arrays(st.sampled_from(["i1", "i8", "u8", "f4", "b1"]),
                                        hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)), ANYTHING))


def _parents(n: int) -> Any:
    return _mostly(st.just(np.arange(-1, n - 1, dtype=np.int32)), st.one_of(
        st.lists(st.integers(-3, n + 1), min_size=n, max_size=n).map(lambda p: np.asarray(p, np.int32)),
        hnp.arrays(st.sampled_from(["i4", "i8", "u4", "f8"]), st.integers(0, 4)), ANYTHING))


def _q(n: int, n_vocab: int) -> Any:
    def rows(kind: str) -> Any:
        q = np.zeros((n + 1, n_vocab), np.float32)
        q[:, 7] = {"one-hot": 1.0, "zeros": 0.0, "nan": math.nan, "two": 2.0}.get(kind, 1.0)
        return q if kind != "wrong shape" else q[:, :10]
    return _mostly(st.one_of(st.none(), st.just("one-hot").map(rows)),
                   st.one_of(st.sampled_from(["zeros", "nan", "two", "wrong shape"]).map(rows), ANYTHING))


def _aux() -> Any:
    """Auxiliary tokens: sequences of offsets that are often unbroken and often not."""
    made = st.integers(1, 4).flatmap(lambda k: st.builds(
        AuxTokens.make, st.lists(st.integers(0, 300), min_size=k, max_size=k),
        st.lists(st.integers(1, 3), min_size=k, max_size=k),
        st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=2), min_size=k, max_size=k),
        st.one_of(st.none(), st.lists(st.booleans(), min_size=k, max_size=k))))
    odd = st.one_of(st.builds(AuxTokens.make, st.lists(st.integers(-1, 300), max_size=2),
                              st.lists(st.integers(-1, 9), max_size=2),
                              st.lists(st.lists(st.integers(-1, 2), max_size=2), max_size=2)),
                    st.builds(AuxTokens, _ids(1), _ids(1), ANYTHING, ANYTHING), ANYTHING)
    return st.one_of(st.none(), _mostly(made, odd))


@st.composite
def _drafts(draw: Any, n_vocab: int) -> Any:
    n = draw(st.integers(0, 4))
    layout = _core.tree_layout(np.arange(-1, n - 1, dtype=np.int32))
    draft = Draft(draw(_ids(n)), draw(_parents(n)), q=draw(_q(n, n_vocab)),
                  layout=draw(_mostly(st.sampled_from([None, layout]), st.just(object()))), aux=draw(_aux()))
    return draw(_mostly(st.just(draft), ANYTHING))  # now and then not a Draft at all


@settings(FIXED, max_examples=50)
@given(data=st.data(), temperature=st.sampled_from([0.0, 0.0, 0.8]))
def test_any_draft_is_verified_or_refused_and_greedy_output_stays_plain(
        gemma: pyaccel.Model, plain: list[int], data: Any, temperature: float) -> None:
    draft = data.draw(_drafts(gemma.n_vocab))
    gen = pyaccel.Generator(gemma, Scripted(draft, gemma.n_vocab))
    try:
        got = gen.generate(PROMPT, max_tokens=N_TOKENS, temperature=temperature, seed=1).tokens
    except REFUSED:
        return
    if temperature == 0.0:
        assert_greedy_equivalent(gemma, gemma.tokenize(PROMPT), plain, got)


def test_the_model_answers_as_before_after_every_refusal(gemma: pyaccel.Model, plain: list[int]) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    gen.reset()
    assert gen.generate(PROMPT, max_tokens=N_TOKENS).tokens == plain


# The faults these properties found, each as it was met (an abort, a late or unclear error).
FOUND = {
    "n_ctx past a C uint aborted llama.cpp": (dict(n_ctx=2**32 + 16), ValueError, "n_ctx"),
    "n_threads past ggml's pool aborted": (dict(n_threads=2**31 - 1), ValueError, "n_threads .* at most 512"),
    "a string flag was taken as True": (dict(embeddings="no"), TypeError, "embeddings must be True or False"),
    "a str n_ctx failed on a comparison": (dict(n_ctx="4096"), TypeError, "n_ctx must be an int"),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_model_options_found_faulty(not_a_model: Path, case: str) -> None:
    options, error, match = FOUND[case]
    with pytest.raises(error, match=match):
        pyaccel.Model(not_a_model, **options)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(temperature=1e39, max_tokens=2), "temperature .*32-bit"),  # inf to the sampler, refused only mid-stream
    (dict(temperature=10**400, max_tokens=2), "temperature"),  # was a TypeError listing pybind11 overloads
    (dict(top_p=1e-50, temperature=1.0, max_tokens=2), r"top_p .*\(0 as a 32-bit float\)"),
])
def test_sampling_values_the_sampler_cannot_hold_are_refused_at_the_call(gemma: pyaccel.Model, kwargs: dict,
                                                                        match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pyaccel.Generator(gemma, "plain").stream(PROMPT, **kwargs)


@pytest.mark.parametrize(("aux", "match"), [
    (AuxTokens.make([5, 6], [1, 5], [[0], [0]]), "sequence 0 has tokens at offsets \\[1, 5\\], with a gap"),
    (AuxTokens.make([5], [9], [[0]]), "with a gap"),  # both were llama_decode failing with -1, a RuntimeError
    (AuxTokens(np.asarray([1.5]), np.asarray([1], np.int32), ((0,),)), "aux tokens must be a 1-D int array"),
    (AuxTokens(np.asarray([1], np.int32), np.asarray([1], np.int32), ((0,),), np.asarray([1, 1])),
     "outputs must be a bool array"),
])
def test_auxiliary_tokens_the_pass_cannot_lay_out_are_refused(gemma: pyaccel.Model, plain: list[int], aux: AuxTokens,
                                                              match: str) -> None:
    empty = np.zeros(0, np.int32)
    gen = pyaccel.Generator(gemma, Scripted(Draft(empty, empty, aux=aux), gemma.n_vocab))
    with pytest.raises((ValueError, TypeError), match=match):
        gen.generate(PROMPT, max_tokens=N_TOKENS)
