"""What `pyaccel bench` measures: pyaccel methods, and llama-cpp-python's own generation as peers.

Every runner takes the same prompt tokens and reports decode-phase time only (from the
first generated token to the last), so prefill speed does not blur the comparison.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ..generator import Generator
from ..methods import make_method, method_names
from ..methods.base import Proposer
from ..methods.spec import MethodSpec, parse_specs

if TYPE_CHECKING:
    from ..model import Model

PLAIN = "plain"
PEERS = ("llama-plain", "llama-lookup")
# llama-cpp-python's prompt-lookup drafter as its documentation shows it.
PEER_LOOKUP_DEFAULTS: dict[str, Any] = {"num_pred_tokens": 10}


def parse_methods(text: str) -> list[MethodSpec]:
    """--methods: method specs (`pyaccel.methods.spec`), pyaccel's or the llama-cpp-python
    peers; plain decoding is added first when missing (every speedup is relative to it)."""
    out = parse_specs(text)
    known = method_names() + list(PEERS)
    for m in out:
        if m.name not in known:
            raise ValueError(f"unknown method {m.name!r} in --methods: choose from {', '.join(known)}")
        if m.name in PEERS:
            check_peer_options(m)
        else:  # its options checked before the model loads: building is cheap, binding loads files
            make_method(m).close()
    if PLAIN not in [m.label for m in out]:
        out.insert(0, MethodSpec(PLAIN, PLAIN))
    return out


@dataclass
class Run:
    """One generation. decoded: tokens committed after the first one (an end-of-generation
    token included), in decode_s seconds. The decode time split (pyaccel methods only; None
    for the peers): target_s in the target's forward passes, draft_s proposing, verify_s
    verifying, overhead_s the rest (committing, feedback to the method, detokenizing)."""

    tokens: list[int]
    decoded: int
    decode_s: float
    tau: float | None = None
    acceptance_rate: float | None = None
    acceptance_per_position: list[float] | None = None
    target_s: float | None = None
    draft_s: float | None = None
    verify_s: float | None = None
    overhead_s: float | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.decoded / self.decode_s if self.decode_s > 0 else 0.0


class Runner(Protocol):
    label: str

    def run(self, prompt: list[int], max_tokens: int) -> Run: ...

    def close(self) -> None: ...


class PyaccelRunner:
    """A pyaccel method through the public Generator, greedy."""

    def __init__(self, label: str, model: "Model", generator: Generator) -> None:
        self.label = label
        self.model = model
        self.generator = generator

    def run(self, prompt: list[int], max_tokens: int) -> Run:
        # Every run prefills afresh, the method's own caches too (a draft model would
        # otherwise skip the catch-up that a fresh generation pays).
        self.generator.reset()
        res = self.generator.generate(prompt, max_tokens=max_tokens, temperature=0.0)
        s = res.stats
        drafted = s.drafted > 0
        # Stats.overhead_s holds everything outside the target's passes and drafting,
        # verification included; the bench reports verification apart.
        return Run(res.tokens, s.decoded_tokens, s.decode_s, s.tau,
                   s.acceptance_rate if drafted else None,
                   s.acceptance_per_position if drafted else None,
                   s.target_s, s.draft_s, s.verify_s, max(0.0, s.overhead_s - s.verify_s))

    def close(self) -> None:
        self.generator.close()


class LlamaRunner:
    """llama-cpp-python's `Llama.generate` token loop, greedy, on the same prompt tokens."""

    def __init__(self, label: str, llm: Any, model: "Model") -> None:
        self.label = label
        self.llm = llm
        self.is_eog = model.backend.is_eog  # same GGUF file, same vocabulary

    def run(self, prompt: list[int], max_tokens: int) -> Run:
        self.llm.reset()  # no prefix reuse: every run prefills the whole prompt
        out: list[int] = []
        t_first: float | None = None
        t_last = 0.0
        decoded = 0
        gen = self.llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
        try:
            for tok in gen:
                t_last = perf_counter()
                if t_first is None:
                    t_first = t_last  # the prefill's token: decode time starts here
                else:
                    decoded += 1
                if self.is_eog(tok):
                    break
                out.append(int(tok))
                if len(out) >= max_tokens:
                    break
        finally:
            gen.close()
        return Run(out, decoded, t_last - (t_first or t_last), 1.0 if self.label == "llama-plain" else None)

    def close(self) -> None:
        self.llm.close()


