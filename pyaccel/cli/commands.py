"""The `pyaccel` command line: generate text, chat, serve, and manage the model registry."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from .. import registry
from ..errors import PyaccelError
from ..types import Result
from .args import (add_method_args, add_model_args, add_sampling_args, add_stop_arg, check_sampling_args,
                   make_method_from_args, open_model)


def _add_generate(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("generate", help="generate text from a prompt")
    p.add_argument("prompt", help="the prompt text ('-' reads it from standard input)")
    add_model_args(p)
    add_method_args(p)
    p.add_argument("--max-tokens", type=int, default=None,
                   help="most new tokens (default: the answer runs to its end, up to the context)")
    add_sampling_args(p)
    add_stop_arg(p)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template as a user turn")
    p.add_argument("--json", action="store_true", help="print one JSON object with text, tokens, finish_reason, stats")
    p.add_argument("--stats", action="store_true", help="print speed statistics to stderr")


def _add_models(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("models", help="list, pull and locate registry models")
    msub = p.add_subparsers(dest="models_cmd", required=True, metavar="COMMAND")
    msub.add_parser("list", help="list known models and whether they are cached")
    pull = msub.add_parser("pull", help="download and verify a model into the cache")
    pull.add_argument("name")
    pull.add_argument("--force", action="store_true", help="fetch again even if cached")
    path = msub.add_parser("path", help="print the cached path of a model (pulling it if needed)")
    path.add_argument("name")
    costs = msub.add_parser("costs", help="show a model's decode-cost curve on this machine (learnt from use, "
                                          "or fully measured)")
    costs.add_argument("name")
    costs.add_argument("--remeasure", action="store_true",
                       help="measure the full curve now (minutes on a small CPU); it replaces the learnt one")
    costs.add_argument("--threads", type=int, default=None,
                       help="the threads the curve is for (default: as a Model picks them)")
    costs.add_argument("--n-gpu-layers", type=int, default=0,
                       help="the offload the curve is for (-1: every layer; default 0)")


def _add_ngram(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("ngram", help="build and inspect n-gram caches for --method ngram")
    nsub = p.add_subparsers(dest="ngram_cmd", required=True, metavar="COMMAND")
    build = nsub.add_parser("build", help="count the n-grams of a corpus into a static cache")
    build.add_argument("corpus", nargs="+", help="text files, or directories walked for *.py, *.md, *.txt, ...")
    build.add_argument("-m", "--model", default=None, help="the model (its tokenizer) the cache will draft for")
    build.add_argument("-o", "--output", required=True, help="the cache file to write")
    build.add_argument("--n-min", type=int, default=1)
    build.add_argument("--n-max", type=int, default=4, help="at most 4")
    info = nsub.add_parser("info", help="print a cache file's n range, size and tokenizer fingerprint")
    info.add_argument("file")


def _add_bench(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..bench.cli import add_arguments

    add_arguments(sub.add_parser("bench", help="measure decoding methods' speedups over prompt suites"))


def _add_chat_and_serve(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..server.cli import add_arguments as add_serve
    from .chat import add_arguments as add_chat

    add_chat(sub.add_parser("chat", help="chat with a model in the terminal"))
    add_serve(sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API (pyaccel[server])"))


def _add_medusa(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from .medusa import add_arguments

    add_arguments(sub.add_parser("medusa", help="train, inspect and evaluate Medusa heads for a model"))


def _version() -> str:
    from .. import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyaccel", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pyaccel {_version()}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add_generate(sub)
    _add_models(sub)
    _add_ngram(sub)
    _add_bench(sub)
    _add_chat_and_serve(sub)
    _add_medusa(sub)
    return parser


def _cmd_models(args: argparse.Namespace) -> int:
    reg = registry.load_registry()
    if args.models_cmd == "list":
        for name, spec in reg.models.items():
            cached = registry.cached_state(spec)
            cached = "damaged: pull --force" if cached == "damaged" else cached
            default = " (default)" if name == reg.default else ""
            draft = f", draft: {spec.draft}" if spec.draft else ""
            print(f"{name}{default}  {spec.size / 1e6:.0f} MB  {spec.license}  [{cached}]{draft}")
            print(f"    {spec.description}")
        _print_leftovers()
        return 0
    if args.models_cmd == "costs":
        return _show_costs(args)
    if args.models_cmd == "pull":
        print(registry.pull(args.name, force=args.force))
        return 0
    print(registry.resolve_model(args.name))
    return 0


def _print_leftovers() -> None:
    """Tell of what pulls killed outright left in the model cache, and how to remove it."""
    from ..leftovers import disk_usage, leftovers

    folder = registry.cache_dir() / "models"
    found = leftovers(folder)
    if found:
        entries = f"{len(found)} temporary {'entry' if len(found) == 1 else 'entries'}"
        print(f"pyaccel: note: killed model pulls left {entries} ({disk_usage(found) / 1e6:.1f} MB) in {folder}; "
              "`pyaccel models pull NAME` (of any model, even a cached one) removes them", file=sys.stderr)


def _show_costs(args: argparse.Namespace) -> int:
    from ..bench.costs_report import curve_table
    from ..cost_model import CostModel
    from ..model import Model

    # The default context, as methods use it.
    with Model(args.name, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers) as model:
        cost_model = CostModel.of(model.backend, remeasure=args.remeasure)
        costs = cost_model.measured
    assert costs is not None
    if cost_model.learnt is not None:
        n = sum(len(v) for v in cost_model.learnt.cells.values())
        print(f"Learnt from use ({n} decodes timed; it grows as the model is used). "
              f"`pyaccel models costs {_costs_args(args)} --remeasure` measures the full curve (minutes).",
              file=sys.stderr)
    print(curve_table(costs))
    return 0


def _costs_args(args: argparse.Namespace) -> str:
    """The model and the options that key the curve shown, as `models costs` takes them."""
    out = [args.name]
    if args.threads is not None:
        out.append(f"--threads {args.threads}")
    if args.n_gpu_layers:
        out.append(f"--n-gpu-layers {args.n_gpu_layers}")
    return " ".join(out)


def _print_stats(result: Result) -> None:
    s = result.stats
    print(
        f"[{s.new_tokens} tokens, {s.tokens_per_s:.2f} tok/s, prefill {s.prefill_s:.2f}s, "
        f"tau {s.tau:.2f}, target passes {s.target_forwards}, finish: {result.finish_reason}]",
        file=sys.stderr,
    )
    if s.accepted_by:
        by = ", ".join(f"{name} {n}" for name, n in sorted(s.accepted_by.items(), key=lambda kv: -kv[1]))
        print(f"[accepted draft tokens by proposer: {by}]", file=sys.stderr)


def _cmd_ngram(args: argparse.Namespace) -> int:
    from ..methods import ngram

    if args.ngram_cmd == "info":
        cache = ngram.load_cache(args.file)
        vocab = f"{cache.vocab:#010x}" if cache.vocab else "not recorded (saved by an older pyaccel)"
        print(f"n_min: {cache.n_min}\nn_max: {cache.n_max}\nsize: {len(cache)}\ntokenizer fingerprint: {vocab}")
        if cache.vocab:
            print(f"cached models with this tokenizer: {', '.join(_models_of_vocab(cache.vocab)) or 'none'}")
        return 0
    from ..model import Model

    files = ngram.corpus_files(args.corpus)
    ngram.check_cache_path(args.output)  # before the build, not after it
    with Model(args.model, n_ctx=64) as model:  # only the tokenizer is used
        cache, skipped = ngram.build_cache(model, files, args.n_min, args.n_max)
    ngram.save_cache(cache, args.output)
    note = f", {skipped} non-UTF-8 files skipped" if skipped else ""
    print(f"{args.output}: {len(cache)} n-grams (n {args.n_min}..{args.n_max}) from {len(files)} files{note}",
          file=sys.stderr)
    return 0


def _models_of_vocab(fingerprint: int) -> list[str]:
    """The cached registry models whose vocabulary has this fingerprint (their vocabularies
    alone are read: under a second each)."""
    from ..backend import VocabularyFile

    reg = registry.load_registry()
    names = []
    for name, spec in reg.models.items():
        if registry.cached_state(spec) == "cached":
            with VocabularyFile(registry.model_cache_path(spec)) as vocabulary:
                if vocabulary.vocab_fingerprint == fingerprint:
                    names.append(name)
    return names


def _cmd_generate(args: argparse.Namespace) -> int:
    from ..generator import Generator

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt or args.chat and not prompt.strip():
        raise ValueError("the prompt is empty: give the text to continue (or, with --chat, to answer)")
    check_sampling_args(args)
    method = make_method_from_args(args)
    model = open_model(args)
    gen = Generator(model, method)
    # Like llama-cli, an answer runs to its end unless told otherwise: the loop stops at
    # EOS, a stop string, or a full context.
    max_tokens = args.max_tokens if args.max_tokens is not None else model.n_ctx
    kwargs = dict(max_tokens=max_tokens, temperature=args.temperature, top_k=args.top_k,
                  top_p=args.top_p, min_p=args.min_p, seed=args.seed, stop=args.stop)
    source = model.chat_prompt([{"role": "user", "content": prompt}]) if args.chat else prompt
    result: Result | None = None
    for item in gen.stream(source, **kwargs):
        if isinstance(item, Result):
            result = item
        elif not args.json:
            sys.stdout.write(item)
            sys.stdout.flush()
    assert result is not None
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        sys.stdout.write("\n")
    if args.stats:
        _print_stats(result)
    gen.close()
    model.close()
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.cli import command

    return command(args)


def _cmd_chat_or_serve(args: argparse.Namespace) -> int:
    from ..server.cli import command as serve
    from .chat import command as chat

    return chat(args) if args.cmd == "chat" else serve(args)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """parse_args, except that an unknown option is reported with the usage of the
    subcommand it was given to (`pyaccel generate --bogus` shows generate's usage)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        owner = parser
        while True:
            subs = [a for a in owner._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = getattr(args, subs[0].dest, None) if subs else None
            if chosen is None:
                break
            owner = subs[0].choices[chosen]
        owner.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(build_parser(), argv)
    try:
        if args.cmd == "models":
            return _cmd_models(args)
        if args.cmd == "ngram":
            return _cmd_ngram(args)
        if args.cmd == "bench":
            return _cmd_bench(args)
        if args.cmd in ("chat", "serve"):
            return _cmd_chat_or_serve(args)
        if args.cmd == "medusa":
            from .medusa import command as medusa

            return medusa(args)
        return _cmd_generate(args)
    except (PyaccelError, ValueError, FileNotFoundError) as exc:
        print(f"pyaccel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pyaccel generate ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except OSError as exc:  # a path that cannot be read or written (a file where a folder should be)
        print(f"pyaccel: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
