"""`pyaccel bench`: tokens/s, speedup, tau, acceptance, output equality and memory of decoding methods.

Greedy decoding. For each prompt every method runs in a rotating order (so drift in the
machine's speed hits all methods alike), after the target cache is emptied (so each run
prefills the same way). Speeds are decode-phase only. The speedup of a run is its tokens/s
over plain decoding's on the same prompt in the same round; its output is classified
against plain decoding's (`equality`). Resident memory is measured around binding each
method and around each run (`memory`). Summaries and reports: `report`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, TextIO

from ..generator import Generator
from ..methods.base import Proposer
from ..methods.spec import MethodSpec
from . import memory
from .equality import Equality, PlainGaps, Verdict, classify
from .oracle import oracle_speedup
from .runners import PLAIN, Run, Runner, make_runner, proposer_runner
from .suites import BenchPrompt, load_suite

if TYPE_CHECKING:
    from ..model import Model

BENCH_MAX_TOKENS = 256
# Room kept in the context beyond prompt + max_tokens for the deepest draft verified.
DRAFT_ROOM = 64
WARMUP_TOKENS = 4
ORACLE = "oracle"


@dataclass(frozen=True)
class BenchConfig:
    suites: Sequence[str]
    methods: Sequence[MethodSpec]
    max_tokens: int = BENCH_MAX_TOKENS
    prompts: int | None = None
    rounds: int = 1
    questions: str | None = None
    oracle: bool = False
    draft_model: str | None = None
    heads: str | None = None  # Medusa heads of medusa methods that name none

    def validate(self) -> None:
        if not self.suites:
            raise ValueError("no suite given: add --suite code, edit, specbench or specbench:CATEGORY")
        if self.max_tokens < 2:
            raise ValueError(f"--max-tokens must be >= 2 (one token is the prefill's), got {self.max_tokens}")
        if self.rounds < 1:
            raise ValueError(f"--rounds must be >= 1, got {self.rounds}")


@dataclass
class MethodRun:
    """One method on one prompt in one round."""

    method: str
    round: int
    run: Run
    speedup: float | None  # None: this run or plain's decoded nothing after the first token
    verdict: Verdict

    @property
    def identical(self) -> bool:
        return self.verdict.equality is Equality.IDENTICAL


@dataclass
class PromptResult:
    prompt: BenchPrompt
    prompt_tokens: int
    runs: list[MethodRun] = field(default_factory=list)
    oracle_speedup: float | None = None


@dataclass
class BenchResults:
    """Every prompt's runs, and per method label the memory it added (`memory.MethodMemory`)."""

    prompts: list[PromptResult]
    memory: dict[str, memory.MethodMemory] = field(default_factory=dict)
    # Set when the run was interrupted (Ctrl-C): how many prompts it was to measure; the
    # prompts above are the ones it finished.
    interrupted_of: int | None = None

    def real_differences(self) -> list[tuple[PromptResult, MethodRun]]:
        """The runs whose output differs from plain decoding's where plain's choice was clear."""
        return [(pr, r) for pr in self.prompts for r in pr.runs if r.verdict.equality is Equality.REAL]


class _Log:
    """Progress lines on stderr."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream

    def __call__(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)


def _chat_tokens(model: "Model", text: str, templated: bool) -> list[int]:
    if templated:
        return model.chat_prompt([{"role": "user", "content": text}])
    return model.tokenize(text)


def has_chat_template(model: "Model") -> bool:
    """Does the GGUF file ship a chat template? (Without one the suites' texts are given
    raw, as to a base model, not in a built-in turn format.)"""
    return model.backend.chat_template is not None


def prompt_tokens(model: "Model", text: str) -> list[int]:
    """The tokens the bench gives `model` for a suite's prompt `text`: one user turn of its
    chat template, or the raw text where it has none (`has_chat_template`)."""
    return _chat_tokens(model, text, has_chat_template(model))


def _measure_round(model: "Model", runners: Sequence[Runner], prompt: list[int], max_tokens: int, rnd: int,
                   shift: int, mem: Mapping[str, memory.MethodMemory], log: _Log) -> list[MethodRun]:
    """Every runner once, starting at runners[shift % len]; speedups and equality against plain's run."""
    k = shift % len(runners)
    runs: dict[str, Run] = {}
    for runner in list(runners[k:]) + list(runners[:k]):
        with memory.RunPeak(mem[runner.label]):
            run = runner.run(prompt, max_tokens)
        runs[runner.label] = run
        tau = f", tau {run.tau:.2f}" if run.tau is not None else ""
        log(f"    {runner.label}: {len(run.tokens)} tokens, {run.tokens_per_s:.2f} tok/s{tau}")
    plain = runs[PLAIN]
    gaps = PlainGaps(model, prompt, plain.tokens)
    out = []
    for label in (r.label for r in runners):
        run = runs[label]
        speedup = run_speedup(run, plain)
        if speedup is None:
            log(f"    {label}: nothing decoded after the first token to time; left out of the speedups")
        verdict = classify(plain.tokens, run.tokens, gaps)
        if verdict.equality is not Equality.IDENTICAL:
            log(f"    {label}: {verdict.describe()}")
        out.append(MethodRun(label, rnd, run, speedup, verdict))
    return out