def _peer_drafter() -> Any:
    # pyaccel itself reaches llama.cpp only through pyaccel.backend; this is the benchmark's
    # comparison with llama-cpp-python's own API, so it imports llama_cpp here, lazily.
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    return LlamaPromptLookupDecoding


def check_peer_options(spec: MethodSpec) -> None:
    """The options of a llama-cpp-python peer are its drafter's arguments (llama-lookup) or
    none (llama-plain): any other is an error that lists the valid ones."""
    valid = [] if spec.name != "llama-lookup" else [
        name for name in inspect.signature(_peer_drafter()).parameters if name != "self"]
    unknown = sorted(set(spec.options) - set(valid))
    if unknown:
        takes = f"its options are {', '.join(valid)}" if valid else "it takes no options"
        raise ValueError(f"method {spec.name!r}: unknown option {', '.join(unknown)} in {spec.label!r}; {takes}")


def _make_peer(spec: MethodSpec, model: "Model") -> LlamaRunner:
    import llama_cpp

    from ..backend import default_placement

    check_peer_options(spec)
    threads = model.backend.n_threads
    kwargs: dict[str, Any] = dict(n_ctx=model.n_ctx, n_threads=threads, n_threads_batch=threads,
                                  n_gpu_layers=model.backend.config.n_gpu_layers, verbose=False)
    if spec.name == "llama-lookup":
        kwargs.update(draft_model=_peer_drafter()(**{**PEER_LOOKUP_DEFAULTS, **spec.options}), logits_all=True)
    with default_placement(model.backend.placement):  # its weights where pyaccel's are (no AMX fault)
        llm = llama_cpp.Llama(str(model.path), **kwargs)
    return LlamaRunner(spec.label, llm, model)


def check_drafts(methods: Sequence[MethodSpec], model_name: str, pair: str | None, draft_model: str | None) -> None:
    """Every draft method has a draft model: its own `draft=` option, --draft-model
    (`draft_model`) or the registry's pair of the target (`pair`)."""
    for spec in methods:
        if spec.name == "draft" and spec.options.get("draft") is None and draft_model is None and pair is None:
            raise ValueError(f"{model_name!r} has no registry draft model: pass --draft-model NAME_OR_PATH (or "
                             f"write draft:draft=NAME_OR_PATH in --methods), or leave {spec.label} out of --methods")


def make_proposer(spec: MethodSpec, model: "Model", draft_model: str | None = None,
                  heads: str | None = None) -> Proposer:
    """The pyaccel method of one --methods entry; `draft_model` is the default draft of draft
    methods, `heads` the default heads file of medusa methods."""
    options = dict(spec.options)
    if spec.name == "draft":
        check_drafts([spec], model.name, model.registry_spec.draft if model.registry_spec is not None else None,
                     draft_model)
        if draft_model is not None:
            options.setdefault("draft", draft_model)
    if spec.name == "medusa" and heads is not None:
        options.setdefault("heads", heads)
    return make_method(MethodSpec(spec.label, spec.name, options))


def make_runner(spec: MethodSpec, model: "Model", draft_model: str | None = None, heads: str | None = None) -> Runner:
    """The runner for one --methods entry (`make_proposer` for pyaccel's methods)."""
    if spec.name in PEERS:
        return _make_peer(spec, model)
    return PyaccelRunner(spec.label, model, Generator(model, make_proposer(spec, model, draft_model, heads)))


def proposer_runner(label: str, model: "Model", make: Callable[[], Proposer]) -> Runner:
    """A runner for a proposer of your own (the bench's Python API); `make` returns a fresh one."""
    if label == PLAIN or label in PEERS:
        raise ValueError(f"{label!r} names a built-in bench method: give your proposer another label")
    return PyaccelRunner(label, model, Generator(model, make()))
