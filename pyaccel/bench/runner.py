"""`pyaccel bench`: tokens/s, speedup, tau and acceptance of decoding methods over prompt suites.

Greedy decoding. For each prompt every method runs in a rotating order (so drift in the
machine's speed hits all methods alike), after the target cache is emptied (so each run
prefills the same way). Speeds are decode-phase only. The speedup of a run is its tokens/s
over plain decoding's on the same prompt in the same round. Results: a Markdown table of
per-suite medians, and every per-prompt number as JSON.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from ..methods.spec import MethodSpec
from .oracle import oracle_speedup
from .runners import PLAIN, Run, Runner, make_runner
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
    speedup: float
    identical: bool


@dataclass
class PromptResult:
    prompt: BenchPrompt
    prompt_tokens: int
    runs: list[MethodRun] = field(default_factory=list)
    oracle_speedup: float | None = None


@dataclass
class SummaryRow:
    suite: str
    method: str
    prompts: int
    median_speedup: float
    min_speedup: float
    median_tau: float | None
    median_acceptance: float | None
    identical: int
    total: int
    median_tokens_per_s: float | None
    of_oracle: float | None = None


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


def _has_chat_template(model: "Model") -> bool:
    try:
        model.chat_prompt([{"role": "user", "content": "hi"}])
    except ValueError:
        return False
    return True


def _measure_round(runners: Sequence[Runner], prompt: list[int], max_tokens: int, rnd: int, shift: int,
                   log: _Log) -> list[MethodRun]:
    """Every runner once, starting at runners[shift % len]; speedups against plain's run."""
    k = shift % len(runners)
    runs: dict[str, Run] = {}
    for runner in list(runners[k:]) + list(runners[:k]):
        run = runner.run(prompt, max_tokens)
        runs[runner.label] = run
        tau = f", tau {run.tau:.2f}" if run.tau is not None else ""
        log(f"    {runner.label}: {len(run.tokens)} tokens, {run.tokens_per_s:.2f} tok/s{tau}")
    plain = runs[PLAIN]
    out = []
    for label in (r.label for r in runners):
        run = runs[label]
        speedup = run.tokens_per_s / plain.tokens_per_s if plain.tokens_per_s > 0 else 0.0
        out.append(MethodRun(label, rnd, run, speedup, run.tokens == plain.tokens))
    return out


def _oracle_curve(model: "Model") -> Callable[[int], list[float]]:
    """The measured relative cost curve at a given context depth."""
    return model.costs.relative_at


def _bench_prompt(runners: Sequence[Runner], bp: BenchPrompt, tokens: list[int],
                  config: BenchConfig, index: int, log: _Log) -> PromptResult:
    result = PromptResult(bp, len(tokens))
    for rnd in range(config.rounds):
        log(f"  round {rnd + 1}/{config.rounds}")
        result.runs += _measure_round(runners, tokens, config.max_tokens, rnd, index + rnd, log)
    return result


def load_prompts(config: BenchConfig) -> list[BenchPrompt]:
    """The prompts of every suite of `config`, in order (checks the config first)."""
    config.validate()
    return [p for suite in config.suites for p in load_suite(suite, config.prompts, config.questions)]


def run_bench(model: "Model", config: BenchConfig, stream: TextIO | None = sys.stderr,
              prompts: Sequence[BenchPrompt] | None = None) -> list[PromptResult]:
    """Measure every method of `config` on `prompts` (default: its suites'); progress goes to `stream`."""
    prompts = load_prompts(config) if prompts is None else prompts
    log = _Log(stream)
    templated = _has_chat_template(model)
    if not templated:
        log(f"{model.name} has no chat template: prompts are given as raw text")
    curve = _oracle_curve(model) if config.oracle else None
    runners: list[Runner] = []
    try:
        for spec in config.methods:
            runners.append(make_runner(spec, model, config.draft_model))
        warm = model.tokenize("Hello")
        for runner in runners:  # first decodes allocate buffers and fault in the weights
            runner.run(warm, WARMUP_TOKENS)
        results = []
        for i, bp in enumerate(prompts):
            tokens = _chat_tokens(model, bp.text, templated)
            log(f"[{i + 1}/{len(prompts)}] {bp.suite} {bp.id} ({len(tokens)} prompt tokens)")
            if len(tokens) + config.max_tokens + DRAFT_ROOM > model.n_ctx:
                log(f"  skipped: it needs {len(tokens) + config.max_tokens + DRAFT_ROOM} of the context's "
                    f"{model.n_ctx} tokens (raise --n-ctx)")
                continue
            result = _bench_prompt(runners, bp, tokens, config, i, log)
            if curve is not None:
                plain = next(r.run for r in result.runs if r.method == PLAIN)
                result.oracle_speedup = oracle_speedup(tokens, plain.tokens, curve)
            results.append(result)
        return results
    finally:
        for runner in runners:
            runner.close()


