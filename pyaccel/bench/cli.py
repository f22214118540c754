"""The arguments and the command of `pyaccel bench` (registered by pyaccel.cli)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import registry
from ..cli.args import add_heads_arg, add_model_args, open_model
from ..methods.spec import MethodSpec
from ..paths import check_file_path
from .runner import BENCH_MAX_TOKENS, BenchConfig, BenchResults, load_prompts, run_bench
from .runners import PLAIN, check_drafts, parse_methods
from .tools import TOOL, add_tools, run_tool

if TYPE_CHECKING:
    from ..model import Model
    from .report import SummaryRow

DEFAULT_METHODS = "plain,lookup,draft"
# Exit status when a method's output really differs from plain decoding's (usage errors exit 2).
EXIT_REAL_DIFFERENCE = 1
# Exit status of a run interrupted by Ctrl-C (the shell's for SIGINT), its finished prompts written.
EXIT_INTERRUPTED = 130
# Exit status when --json, --markdown or --plot could not be written after the run (as errors).
EXIT_WRITE_FAILED = 2
# The output files and the file extension each suggests.
OUTPUT_SUFFIX = {"--json": ".json", "--markdown": ".md", "--plot": ".png"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    p.add_argument("--suite", action="append", default=[], metavar="SUITE",
                   help="code, edit, specbench (a few questions of every category), specbench:CATEGORY, or a .jsonl "
                        "file of your own (\"id\", \"instruction\", optional \"code\" per line); repeatable")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help="comma-separated name[:key=value,...]: pyaccel methods (plain, lookup, draft, ...) and the "
                        "llama-cpp-python peers llama-plain, llama-lookup; plain is always added "
                        f"(default: {DEFAULT_METHODS})")
    p.add_argument("--max-tokens", type=int, default=BENCH_MAX_TOKENS,
                   help=f"tokens generated per answer at most, the first one included (default: {BENCH_MAX_TOKENS})")
    p.add_argument("--prompts", type=int, default=None,
                   help="prompts per suite (specbench: per category; default: all of code and edit, "
                        "10 per specbench:CATEGORY, 3 per category of specbench)")
    p.add_argument("--rounds", type=int, default=1, help="times every method runs on every prompt (default 1)")
    p.add_argument("--questions", default=None,
                   help="Spec-Bench question file (default: spec_bench_questions.jsonl in ../shared/data, or in the "
                        "shared/data folder beside the repository)")
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
    p.add_argument("--placements", action="store_true",
                   help="time plain decoding and a 16-token verification for each placement of the weights "
                        "(pyaccel's default, llama.cpp's own, AMX kept out, no repacked kernels) over --rounds "
                        "interleaved rounds; no suites")
    p.add_argument("--draft-model", default=None, help="draft model of draft methods and --costs (default: the registry pair)")
    add_heads_arg(p)
    add_tools(p)


def _write(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def _placements(args: argparse.Namespace) -> int:
    from .placements import report, time_placements

    rounds = max(args.rounds, 2)  # an interval needs more than one round
    path = registry.resolve_model(args.model or registry.load_registry().default)
    print(f"timing {path.name}, {rounds} rounds", file=sys.stderr)
    ratios = time_placements(path, rounds, args.threads, amx=args.amx,
                             progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(report(ratios, rounds))
    return 0


def check_outputs(args: argparse.Namespace, methods: Sequence[MethodSpec]) -> None:
    """--json / --markdown / --plot name files that can be written, and --plot has an image
    format and something to draw: all before the model loads."""
    for flag in OUTPUT_SUFFIX:
        path = getattr(args, flag.lstrip("-"))
        if path:
            check_file_path(path, flag, "bench" + OUTPUT_SUFFIX[flag])
    if not args.plot:
        return
    from .plot import INSTALL_HINT, NOTHING_TO_PLOT, available, check_plot_path

    if not available():
        raise ValueError(INSTALL_HINT)
    check_plot_path(Path(args.plot))
    if not args.oracle and all(m.label == PLAIN for m in methods):
        raise ValueError(NOTHING_TO_PLOT)


def _registry_pair(model: str | None) -> tuple[str, str | None] | None:
    """The name a Model opened as `model` gets and its registry draft pair, read from the
    registry without loading (or pulling) it; None where only opening it can tell (an unknown
    name, a missing file: opening it says what is wrong)."""
    reg = registry.load_registry()
    name = model if model is not None else reg.default
    if not registry.is_local_path(name):
        return (name, reg.models[name].draft) if name in reg.models else None
    path = Path(name).expanduser()
    if not path.is_file():
        return None
    spec = registry.spec_for(registry.model_name(name, path), path)
    return registry.model_name(name, path), spec.draft if spec is not None else None


def check_draft_methods(args: argparse.Namespace, methods: Sequence[MethodSpec]) -> None:
    """Draft methods have a draft model (`runners.check_drafts`), known before the model loads."""
    if not any(m.name == "draft" for m in methods):
        return
    known = _registry_pair(args.model)
    if known is not None:
        check_drafts(methods, known[0], known[1], args.draft_model)


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
    written = _write_files(args, rows, model.name, lambda: report_dict(setup, results),
                           lambda: markdown_report(results, setup, _command_line()))
    real = real_difference_lines(results)
    for line in real:
        print(f"pyaccel: output differs from plain decoding: {line}", file=sys.stderr)
    if results.interrupted_of is not None:
        print(f"pyaccel: bench interrupted: the results above (and any --json / --markdown / --plot) hold "
              f"{len(results.prompts)} of {results.interrupted_of} prompts", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not written:
        return EXIT_WRITE_FAILED
    return EXIT_REAL_DIFFERENCE if real else 0


def _write_files(args: argparse.Namespace, rows: Sequence["SummaryRow"], model_name: str,
                 report: Callable[[], dict[str, Any]], markdown: Callable[[], str]) -> bool:
    """Write --json, --markdown and --plot; a failure is reported and the others still
    written. Whether all were."""
    from .plot import plot_speedups

    writers: list[tuple[str, str | None, Callable[[str], None]]] = [
        ("--json", args.json, lambda path: _write(path, json.dumps(report(), indent=1))),
        ("--markdown", args.markdown, lambda path: _write(path, markdown())),
        ("--plot", args.plot, lambda path: plot_speedups(rows, Path(path), f"{model_name}: speedup over plain")),
    ]
    ok = True
    for flag, path, write in writers:
        if not path:
            continue
        try:
            write(path)
        except (OSError, ValueError, ImportError) as exc:
            print(f"pyaccel: could not write {flag} {path}: {exc}", file=sys.stderr)
            ok = False
    return ok


def command(args: argparse.Namespace) -> int:
    from .costs_report import costs_report

    if getattr(args, TOOL, None) is not None:
        return run_tool(args)
    if args.placements:
        return _placements(args)
    if not args.costs and not args.suite:
        raise ValueError("no suite given: add --suite code, edit, specbench, specbench:CATEGORY or a .jsonl file (or --costs)")
    config = BenchConfig(suites=args.suite, methods=parse_methods(args.methods), max_tokens=args.max_tokens,
                         prompts=args.prompts, rounds=args.rounds, questions=args.questions, oracle=args.oracle,
                         draft_model=args.draft_model, heads=args.heads)
    # Every mistake shows before the model loads, not after an hour of the run.
    prompts = [] if args.costs else load_prompts(config)
    if not args.costs:
        check_outputs(args, config.methods)
        check_draft_methods(args, config.methods)
    with open_model(args) as model:
        if args.costs:
            print(costs_report(model, args.draft_model))
            return 0
        results = run_bench(model, config, prompts=prompts)
        return write_outputs(args, model, config, results)
