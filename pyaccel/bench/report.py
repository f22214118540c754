"""Summaries and reports of `pyaccel bench` results: Markdown tables, the --markdown document, the JSON."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .equality import NEAR_TIE, Equality
from .fingerprint import machine_line
from .memory import MethodMemory, extra_over_plain, mib
from .runner import BenchConfig, BenchResults, MethodRun, PromptResult
from .runners import PLAIN, Run

if TYPE_CHECKING:
    from ..model import Model

ORACLE = "oracle"
SPLIT = ("target_s", "draft_s", "verify_s", "overhead_s")


@dataclass
class SummaryRow:
    """Per suite and method: medians over prompts, equality counts over runs, and the median
    share of decode time in the target's passes, drafting, verification and the rest."""

    suite: str
    method: str
    prompts: int
    median_speedup: float | None  # None: no prompt of the suite had a decode phase to time
    min_speedup: float | None
    median_tau: float | None
    median_acceptance: float | None
    identical: int
    total: int
    median_tokens_per_s: float | None
    of_oracle: float | None = None
    near_tie: int = 0
    real: int = 0
    time_split: dict[str, float] | None = None


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def time_split(runs: Sequence[Run]) -> dict[str, float] | None:
    """Median share of decode time per part (SPLIT); None when no run reports a split."""
    timed = [r for r in runs if r.decode_s > 0 and r.target_s is not None]
    if not timed:
        return None
    return {k.removesuffix("_s"): statistics.median(getattr(r, k) / r.decode_s for r in timed) for k in SPLIT}


def _count(runs: Sequence[MethodRun], equality: Equality) -> int:
    return sum(r.verdict.equality is equality for r in runs)


def _method_row(suite: str, method: str, results: Sequence[PromptResult]) -> SummaryRow:
    per_prompt = [[r for r in pr.runs if r.method == method] for pr in results]
    speedups = [_median([r.speedup for r in runs]) for runs in per_prompt]
    oracle = [s / pr.oracle_speedup for s, pr in zip(speedups, results) if s is not None and pr.oracle_speedup]
    timed = [s for s in speedups if s is not None]
    flat = [r for runs in per_prompt for r in runs]
    decoded = [r.run for r in flat if r.speedup is not None]
    return SummaryRow(
        suite, method, len(results), _median(timed), min(timed, default=None),
        _median([r.tau for r in decoded]), _median([r.acceptance_rate for r in decoded]),
        _count(flat, Equality.IDENTICAL), len(flat), _median([r.tokens_per_s for r in decoded]),
        _median(oracle), _count(flat, Equality.NEAR_TIE), _count(flat, Equality.REAL),
        time_split(decoded),
    )


def summarize(results: Sequence[PromptResult]) -> list[SummaryRow]:
    """Per suite and method: medians over prompts (a prompt's speedup: its median over rounds;
    runs with no decode phase to time are left out, and prompts with none)."""
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


def _fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _split_cell(split: dict[str, float] | None) -> str:
    return "-" if split is None else "/".join(f"{100 * v:.1f}" for v in split.values())


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def markdown_table(rows: Sequence[SummaryRow]) -> str:
    """Speed, equality with plain decoding and the decode time split, per suite and method."""
    with_oracle = any(r.of_oracle is not None for r in rows)
    head = ["suite", "method", "median speedup", "min", "median tau", "accept", "identical", "near-tie", "real",
            "tok/s", "time % target/draft/verify/overhead"]
    head += ["of oracle"] if with_oracle else []
    body = []
    for r in rows:
        counted = bool(r.total)
        cells = [r.suite, r.method, _fmt_x(r.median_speedup), _fmt_x(r.min_speedup),
                 _fmt(r.median_tau, ".2f"), _fmt(r.median_acceptance, ".2f"),
                 f"{r.identical}/{r.total}" if counted else "-", str(r.near_tie) if counted else "-",
                 str(r.real) if counted else "-", _fmt(r.median_tokens_per_s, ".2f"), _split_cell(r.time_split)]
        cells += [_fmt(r.of_oracle, ".2f")] if with_oracle else []
        body.append(cells)
    return _table(head, body)


def memory_table(memory: dict[str, MethodMemory]) -> str:
    """Resident memory per method, MiB (see `pyaccel.bench.memory` for what each column holds)."""
    head = ["method", "peak RSS", "alone", "extra over plain", "bind anon", "bind file", "run growth"]
    plain = memory.get(PLAIN, MethodMemory())
    body = [[label, mib(m.peak), mib(m.alone), mib(extra_over_plain(m, plain)), mib(m.bind_anon),
             mib(m.bind_file), mib(m.run_growth)] for label, m in memory.items()]
    return _table(head, body)


