"""What `pyaccel bench` measures: pyaccel methods, and llama-cpp-python's own generation as peers.

Every runner takes the same prompt tokens and reports decode-phase time only (from the
first generated token to the last), so prefill speed does not blur the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

from .api import Generator
from .decode import TargetCache
from .methods import make_method, method_names

if TYPE_CHECKING:
    from .api import Model

PLAIN = "plain"
PEERS = ("llama-plain", "llama-lookup")
# llama-cpp-python's prompt-lookup drafter as its documentation shows it.
PEER_LOOKUP_DEFAULTS: dict[str, Any] = {"num_pred_tokens": 10}


@dataclass(frozen=True)
class MethodSpec:
    """`name[:key=value,...]` from --methods; `label` is the spec as written."""

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)


def parse_value(text: str) -> Any:
    """int, float, bool or None when the text reads as one, else the string itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_methods(text: str) -> list[MethodSpec]:
    """Split --methods: commas separate methods, and also options of the method before
    ("draft:length=4,max_draft=8,lookup"): a piece `key=value` without a colon is an option."""
    specs: list[tuple[str, dict[str, Any], list[str]]] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if "=" in piece and ":" not in piece:
            if not specs:
                raise ValueError(f"option {piece!r} comes before any method: write METHOD:{piece}")
            key, value = piece.split("=", 1)
            specs[-1][1][key.strip()] = parse_value(value.strip())
            specs[-1][2].append(piece)
            continue
        name, _, opts = piece.partition(":")
        options: dict[str, Any] = {}
        for item in filter(None, opts.split(",")):
            if "=" not in item:
                raise ValueError(f"method option {item!r} in {piece!r} needs the form key=value")
            key, value = item.split("=", 1)
            options[key.strip()] = parse_value(value.strip())
        specs.append((name.strip(), options, [piece]))
    out = [MethodSpec(",".join(parts), name, options) for name, options, parts in specs]
    known = method_names() + list(PEERS)
    for m in out:
        if m.name not in known:
            raise ValueError(f"unknown method {m.name!r} in --methods: choose from {', '.join(known)}")
    labels = [m.label for m in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"--methods lists a method twice: {', '.join(labels)}")
    if PLAIN not in labels:  # every speedup is relative to plain decoding of the same prompt
        out.insert(0, MethodSpec(PLAIN, PLAIN))
    return out


@dataclass
class Run:
    """One generation. decoded: tokens committed after the first one (an end-of-generation
    token included), in decode_s seconds."""

    tokens: list[int]
    decoded: int
    decode_s: float
    tau: float | None = None
    acceptance_rate: float | None = None
    acceptance_per_position: list[float] | None = None

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

    def _reset(self) -> None:
        self.model.cache.truncate(0)
        # A draft model keeps its own cache of the last prompt; a later round would
        # otherwise skip the draft's catch-up that a fresh generation pays.
        own = getattr(self.generator.method, "_cache", None)
        if isinstance(own, TargetCache):
            own.truncate(0)

    def run(self, prompt: list[int], max_tokens: int) -> Run:
        self._reset()
        res = self.generator.generate(prompt, max_tokens=max_tokens, temperature=0.0)
        s = res.stats
        drafted = s.drafted > 0
        return Run(res.tokens, s.decoded_tokens, s.decode_s, s.tau,
                   s.acceptance_rate if drafted else None,
                   s.acceptance_per_position if drafted else None)

    def close(self) -> None:
        close = getattr(self.generator.method, "close", None)
        if close is not None:
            close()


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


def _make_peer(spec: MethodSpec, model: "Model") -> LlamaRunner:
    # pyaccel itself reaches llama.cpp only through pyaccel.backend; this is the benchmark's
    # comparison with llama-cpp-python's own API, so it imports llama_cpp here, lazily.
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    threads = model.backend.n_threads
    kwargs: dict[str, Any] = dict(n_ctx=model.n_ctx, n_threads=threads, n_threads_batch=threads,
                                  n_gpu_layers=model.backend.config.n_gpu_layers, verbose=False)
    if spec.name == "llama-lookup":
        drafter = LlamaPromptLookupDecoding(**{**PEER_LOOKUP_DEFAULTS, **spec.options})
        kwargs.update(draft_model=drafter, logits_all=True)
    elif spec.options:
        raise ValueError(f"llama-plain takes no options, got {spec.label!r}")
    return LlamaRunner(spec.label, llama_cpp.Llama(str(model.path), **kwargs), model)


def make_runner(spec: MethodSpec, model: "Model", draft_model: str | None = None) -> Runner:
    """The runner for one --methods entry; `draft_model` is the default draft of draft methods."""
    if spec.name in PEERS:
        return _make_peer(spec, model)
    options = dict(spec.options)
    if spec.name == "draft":
        if draft_model is not None:
            options.setdefault("draft", draft_model)
        pair = model.registry_spec.draft if model.registry_spec is not None else None
        if options.get("draft") is None and pair is None:
            raise ValueError(f"{model.name!r} has no registry draft model: pass --draft-model NAME_OR_PATH "
                             "(or write draft:draft=NAME_OR_PATH in --methods), or leave draft out of --methods")
    return PyaccelRunner(spec.label, model, Generator(model, make_method(spec.name, model, **options)))
