"""Result rows of the resumable benchmark scripts: one JSON object per line in their --out
file, appended as each prompt finishes, so a rerun skips what is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of `path` (none if it does not exist yet)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def done_keys(path: Path, *fields: str) -> set[tuple[Any, ...]]:
    """The `fields` of every row already in `path`: what a rerun skips."""
    return {tuple(r[f] for f in fields) for r in read_rows(path)}


def append_row(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
