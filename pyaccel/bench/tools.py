"""The tools of `pyaccel bench`, each a subcommand that reads or explains results:

    pyaccel bench summary RESULTS.json [MORE.json ...]   pooled tables, intervals, the noise floor
    pyaccel bench replay RESULTS.json ...                 `python -m pyaccel.bench.replay`, as it is
    pyaccel bench passes RESULTS.json --method SPEC       any method's passes replayed, step by step
    pyaccel bench trace --suite SUITE --methods SPECS     live runs traced step by step, priced

A tool is optional: `pyaccel bench --suite ...` without one runs the suites, as it always did.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..cli.args import add_heads_arg, add_model_args, open_model
from ..defaults import N_CTX
from ..paths import check_file_path
from .pooled import BOOTSTRAP_DRAWS, parse_void, read_runs
from .runner import BENCH_MAX_TOKENS

if TYPE_CHECKING:
    from ..model import Model
    from .passes import Recorded
    from .trace import TracedPrompt

TOOL = "tool"  # the namespace attribute naming the tool (None: the bench itself)
NO_PREFIX = "\0"  # a replay subparser that takes every argument as its own (none is an option)


def _ids(text: str | None) -> frozenset[str]:
    return frozenset(i.strip() for i in (text or "").split(",") if i.strip())


def _add_summary(tools: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = tools.add_parser("summary", help="pooled tables of pyaccel bench --json files: suite medians, geometric "
                                         "means with bootstrap intervals, the noise floor, comparisons")
    p.add_argument("results", nargs="+", help="pyaccel bench --json files of the same prompts, pooled")
    p.add_argument("--control", default="plain:", help="the plain-vs-plain control's method label (default plain:)")
    p.add_argument("--void", action="append", default=[], metavar="SUITE:ROUND",
                   help="leave out one round (0-based) of one suite, e.g. one another process disturbed; repeatable")
    p.add_argument("--compare", default=None, metavar="A,B",
                   help="method A against method B prompt by prompt, per suite")
    p.add_argument("--per-prompt", default=None, metavar="METHOD", help="list METHOD's prompts one by one")
    p.add_argument("--prefix", default="", help="with --per-prompt: only the prompts whose id starts with this")
    p.add_argument("--bootstrap", type=int, default=BOOTSTRAP_DRAWS,
                   help=f"resamples of every interval (default {BOOTSTRAP_DRAWS}; 0: no intervals)")


def _add_replay(tools: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    # Its arguments go to the replay module's own parser untouched, whatever options it grows.
    p = tools.add_parser("replay", add_help=False, prefix_chars=NO_PREFIX,
                         help="prompt lookup replayed over a bench's plain outputs with other options or tuning "
                              "(`pyaccel bench replay --help`)")
    p.add_argument("argv", nargs="*")


def _add_passes(tools: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = tools.add_parser("passes", help="a method's passes replayed over a bench's plain outputs, priced on the "
                                        "cost curve, without running the model's passes")
    p.add_argument("results", help="a pyaccel bench --json file (its plain runs are replayed)")
    p.add_argument("-m", "--model", default=None, help="registry name or .gguf path (default: the one the bench ran)")
    p.add_argument("--method", default="auto", help="a method spec (default auto)")
    p.add_argument("--rounds", type=int, default=1, help="times each prompt is replayed in a row, as bench --rounds")
    p.add_argument("--repeats", type=int, default=1, help="passes over all the prompts, the method carried; "
                                                          "the last is reported")
    p.add_argument("--curve", default=None, metavar="SIZE:TIME,...",
                   help="price and plan on this relative cost curve (1:1,2:1.63,4:2.78,...) instead of the "
                        "measured one")
    p.add_argument("--by-prefix", action="store_true", help="medians per prompt-id prefix (a Spec-Bench category)")
    p.add_argument("--oracle", action="store_true", help="each prompt's n-gram oracle bound and the share of it")
    p.add_argument("--shuffle", type=int, default=None, metavar="SEED", help="replay the prompts in a shuffled order")
    p.add_argument("--show", default=None, metavar="IDS", help="print every step of these prompts (comma-separated)")
    p.add_argument("--against", default=None, metavar="SPEC",
                   help="compare --method with this method in --orders shuffled prompt orders")
    p.add_argument("--orders", type=int, default=12, help="prompt orders of --against (default 12)")


def _add_trace(tools: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = tools.add_parser("trace", help="greedy runs traced step by step through the decode loop's trace hook, "
                                       "each priced on the cost curve (a modelled floor without timing noise)")
    add_model_args(p)
    p.add_argument("--suite", action="append", required=True, metavar="SUITE",
                   help="as pyaccel bench --suite; repeatable (specbench is reported per category)")
    p.add_argument("--methods", default="plain,auto", help="as pyaccel bench --methods (default plain,auto)")
    p.add_argument("--prompts", type=int, default=None, help="prompts per suite, as pyaccel bench --prompts")
    p.add_argument("--max-tokens", type=int, default=BENCH_MAX_TOKENS,
                   help=f"tokens per answer at most (default {BENCH_MAX_TOKENS})")
    p.add_argument("--questions", default=None, help="Spec-Bench question file, as pyaccel bench --questions")
    p.add_argument("--fresh", action="store_true",
                   help="a new Generator for every run (default: one per method carried over the prompts, "
                        "as the bench)")
    p.add_argument("--show", default=None, metavar="IDS", help="print every step of these prompts (comma-separated)")
    p.add_argument("--jsonl", default=None, metavar="OUT", help="write each prompt's runs and steps here, one a line")
    p.add_argument("--draft-model", default=None, help="draft model of draft methods (default: the registry pair)")
    add_heads_arg(p)


def add_tools(p: argparse.ArgumentParser) -> None:
    """The tools as optional subcommands of the bench's parser `p`."""
    tools = p.add_subparsers(dest=TOOL, metavar="TOOL",
                             title="tools (optional: without one, pyaccel bench runs the --suite prompts)")
    for add in (_add_summary, _add_replay, _add_passes, _add_trace):
        add(tools)


