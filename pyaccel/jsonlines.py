"""Reading the text and JSON-lines files users give pyaccel (prompt suites, question files,
training data), with errors that name the file, the line and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

JSON_KINDS = {int: "number", float: "number", str: "string", list: "array", bool: "boolean", type(None): "null"}


def read_text(path: Path, hint: str) -> str:
    """The file as UTF-8 text; a ValueError naming it (and ending with `hint`, what to give
    instead) when it is not UTF-8, or when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): {hint}") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path} ({exc.strerror}): check the path and its permissions") from None


def quoted_fields(names: Sequence[str]) -> str:
    """'"a" and "b"': field names as the errors show them."""
    return " and ".join(f'"{k}"' for k in names)


def json_objects(text: str, where: str, required: Sequence[str] = (),
                 shape: str = "named fields") -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line of `text`. A line that is not JSON, not
    a JSON object or lacks a `required` field is a ValueError naming `where` and the line;
    `shape` says what a line should hold when no field is required."""
    records = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON strings may hold U+2028
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where} line {n} is not valid JSON ({exc}): fix or remove that line") from None
        if not isinstance(rec, dict):
            kind = JSON_KINDS.get(type(rec), "value")
            raise ValueError(f"{where} line {n} is a JSON {kind}, not an object: write one object a line, "
                             f"with {quoted_fields(required) or shape}")
        missing = [k for k in required if k not in rec]
        if missing:
            raise ValueError(f"{where} line {n} needs {quoted_fields(required)} fields "
                             f"(it has no {quoted_fields(missing)})")
        records.append((n, rec))
    return records
