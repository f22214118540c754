"""Tuning knobs by name: a method's frozen `*Tuning` dataclass, set from a spec's options.

`lookup:stats_decay=0.95` or `auto:plan_margin=0.05` name a field of the method's tuning
(or of a tuning dataclass nested in it, e.g. `LookupTuning.follower`), not a constructor
argument; `with_tuning_options` moves such options into the `tuning` argument. A spec
value is a number, a bool or a string, so only fields of those types are spec options;
tuples and tables (per-bucket priors, measured tau) are set on the dataclass in Python.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable, TypeVar

T = TypeVar("T")
SCALARS = (bool, int, float, str)


def _instance(tuning: Any) -> Any:
    return tuning() if isinstance(tuning, type) else tuning


def _nested(tuning: Any) -> dict[str, Any]:
    """The fields of `tuning` that are themselves tuning dataclasses, by name."""
    return {f.name: getattr(tuning, f.name) for f in fields(tuning)
            if is_dataclass(getattr(tuning, f.name)) and not isinstance(getattr(tuning, f.name), type)}


def field_names(tuning: Any) -> set[str]:
    """Every name `replace_fields` accepts for `tuning` (an instance or a dataclass type)."""
    inst = _instance(tuning)
    names = {f.name for f in fields(inst)}
    for sub in _nested(inst).values():
        names |= field_names(sub)
    return names


def scalar_fields(tuning: Any) -> dict[str, Any]:
    """The spec-settable fields of `tuning` (nested ones included): name -> default value,
    for fields whose value is a number, a bool or a string."""
    inst = _instance(tuning)
    out: dict[str, Any] = {}
    for sub in _nested(inst).values():
        out.update(scalar_fields(sub))
    out.update({f.name: getattr(inst, f.name) for f in fields(inst) if isinstance(getattr(inst, f.name), SCALARS)})
    return out


def replace_fields(tuning: T, what: str, **options: Any) -> T:
    """A copy of the frozen dataclass `tuning` with fields replaced by name; a field of a
    nested tuning dataclass is named by its own name (and applies on top of a nested
    dataclass given whole in the same call). `what` names the tuning in the error an
    unknown name raises."""
    unknown = sorted(set(options) - field_names(tuning))
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)}: choose from {', '.join(sorted(field_names(tuning)))}")
    own = {f.name for f in fields(tuning)}  # type: ignore[arg-type]
    changes = {k: options.pop(k) for k in list(options) if k in own}
    for name, sub in _nested(tuning).items():
        mine = {k: options.pop(k) for k in list(options) if k in field_names(sub)}
        if mine:
            changes[name] = replace_fields(changes.get(name, sub), what, **mine)
    return replace(tuning, **changes)  # type: ignore[type-var]


def _check_type(name: str, default: Any, value: Any) -> None:
    """A spec value must have its field's type (an int where a float is wanted is fine)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
            isinstance(default, float) or isinstance(value, int))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        kind = {bool: "true or false", int: "an integer", float: "a number"}.get(type(default), "a string")
        raise ValueError(f"{name} must be {kind}, got {value!r}")


# A spec value's Python types allowed by each simple annotation of a constructor argument.
_SPEC_KINDS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,),
                                            "None": (type(None),), "PathLike": (str, os.PathLike),
                                            "os.PathLike[str]": (str, os.PathLike)}
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "none",
               "PathLike": "a path", "os.PathLike[str]": "a path"}


def check_arguments(options: dict[str, Any], method: Callable[..., Any], what: str) -> None:
    """Each option against its `method` argument's annotation where that is simple (int,
    float, bool, str, a path, optionally `| None`): a wrong type is an error that names the
    option, not a comparison failing inside the constructor. An argument that takes only
    objects (a tuning dataclass, a cost model) refuses the values a spec can write; an
    `object` argument is left to the constructor."""
    for name, param in inspect.signature(method).parameters.items():
        if name not in options or not isinstance(param.annotation, str):
            continue
        kinds = [k.strip() for k in param.annotation.strip("'\"").split("|")]
        value = options[name]
        if "object" in kinds:
            continue
        known = [k for k in kinds if k in _SPEC_KINDS]
        if len(known) < len(kinds):  # objects too: only a spec's values are checked
            if not isinstance(value, SCALARS) or isinstance(value, tuple(t for k in known for t in _SPEC_KINDS[k])):
                continue
            objects = " or ".join(k for k in kinds if k not in _SPEC_KINDS)
            raise ValueError(f"method {what!r}: {name} takes a Python object ({objects}), which a method spec "
                             "cannot write: pass it in Python")
        ok = isinstance(value, tuple(t for k in kinds for t in _SPEC_KINDS[k]))
        if isinstance(value, bool) and "bool" not in kinds:
            ok = False  # True is an int to Python, not to a user writing max_draft=true
        if not ok:
            raise ValueError(f"method {what!r}: {name} must be {' or '.join(_KIND_WORDS[k] for k in kinds)}, "
                             f"got {value!r}")


def spec_writable(method: Callable[..., Any]) -> list[str]:
    """The arguments of `method` a method spec can give (not those that take only Python
    objects, such as a tuning dataclass or a cost model), sorted: what an error lists."""
    out = []
    for name, param in inspect.signature(method).parameters.items():
        if name == "self":
            continue
        kinds = ([k.strip() for k in param.annotation.strip("'\"").split("|")]
                 if isinstance(param.annotation, str) else ["object"])
        if "object" in kinds or any(k in _SPEC_KINDS and k != "None" for k in kinds):
            out.append(name)
    return sorted(out)


def check_options(options: dict[str, Any], method: Callable[..., Any], what: str) -> None:
    """`options` name arguments of `method` (an unknown one is an error listing those a
    spec can give), each of a type a spec can write (`check_arguments`)."""
    params = set(inspect.signature(method).parameters) - {"self"}
    unknown = sorted(k for k in options if k not in params)
    if unknown:
        raise ValueError(f"method {what!r}: unknown option {', '.join(unknown)}; its options are "
                         f"{', '.join(spec_writable(method))}")
    check_arguments(options, method, what)


def with_tuning_options(options: dict[str, Any], method: Callable[..., Any], tuning_type: type,
                        what: str) -> dict[str, Any]:
    """`method`'s constructor options with those that name a scalar field of `tuning_type`
    (nested ones included) folded into options["tuning"] (a given `tuning` is the base they
    change). A name that is neither an argument of `method` nor such a field is an error
    that lists both."""
    params = set(inspect.signature(method).parameters) - {"self"}
    check_arguments(options, method, what)
    knobs = scalar_fields(tuning_type)
    unknown = sorted(k for k in options if k not in params and k not in knobs)
    if unknown:
        raise ValueError(f"method {what!r}: unknown option {', '.join(unknown)}; its arguments are "
                         f"{', '.join(spec_writable(method))}; its tuning knobs are {', '.join(sorted(knobs))}")
    tuned = {k: v for k, v in options.items() if k in knobs and k not in params}
    for k, v in tuned.items():
        _check_type(f"{what} {k}", knobs[k], v)
    rest = {k: v for k, v in options.items() if k not in tuned}
    if tuned:
        base = rest.get("tuning")
        rest["tuning"] = replace_fields(tuning_type() if base is None else base, f"{what} tuning", **tuned)
    return rest
