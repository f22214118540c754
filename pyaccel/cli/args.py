"""Arguments shared by every command that opens a model or names a method (generate,
bench, and later chat and serve): one definition each, one way to turn them into objects."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..methods import make_method, method_names, needs_hidden_states
from ..methods.spec import parse_spec, parse_specs

if TYPE_CHECKING:
    from ..methods.base import Proposer
    from ..model import Model


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", default=None,
                   help="registry name or path to a .gguf (default: the registry default)")
    p.add_argument("--n-ctx", type=int, default=defaults.N_CTX, help=f"context size in tokens (default {defaults.N_CTX}; llama.cpp rounds it up to a multiple of 256)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (0 or unset: all cores on small machines)")
    p.add_argument("--n-gpu-layers", type=int, default=0, help="layers offloaded to a GPU build (-1: all)")
    p.add_argument("--amx", action="store_true",
                   help="let llama.cpp use its AMX matmul on Intel CPUs that have AMX (off by default: it crashes on some)")
    p.add_argument("--verbose", action="store_true", help="show llama.cpp's own log")


def _methods_named(args: argparse.Namespace) -> list[str]:
    """Every method spec on the command line: --method, serve's --also-method, bench's --methods."""
    named = [args.method] if getattr(args, "method", None) else []
    named += list(getattr(args, "also_method", None) or [])
    if getattr(args, "methods", None):
        named += [spec.label for spec in parse_specs(args.methods)]
    return named


def open_model(args: argparse.Namespace, **overrides: Any) -> "Model":
    """The Model of the command line; with hidden states where a method named reads them (medusa)."""
    from ..model import Model

    kwargs: dict[str, Any] = dict(n_ctx=args.n_ctx, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers,
                                  amx=args.amx, verbose=args.verbose)
    if _wants_hidden_states(args):
        kwargs["embeddings"] = True
    kwargs.update(overrides)
    return Model(args.model, **kwargs)


def _wants_hidden_states(args: argparse.Namespace) -> bool:
    """A method named reads hidden states: medusa, or auto where it has Medusa heads to use
    (--heads, or heads `pyaccel medusa train` wrote for this model)."""
    specs = [parse_spec(spec) for spec in _methods_named(args)]
    if any(needs_hidden_states(spec) for spec in specs):
        return True
    autos = [spec for spec in specs if spec.name == "auto" and spec.options.get("medusa") is not False]
    if not autos:
        return False
    if getattr(args, "heads", None) or any(isinstance(spec.options.get("medusa"), str) for spec in autos):
        return True
    return _heads_cached(args.model)


def _heads_cached(model: str | None) -> bool:
    """Are there heads `pyaccel medusa train` wrote for the model named on the command line?
    (Never pulls the model: one not on this machine has none.)"""
    from .. import registry
    from ..errors import ModelNotFoundError
    from ..methods.medusa.format import cached_heads_path

    name = model if model is not None else registry.load_registry().default
    try:
        path = registry.resolve_model(name, pull_missing=False, progress=False)
    except ModelNotFoundError:
        return False
    return cached_heads_path(registry.model_name(name, path), path).exists()


def add_stop_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")


def add_sampling_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", type=float, default=defaults.TEMPERATURE, help="0 is greedy (default)")
    p.add_argument("--top-k", type=int, default=defaults.TOP_K)
    p.add_argument("--top-p", type=float, default=defaults.TOP_P)
    p.add_argument("--min-p", type=float, default=defaults.MIN_P)
    p.add_argument("--seed", type=int, default=None, help="a fixed seed for sampling (-1 or unset: random)")


def check_sampling_args(args: argparse.Namespace) -> None:
    """Mistakes in the sampling options and --max-tokens, reported before the model takes
    seconds to load."""
    from ..types import SamplingConfig

    SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                   seed=args.seed).validate()
    if args.max_tokens is not None and args.max_tokens < 0:
        raise ValueError(f"--max-tokens must be >= 0, got {args.max_tokens}")


def method_spec(text: str) -> str:
    """argparse type of --method: a spec whose name is a known method."""
    try:
        spec = parse_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if spec.name not in method_names():
        raise argparse.ArgumentTypeError(f"unknown method {spec.name!r}: choose one of {', '.join(method_names())}")
    return text


def add_method_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", default=defaults.METHOD, type=method_spec, metavar="SPEC",
                   help=f"decoding method: {', '.join(method_names())}, with options as NAME:key=value,... "
                        f"(default: {defaults.METHOD})")
    p.add_argument("--draft-model", default=None,
                   help="draft model for --method draft or auto (default: the registry pair)")
    p.add_argument("--draft-length", type=_draft_length, default=None, metavar="K",
                   help="fixed draft length, K >= 1 (default: chosen by the measured cost model)")
    p.add_argument("--ngram-static", default=None, metavar="FILE",
                   help="static cache for --method ngram or auto (pyaccel ngram build)")
    p.add_argument("--ngram-dynamic", default=None, metavar="FILE",
                   help="dynamic cache for --method ngram or auto: loaded if it exists, updated after the "
                        "generation")
    add_heads_arg(p)


def _draft_length(text: str) -> int:
    """--draft-length: a whole number >= 1 (0 would draft nothing, plain decoding in disguise)."""
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {k} (to draft nothing, use --method plain)")
    return k


def add_heads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", default=None, metavar="FILE",
                   help="Medusa heads for --method medusa or auto (default: those `pyaccel medusa train` wrote "
                        "for the model, if any)")


# The method options of the command line, and the methods each applies to.
_FLAG_METHODS = {"draft_model": ("draft", "auto"), "draft_length": ("draft", "lookup", "ngram"),
                 "ngram_static": ("ngram", "auto"), "ngram_dynamic": ("ngram", "auto"), "heads": ("medusa", "auto")}


def _check_flags_apply(args: argparse.Namespace, method: str) -> None:
    """A method option given for a method it does not apply to is an error (it would be
    ignored, and the user believe it in effect)."""
    for dest, methods in _FLAG_METHODS.items():
        if getattr(args, dest, None) is not None and method not in methods:
            flag = "--" + dest.replace("_", "-")
            raise ValueError(f"{flag} does not apply to --method {method}: it is for "
                             f"{' or '.join(methods)}; drop it or pick one of those")


def make_method_from_args(args: argparse.Namespace) -> "Proposer":
    spec = parse_spec(args.method)
    options: dict[str, Any] = {"length": args.draft_length}
    if spec.name == "draft":
        options["draft"] = args.draft_model
    elif spec.name == "ngram":
        options.update(static_path=args.ngram_static, dynamic_path=args.ngram_dynamic)
    elif spec.name == "auto":
        if args.draft_length is not None:
            raise ValueError("--draft-length fixes one method's draft; auto sizes its drafts by the cost model: "
                             "drop it, or pick a method (e.g. --method lookup)")
        options = {"draft": args.draft_model, "ngram_static": args.ngram_static, "ngram_dynamic": args.ngram_dynamic,
                   "medusa": args.heads}
    elif spec.name == "medusa":
        if args.draft_length is not None:
            raise ValueError("--draft-length fixes a chain's length; medusa verifies a tree sized by the cost model "
                             "(or medusa:cost_model=false for the whole tree): drop --draft-length")
        options = {"heads": args.heads}
    elif spec.name == "plain":
        options = {}
    _check_flags_apply(args, spec.name)
    return make_method(spec, **options)
