"""The arguments and the command of `pyaccel bench` (registered by pyaccel.cli)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .runner import BENCH_MAX_TOKENS, BenchConfig, load_prompts, markdown_table, report_dict, run_bench, summarize
from ..cli.args import add_model_args, open_model
from .runners import parse_methods

DEFAULT_METHODS = "plain,lookup,draft"


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
    p.add_argument("--json", default=None, metavar="OUT", help="write every per-prompt result to this JSON file")
    p.add_argument("--oracle", action="store_true",
                   help="also compute the n-gram oracle bound per prompt and each method's share of it")
    p.add_argument("--costs", action="store_true",
                   help="print the measured cost curve and the draft lengths the cost model picks on it; no suites")
    p.add_argument("--draft-model", default=None, help="draft model of draft methods and --costs (default: the registry pair)")


def command(args: argparse.Namespace) -> int:
    from .costs_report import costs_report

    if not args.costs and not args.suite:
        raise ValueError("no suite given: add --suite code, edit, specbench, specbench:CATEGORY or a .jsonl file (or --costs)")
    config = BenchConfig(suites=args.suite, methods=parse_methods(args.methods), max_tokens=args.max_tokens,
                         prompts=args.prompts, rounds=args.rounds, questions=args.questions, oracle=args.oracle,
                         draft_model=args.draft_model)
    prompts = [] if args.costs else load_prompts(config)  # mistakes show before the model loads
    with open_model(args) as model:
        if args.costs:
            print(costs_report(model, args.draft_model))
            return 0
        results = run_bench(model, config, prompts=prompts)
        print(f"{model.name}, {model.backend.n_threads} threads, greedy, at most {config.max_tokens} tokens, "
              f"{config.rounds} round(s); speedup: decode tokens/s over plain's on the same prompt\n")
        print(markdown_table(summarize(results)))
        if args.json:
            out = Path(args.json)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report_dict(model, config, results), indent=1), encoding="utf-8")
    return 0