MEMORY_NOTE = ("Memory in MiB of resident memory (RSS). peak RSS: the process's high-water mark during the "
               "method's runs (every method loaded). alone: target loaded + what binding the method added + its "
               "largest growth within a run, i.e. its peak had it run alone. bind anon / bind file: what creating "
               "and warming the method added, anonymous (contexts, KV caches, heads, n-gram caches) and "
               "file-backed (a draft model's weights).")
SPEEDUP_NOTE = ("decode tokens/s over plain decoding's on the same prompt in the same round; identical / "
                "near-tie / real: runs whose output equals plain decoding's, first differs at a near-tie (plain's "
                f"top-2 logit gap < {NEAR_TIE}), or first differs where plain's choice was clear")
SPLIT_NOTE = ("time %: median share of decode time in the target's forward passes, drafting, verification "
              "and the rest (committing, the method's feedback, detokenizing); pyaccel methods only.")


def markdown_report(results: BenchResults, setup: dict[str, Any], command: str | None = None) -> str:
    """The --markdown document: the command, the machine, the model, then the tables."""
    model = setup["model_file"]
    sha = f", sha256 {model['sha256'][:16]}..." if model.get("sha256") else ""
    lines = ["## pyaccel bench", ""]
    if command:
        lines += ["```bash", command, "```", ""]
    lines += [f"- **Machine**: {machine_line(setup['machine'])}",
              (f"- **Model**: {model['file']} ({model['size']:,} B{sha}); {setup['n_threads']} threads, "
               f"n_ctx {setup['n_ctx']}, greedy, at most {setup['max_tokens']} tokens, {setup['rounds']} round(s)"),
              f"- **Speedup**: {SPEEDUP_NOTE}",
              *([f"- **Interrupted**: {len(results.prompts)} of {results.interrupted_of} prompts finished"]
                if results.interrupted_of is not None else []),
              "", markdown_table(summarize(results.prompts)), "", SPLIT_NOTE, ""]
    if results.memory:
        lines += [memory_table(results.memory), "", MEMORY_NOTE, ""]
    return "\n".join(lines)


def bench_setup(model: "Model", config: BenchConfig, methods: Sequence[str] = ()) -> dict[str, Any]:
    """The set-up of a run: model and machine fingerprints, threads, context, budget, suites (with
    --prompts and --questions, to read them again: `replay`), and the methods (default: those of `config`; give the labels run when proposers were added)."""
    from .fingerprint import machine_fingerprint, model_fingerprint

    return {"model": model.name, "path": str(model.path), "model_file": model_fingerprint(model),
            "machine": machine_fingerprint(), "n_ctx": model.n_ctx, "n_threads": model.backend.n_threads,
            "max_tokens": config.max_tokens, "rounds": config.rounds, "suites": list(config.suites),
            "prompts": config.prompts,
            "questions": str(Path(config.questions).resolve()) if config.questions else None,
            "methods": list(methods) or [m.label for m in config.methods]}


def _memory_dict(memory: dict[str, MethodMemory]) -> dict[str, Any]:
    plain = memory.get(PLAIN, MethodMemory())
    return {label: {**asdict(m), "alone": m.alone, "extra_over_plain": extra_over_plain(m, plain)}
            for label, m in memory.items()}


def report_dict(setup: dict[str, Any], results: BenchResults) -> dict[str, Any]:
    """Everything measured, for --json: the set-up, the summary rows, memory per method and every run."""
    prompts = []
    for pr in results.prompts:
        runs = [{"method": r.method, "round": r.round, "speedup": r.speedup, "identical": r.identical,
                 "equality": r.verdict.equality.value, "first_difference": r.verdict.position,
                 "plain_top2_gap": r.verdict.gap, "tokens_per_s": r.run.tokens_per_s, **asdict(r.run)}
                for r in pr.runs]
        prompts.append({"suite": pr.prompt.suite, "id": pr.prompt.id, "copy": pr.prompt.copy,
                        "source": pr.prompt.source, "prompt_tokens": pr.prompt_tokens,
                        "oracle_speedup": pr.oracle_speedup, "runs": runs})
    return {"setup": setup, "summary": [asdict(r) for r in summarize(results.prompts)],
            "memory": _memory_dict(results.memory), "prompts": prompts,
            "interrupted_of": results.interrupted_of}


def real_difference_lines(results: BenchResults) -> list[str]:
    """One line per run whose output really differs from plain decoding's."""
    return [f"{r.method} on {pr.prompt.suite} {pr.prompt.id} (round {r.round + 1}): {r.verdict.describe()}"
            for pr, r in results.real_differences()]