# ---- summaries ---------------------------------------------------------------------------


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _method_row(suite: str, method: str, results: Sequence[PromptResult]) -> SummaryRow:
    per_prompt = [[r for r in pr.runs if r.method == method] for pr in results]
    speedups = [statistics.median(r.speedup for r in runs) for runs in per_prompt]
    oracle = [s / pr.oracle_speedup for s, pr in zip(speedups, results) if pr.oracle_speedup]
    flat = [r for runs in per_prompt for r in runs]
    return SummaryRow(
        suite, method, len(results), statistics.median(speedups), min(speedups),
        _median([r.run.tau for r in flat]), _median([r.run.acceptance_rate for r in flat]),
        sum(r.identical for r in flat), len(flat), _median([r.run.tokens_per_s for r in flat]),
        _median(oracle),
    )


def summarize(results: Sequence[PromptResult]) -> list[SummaryRow]:
    """Per suite and method: medians over prompts (a prompt's speedup: its median over rounds)."""
    rows = []
    suites = list(dict.fromkeys(pr.prompt.suite for pr in results))
    for suite in suites:
        in_suite = [pr for pr in results if pr.prompt.suite == suite]
        methods = list(dict.fromkeys(r.method for r in in_suite[0].runs))
        rows += [_method_row(suite, m, in_suite) for m in methods]
        bounds = [pr.oracle_speedup for pr in in_suite if pr.oracle_speedup is not None]
        if bounds:
            rows.append(SummaryRow(suite, ORACLE, len(bounds), statistics.median(bounds), min(bounds),
                                   None, None, 0, 0, None))
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown_table(rows: Sequence[SummaryRow]) -> str:
    with_oracle = any(r.of_oracle is not None for r in rows)
    head = ["suite", "method", "median speedup", "min", "median tau", "accept", "identical", "tok/s"]
    head += ["of oracle"] if with_oracle else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.suite, r.method, f"{r.median_speedup:.2f}x", f"{r.min_speedup:.2f}x",
                 _fmt(r.median_tau, ".2f"), _fmt(r.median_acceptance, ".2f"),
                 f"{r.identical}/{r.total}" if r.total else "-", _fmt(r.median_tokens_per_s, ".2f")]
        cells += [_fmt(r.of_oracle, ".2f")] if with_oracle else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_dict(model: "Model", config: BenchConfig, results: Sequence[PromptResult]) -> dict[str, Any]:
    """Everything measured, for --json: the set-up, the summary rows and every run."""
    prompts = []
    for pr in results:
        runs = [{"method": r.method, "round": r.round, "speedup": r.speedup, "identical": r.identical,
                 "tokens_per_s": r.run.tokens_per_s, **asdict(r.run)} for r in pr.runs]
        prompts.append({"suite": pr.prompt.suite, "id": pr.prompt.id, "copy": pr.prompt.copy,
                        "source": pr.prompt.source, "prompt_tokens": pr.prompt_tokens,
                        "oracle_speedup": pr.oracle_speedup, "runs": runs})
    setup = {"model": model.name, "path": str(model.path), "n_ctx": model.n_ctx,
             "n_threads": model.backend.n_threads, "max_tokens": config.max_tokens, "rounds": config.rounds,
             "suites": list(config.suites), "methods": [m.label for m in config.methods]}
    return {"setup": setup, "summary": [asdict(r) for r in summarize(results)], "prompts": prompts}
