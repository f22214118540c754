"""The arguments and the command of `pyaccel bench` (registered by pyaccel.cli)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli.args import add_heads_arg, add_model_args, open_model
from .runner import BENCH_MAX_TOKENS, BenchConfig, BenchResults, load_prompts, run_bench
from .runners import parse_methods

if TYPE_CHECKING:
    from ..model import Model

DEFAULT_METHODS = "plain,lookup,draft"
# Exit status when a method's output really differs from plain decoding's (usage errors exit 2).
EXIT_REAL_DIFFERENCE = 1
# Exit status of a run interrupted by Ctrl-C (the shell's for SIGINT), its finished prompts written.
EXIT_INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.add_argument("--suite", action="append", default=[], metavar="SUITE",
                   help="code, edit, specbench (a few questions of every category), specbench:CATEGORY, or a .jsonl "
                        "file of your own (\"id\", \"instruction\", optional \"code\" per line); repeatable")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help="comma-separated name[:key=value,...]: pyaccel methods (plain, lookup, draft, ...) and the "
                        "llama-cpp-python peers llama-plain, llama-lookup; plain is always added "
                        f"(default: {DEFAULT_METHODS})")
    p.add_argument("--max-tokens", type=int, default=BENCH_MAX_TOKENS)
    p.add_argument("--prompts", type=int, default=None,
                   help="prompts per suite (specbench: per category; default: all of code and edit, "
                        "10 per specbench:CATEGORY, 3 per category of specbench)")
    p.add_argument("--rounds", type=int, default=1, help="times every method runs on every prompt (default 1)")
    p.add_argument("--questions", default=None,
                   help="Spec-Bench question file (default: ../shared/data/spec_bench_questions.jsonl)")
    p.add_argument("--json", default=None, metavar="OUT",
                   help="write every per-prompt result, memory per method and the machine and model fingerprints "
                        "to this JSON file")
    p.add_argument("--markdown", default=None, metavar="OUT",
                   help="write the command, machine, model and result tables to this Markdown file")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="draw the median speedup per suite per method to this image (needs pyaccel[plot])")
    p.add_argument("--oracle", action="store_true",
                   help="also compute the n-gram oracle bound per prompt and each method's share of it")
    p.add_argument("--costs", action="store_true",
                   help="print the measured cost curve and the draft lengths the cost model picks on it; no suites")
    p.add_argument("--draft-model", default=None, help="draft model of draft methods and --costs (default: the registry pair)")
    add_heads_arg(p)


def _write(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def _command_line() -> str | None:
    """The command as typed, for --markdown; None when the bench was not started as `pyaccel bench`."""
    return "pyaccel " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["bench"] else None


def write_outputs(args: argparse.Namespace, model: "Model", config: BenchConfig, results: BenchResults) -> int:
    """Print the summary, write --json / --markdown / --plot; the exit status (a real difference: non-zero)."""
    from .report import (
        bench_setup,
        markdown_report,
        markdown_table,
        real_difference_lines,
        report_dict,
        summarize,
    )

    if results.interrupted_of is not None and not results.prompts:
        print("pyaccel: bench interrupted before any prompt finished; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    rows = summarize(results.prompts)
    print(f"{model.name}, {model.backend.n_threads} threads, greedy, at most {config.max_tokens} tokens, "
          f"{config.rounds} round(s); speedup: decode tokens/s over plain's on the same prompt\n")
    print(markdown_table(rows))
    setup = bench_setup(model, config, list(results.memory))
    if args.json:
        _write(args.json, json.dumps(report_dict(setup, results), indent=1))
    if args.markdown:
        _write(args.markdown, markdown_report(results, setup, _command_line()))
    if args.plot:
        from .plot import plot_speedups

        plot_speedups(rows, Path(args.plot), f"{model.name}: speedup over plain")
    real = real_difference_lines(results)
    for line in real:
        print(f"pyaccel: output differs from plain decoding: {line}", file=sys.stderr)
    if results.interrupted_of is not None:
        print(f"pyaccel: bench interrupted: the results above (and any --json / --markdown / --plot) hold "
              f"{len(results.prompts)} of {results.interrupted_of} prompts", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_REAL_DIFFERENCE if real else 0


def command(args: argparse.Namespace) -> int:
    from .costs_report import costs_report
    from .plot import INSTALL_HINT, available

    if not args.costs and not args.suite:
        raise ValueError("no suite given: add --suite code, edit, specbench, specbench:CATEGORY or a .jsonl file (or --costs)")
    if args.plot and not available():
        raise ValueError(INSTALL_HINT)  # before the run, not after an hour of it
    config = BenchConfig(suites=args.suite, methods=parse_methods(args.methods), max_tokens=args.max_tokens,
                         prompts=args.prompts, rounds=args.rounds, questions=args.questions, oracle=args.oracle,
                         draft_model=args.draft_model, heads=args.heads)
    prompts = [] if args.costs else load_prompts(config)  # mistakes show before the model loads
    with open_model(args) as model:
        if args.costs:
            print(costs_report(model, args.draft_model))
            return 0
        results = run_bench(model, config, prompts=prompts)
        return write_outputs(args, model, config, results)
