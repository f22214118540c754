"""Tuning knobs by name: a method's frozen `*Tuning` dataclass, set from a spec's options.

`lookup:stats_decay=0.95` or `auto:plan_margin=0.05` name a field of the method's tuning
(or of a tuning dataclass nested in it, e.g. `LookupTuning.follower`), not a constructor
argument; `with_tuning_options` moves such options into the `tuning` argument.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

T = TypeVar("T")


def _nested(tuning: Any) -> dict[str, Any]:
    """The fields of `tuning` that are themselves tuning dataclasses, by name."""
    return {f.name: getattr(tuning, f.name) for f in fields(tuning)
            if is_dataclass(getattr(tuning, f.name)) and not isinstance(getattr(tuning, f.name), type)}


def field_names(tuning: Any) -> set[str]:
    """Every name `replace_fields` accepts for `tuning` (an instance or a dataclass type)."""
    inst = tuning() if isinstance(tuning, type) else tuning
    names = {f.name for f in fields(inst)}
    for sub in _nested(inst).values():
        names |= field_names(sub)
    return names


def replace_fields(tuning: T, what: str, **options: Any) -> T:
    """A copy of the frozen dataclass `tuning` with fields replaced by name; a field of a
    nested tuning dataclass is named by its own name. `what` names the tuning in the error
    an unknown name raises."""
    unknown = sorted(set(options) - field_names(tuning))
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)}: choose from {', '.join(sorted(field_names(tuning)))}")
    own = {f.name for f in fields(tuning)}  # type: ignore[arg-type]
    changes = {k: options.pop(k) for k in list(options) if k in own}
    for name, sub in _nested(tuning).items():
        mine = {k: options.pop(k) for k in list(options) if k in field_names(sub)}
        if mine and name not in changes:
            changes[name] = replace_fields(sub, what, **mine)
    return replace(tuning, **changes)  # type: ignore[type-var]


def with_tuning_options(options: dict[str, Any], tuning_type: type, what: str) -> dict[str, Any]:
    """Constructor `options` with those that name a field of `tuning_type` (nested ones
    included) folded into options["tuning"] (a given `tuning` is the base they change)."""
    names = field_names(tuning_type)
    tuned = {k: options[k] for k in options if k in names}
    if not tuned:
        return dict(options)
    rest = {k: v for k, v in options.items() if k not in names}
    rest["tuning"] = replace_fields(rest.get("tuning") or tuning_type(), what, **tuned)
    return rest
