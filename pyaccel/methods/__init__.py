"""Decoding methods by name, for the CLI and `Generator(target, method="...")`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .decode import NoDraft
from .types import Proposer

if TYPE_CHECKING:
    from .api import Model


def _plain(target: "Model", **_: Any) -> Proposer:
    return NoDraft()


def _draft(target: "Model", **options: Any) -> Proposer:
    from .draft import DraftModel

    return DraftModel(**options)


def _lookup(target: "Model", **options: Any) -> Proposer:
    from .lookup import PromptLookup

    return PromptLookup(**options)


def _ngram(target: "Model", **options: Any) -> Proposer:
    from .ngram import NgramCacheDrafter

    return NgramCacheDrafter(**options)


def _factories() -> dict[str, Callable[..., Proposer]]:
    return {"plain": _plain, "draft": _draft, "lookup": _lookup, "ngram": _ngram}


def method_names() -> list[str]:
    return sorted(_factories())


def make_method(name: str, target: "Model", **options: Any) -> Proposer:
    factories = _factories()
    if name not in factories:
        raise ValueError(f"unknown method {name!r}: choose one of {', '.join(method_names())}")
    return factories[name](target, **options)
