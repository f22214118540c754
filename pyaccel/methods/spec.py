"""Method specs: `name[:key=value,...]`, the one syntax wherever a method is named
(`Generator(model, "lookup:max_draft=32")`, `--method`, `pyaccel bench --methods`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MethodSpec:
    """A parsed spec; `label` is the spec as written."""

    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)


def parse_value(text: str) -> Any:
    """int, float, bool or None when the text reads as one, else the string itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _option(item: str, where: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ValueError(f"method option {item!r} in {where!r} needs the form key=value")
    key, value = item.split("=", 1)
    return key.strip(), parse_value(value.strip())


def parse_spec(text: str) -> MethodSpec:
    """One method: `name` or `name:key=value,key=value`."""
    name, _, opts = text.strip().partition(":")
    if not name.strip():
        raise ValueError(f"no method name in {text!r}: write NAME or NAME:key=value,...")
    options: dict[str, Any] = {}
    for item in filter(None, (o.strip() for o in opts.split(","))):
        key, value = _option(item, text)
        if key in options:
            raise ValueError(f"method option {key!r} is given twice in {text!r}")
        options[key] = value
    return MethodSpec(text.strip(), name.strip(), options)


def parse_specs(text: str) -> list[MethodSpec]:
    """Several methods separated by commas. A piece `key=value` without a colon is one more
    option of the method before it ("draft:length=4,max_draft=8,lookup")."""
    groups: list[list[str]] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if "=" in piece and ":" not in piece:
            if not groups:
                raise ValueError(f"option {piece!r} comes before any method: write METHOD:{piece}")
            groups[-1].append(piece)
        else:
            groups.append([piece])
    specs = [parse_spec(",".join(g)) for g in groups]
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"a method is listed twice: {', '.join(labels)}")
    return specs
