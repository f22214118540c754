"""Range checks of the Medusa configs, each named by its field, so that the command line
can report a mistake under the flag the user typed ("--heads must be >= 1, got 0")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Problem:
    """One option out of range: `field` (a config field name) and what it must be."""

    field: str
    rule: str  # ">= 1", "> 0", ...
    value: object

    def named(self, names: Mapping[str, str]) -> str:
        return f"{names.get(self.field, self.field)} must be {self.rule}, got {self.value}"


def need(field: str, ok: bool, rule: str, value: object) -> list[Problem]:
    """[] when `ok`, else the problem of `field`. Comparisons with NaN are false, so
    `need("lr", lr > 0, ...)` refuses NaN as well."""
    return [] if ok else [Problem(field, rule, value)]


class OptionError(ValueError):
    """Options out of range; `problems` lets a caller re-word them under its own names."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__(self.named({}))

    def named(self, names: Mapping[str, str]) -> str:
        """The message with each field called by `names` (e.g. its command-line flag)."""
        return "; ".join(p.named(names) for p in self.problems)


def raise_problems(problems: Sequence[Problem]) -> None:
    """Raise OptionError listing `problems`, if any."""
    if problems:
        raise OptionError(problems)
