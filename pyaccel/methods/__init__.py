"""Decoding methods: the proposer contract (`base`), each method, and methods by name.

    plain    `NoDraft`            nothing drafted (the baseline)
    draft    `DraftModel`         a small GGUF model with the target's tokenizer
    lookup   `PromptLookup`       copies from the prompt and the output so far
    ngram    `NgramCacheDrafter`  context / dynamic / static n-gram caches
    lookahead `Lookahead`         a Jacobi window and an n-gram pool, no draft model
    medusa   `Medusa`             trained heads over the target's hidden states, tree-verified
    auto     `Auto`               every proposer's candidates in one tree (the default)
"""

from __future__ import annotations

from typing import Any, Callable

from .base import NoDraft, Proposer
from .spec import MethodSpec, parse_spec
from .tuning import check_options, with_tuning_options


def _plain(**options: Any) -> Proposer:
    if options:
        raise ValueError(f"plain decoding takes no options, got {', '.join(options)}")
    return NoDraft()


def _draft(**options: Any) -> Proposer:
    from .draft import DraftModel, DraftTuning

    return DraftModel(**with_tuning_options(options, DraftModel, DraftTuning, "draft"))


def _lookup(**options: Any) -> Proposer:
    from .lookup import PromptLookup
    from .lookup.tuning import LookupTuning

    return PromptLookup(**with_tuning_options(options, PromptLookup, LookupTuning, "lookup"))


def _ngram(**options: Any) -> Proposer:
    from .ngram import NgramCacheDrafter

    check_options(options, NgramCacheDrafter, "ngram")
    return NgramCacheDrafter(**options)


def _lookahead(**options: Any) -> Proposer:
    from .lookahead import Lookahead
    from .lookahead.sizing import LookaheadTuning

    return Lookahead(**with_tuning_options(options, Lookahead, LookaheadTuning, "lookahead"))


def _medusa(**options: Any) -> Proposer:
    from .medusa import Medusa
    from .medusa.proposer import MedusaTuning

    return Medusa(**with_tuning_options(options, Medusa, MedusaTuning, "medusa"))


def _auto(**options: Any) -> Proposer:
    from .auto.proposer import Auto, AutoTuning

    return Auto(**with_tuning_options(options, Auto, AutoTuning, "auto"))


def _factories() -> dict[str, Callable[..., Proposer]]:
    return {"plain": _plain, "draft": _draft, "lookup": _lookup, "ngram": _ngram, "lookahead": _lookahead,
            "medusa": _medusa, "auto": _auto}


# Methods whose proposer reads the target's hidden states: their Model needs embeddings=True.
HIDDEN_STATE_METHODS = frozenset({"medusa"})


def needs_hidden_states(spec: str | MethodSpec) -> bool:
    """Does the method named by `spec` need its Model created with embeddings=True?"""
    return (parse_spec(spec) if isinstance(spec, str) else spec).name in HIDDEN_STATE_METHODS


def method_names() -> list[str]:
    return sorted(_factories())


def make_method(spec: str | MethodSpec, **options: Any) -> Proposer:
    """The method named by `spec` (`name[:key=value,...]`); `options` (those not None) add
    to the spec's. It binds to its target in `Generator`."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    factories = _factories()
    if parsed.name not in factories:
        raise ValueError(f"unknown method {parsed.name!r}: choose one of {', '.join(method_names())}")
    merged = {**parsed.options, **{k: v for k, v in options.items() if v is not None}}
    try:
        return factories[parsed.name](**merged)
    except TypeError as exc:  # an unknown keyword of a method without tuning knobs: say which method
        raise ValueError(f"method {parsed.name!r}: {exc}") from None


__all__ = ["MethodSpec", "NoDraft", "Proposer", "make_method", "method_names", "needs_hidden_states", "parse_spec"]