def _summary(args: argparse.Namespace) -> int:
    from .summary import SummaryOptions, summary_lines

    pair = None
    if args.compare is not None:
        pair = tuple(m.strip() for m in args.compare.split(","))
        if len(pair) != 2 or not all(pair):
            raise ValueError(f"--compare takes two method labels, A,B (auto,lookup), got {args.compare!r}")
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    options = SummaryOptions(args.control, args.bootstrap, pair, args.per_prompt, args.prefix)  # type: ignore[arg-type]
    print("\n".join(summary_lines(read_runs(args.results, parse_void(args.void)), options)))
    return 0


def _replayed(args: argparse.Namespace) -> tuple["Model", "Recorded"]:
    """The model of a passes replay (its cost curve replaced by --curve) and the bench's plain runs."""
    from ..cost_model import CostModel
    from ..model import Model
    from .passes import fixed_curve
    from .replay import read_results, recorded_model, recorded_plain

    data = read_results(args.results)
    curve = fixed_curve(args.curve) if args.curve is not None else None  # a mistake shows before the model loads
    model = Model(args.model if args.model is not None else recorded_model(data["setup"]),
                  n_ctx=data["setup"].get("n_ctx", N_CTX))
    try:
        if curve is not None:
            model.costs = CostModel.fixed(curve)
        recorded = recorded_plain(data, model)
        if not recorded:
            raise ValueError("no prompt of the results has a plain answer past its first token: nothing to replay")
    except BaseException:
        model.close()
        raise
    return model, recorded


def _passes(args: argparse.Namespace) -> int:
    from .passes import PassesOptions, orders_lines, passes_lines

    options = PassesOptions(args.method, args.rounds, args.repeats, args.by_prefix, args.oracle, args.shuffle,
                            _ids(args.show))
    options.validate()
    model, recorded = _replayed(args)
    with model:
        if args.against is not None:
            lines = orders_lines(model, recorded, options, args.against, args.orders)
        else:
            lines = passes_lines(model, recorded, options)
    print("\n".join(lines))
    return 0


def _print_traced(model: "Model", traced: "TracedPrompt", show: frozenset[str], jsonl: TextIO | None) -> None:
    from .trace import jsonl_row, prompt_lines, step_lines

    if traced.prompt.id in show:
        for label, run in traced.runs.items():
            print(f"== {traced.prompt.id} {label}")
            print("\n".join(step_lines(model, run)))
    print("\n".join(prompt_lines(traced)), flush=True)
    if jsonl is not None:
        jsonl.write(json.dumps(jsonl_row(traced)) + "\n")
        jsonl.flush()


def _trace(args: argparse.Namespace) -> int:
    from .runners import parse_methods
    from .suites import load_suite
    from .trace import TraceOptions, check_methods, floor_lines, trace_runs

    methods = parse_methods(args.methods)
    check_methods(methods)
    if args.max_tokens < 2:
        raise ValueError(f"--max-tokens must be >= 2 (one token is the prefill's), got {args.max_tokens}")
    prompts = [p for suite in args.suite for p in load_suite(suite, args.prompts, args.questions)]
    if args.jsonl:
        check_file_path(args.jsonl, "--jsonl", "trace.jsonl")
    options = TraceOptions(args.max_tokens, not args.fresh, args.draft_model, args.heads)
    show, done = _ids(args.show), []
    with open_model(args) as model:
        jsonl = None
        if args.jsonl:
            Path(args.jsonl).parent.mkdir(parents=True, exist_ok=True)
            jsonl = Path(args.jsonl).open("w", encoding="utf-8")
        try:
            for traced in trace_runs(model, methods, prompts, options):
                _print_traced(model, traced, show, jsonl)
                done.append(traced)
        finally:
            if jsonl is not None:
                jsonl.close()
        print("\n" + "\n".join(floor_lines(done)))
    return 0


def run_tool(args: argparse.Namespace) -> int:
    """Run the tool `args` names; its exit status."""
    if args.tool == "replay":
        from .replay import main

        return main(args.argv)
    return {"summary": _summary, "passes": _passes, "trace": _trace}[args.tool](args)