def run_speedup(run: Run, plain: Run) -> float | None:
    """Decode tokens/s over plain's; None when either run has no decode phase to time (an
    answer of one token, or an end of generation as the first token)."""
    if run.tokens_per_s <= 0 or plain.tokens_per_s <= 0:
        return None
    return run.tokens_per_s / plain.tokens_per_s


def _oracle_curve(model: "Model") -> Callable[[int], list[float]]:
    """The measured relative cost curve at a given context depth."""
    return model.costs.relative_at


def _bench_prompt(model: "Model", runners: Sequence[Runner], bp: BenchPrompt, tokens: list[int],
                  config: BenchConfig, index: int, mem: Mapping[str, memory.MethodMemory], log: _Log) -> PromptResult:
    result = PromptResult(bp, len(tokens))
    for rnd in range(config.rounds):
        log(f"  round {rnd + 1}/{config.rounds}")
        result.runs += _measure_round(model, runners, tokens, config.max_tokens, rnd, index + rnd, mem, log)
    return result


def _needed(prompt: Sequence[int], config: BenchConfig) -> int:
    """Context positions a run on `prompt` may reach."""
    return len(prompt) + config.max_tokens + DRAFT_ROOM


def _warm_target(model: "Model", depth: int) -> None:
    """Prefill `depth` tokens with plain decoding: the target's weights, buffers and KV cache
    pages up to the deepest position the bench reaches become resident before any method's
    memory is measured, so that no method is charged for them."""
    warm = model.tokenize("Hello")
    depth = max(len(warm), min(depth, model.n_ctx - 1))
    target = Generator(model, PLAIN)
    target.generate((warm * (depth // len(warm) + 1))[:depth], max_tokens=1, temperature=0.0)
    target.reset()


def _bind_runners(model: "Model", factories: Sequence[Callable[[], Runner]], runners: list[Runner],
                  mem: dict[str, memory.MethodMemory]) -> None:
    """Create and warm up each runner (first decodes allocate buffers and fault in the
    weights), measuring the resident memory each adds; appends to `runners` as it goes so
    that the caller closes what was opened even when one fails."""
    warm = model.tokenize("Hello")
    base = memory.sample()
    for factory in factories:
        before = memory.sample()
        runner = factory()
        runners.append(runner)
        runner.run(warm, WARMUP_TOKENS)
        mem[runner.label] = memory.bind_memory(base, before, memory.sample())


def _factories(model: "Model", config: BenchConfig,
               proposers: Mapping[str, Callable[[], Proposer]]) -> list[Callable[[], Runner]]:
    out: list[Callable[[], Runner]] = [partial(make_runner, spec, model, config.draft_model, config.heads)
                                       for spec in config.methods]
    taken = [spec.label for spec in config.methods]
    for label in proposers:
        if label in taken:
            raise ValueError(f"method label {label!r} is given twice: label your proposer differently")
    out += [partial(proposer_runner, label, model, make) for label, make in proposers.items()]
    return out


def load_prompts(config: BenchConfig) -> list[BenchPrompt]:
    """The prompts of every suite of `config`, in order (checks the config first)."""
    config.validate()
    return [p for suite in config.suites for p in load_suite(suite, config.prompts, config.questions)]


def run_bench(model: "Model", config: BenchConfig, stream: TextIO | None = sys.stderr,
              prompts: Sequence[BenchPrompt] | None = None,
              proposers: Mapping[str, Callable[[], Proposer]] | None = None) -> BenchResults:
    """Measure every method of `config` on `prompts` (default: its suites'); progress goes to `stream`.

    `proposers` adds methods of your own: label -> a function making a fresh Proposer."""
    prompts = load_prompts(config) if prompts is None else prompts
    log = _Log(stream)
    templated = has_chat_template(model)
    if not templated:
        log(f"{model.name} has no chat template: prompts are given as raw text")
    curve = _oracle_curve(model) if config.oracle else None
    tokenized = [(bp, _chat_tokens(model, bp.text, templated)) for bp in prompts]
    deepest = max((n for n in (_needed(t, config) for _, t in tokenized) if n <= model.n_ctx), default=0)
    runners: list[Runner] = []
    mem: dict[str, memory.MethodMemory] = {}
    try:
        _warm_target(model, deepest)
        _bind_runners(model, _factories(model, config, proposers or {}), runners, mem)
        results: list[PromptResult] = []
        try:
            for i, (bp, tokens) in enumerate(tokenized):
                log(f"[{i + 1}/{len(prompts)}] {bp.suite} {bp.id} ({len(tokens)} prompt tokens)")
                if _needed(tokens, config) > model.n_ctx:
                    log(f"  skipped: it needs {_needed(tokens, config)} of the context's "
                        f"{model.n_ctx} tokens (raise --n-ctx)")
                    continue
                result = _bench_prompt(model, runners, bp, tokens, config, i, mem, log)
                if curve is not None:
                    plain = next(r.run for r in result.runs if r.method == PLAIN)
                    result.oracle_speedup = oracle_speedup(tokens, plain.tokens, curve)
                results.append(result)
        except KeyboardInterrupt:
            # An hour-long run stopped by the user keeps what it measured: the prompts every
            # method finished (the one under way is dropped: its methods are not all timed).
            log(f"interrupted: keeping the {len(results)} prompt(s) every method finished")
            return BenchResults(results, mem, interrupted_of=len(prompts))
        return BenchResults(results, mem)
    finally:
        for runner in runners:
            runner.close()
