"""Prompt suites for `pyaccel bench`: code tasks and code edits shipped with pyaccel, and
Spec-Bench categories read from its question file.

code: code completion and generation (little to copy). edit: real Python from the
standard library with an editing instruction, so the answer copies much of the prompt
(the renames almost all of it: `copy` is true for those).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

SHIPPED_SUITES = ("code", "edit")
SPECBENCH = "specbench"
# Questions taken from each category by `specbench:CATEGORY` / `specbench` unless --prompts says.
SPECBENCH_PER_CATEGORY = 10
SPECBENCH_MIXED_PER_CATEGORY = 3
QUESTIONS_FILE = "spec_bench_questions.jsonl"


@dataclass(frozen=True)
class BenchPrompt:
    """One benchmark prompt: `text` is applied as a single user turn of the chat template."""

    suite: str
    id: str
    text: str
    copy: bool = False
    source: str = ""


def _read_jsonl(lines: Iterator[str], where: str) -> list[dict[str, Any]]:
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{where} line {n} is not valid JSON ({exc}): fix or remove that line") from None
    return records


def shipped_records(suite: str) -> list[dict[str, Any]]:
    """The raw records of a suite shipped in pyaccel/data/prompts."""
    res = resources.files("pyaccel").joinpath("data", "prompts", f"{suite}.jsonl")
    with res.open("r", encoding="utf-8") as f:
        return _read_jsonl(iter(f), f"pyaccel/data/prompts/{suite}.jsonl")


def _prompt_text(rec: dict[str, Any]) -> str:
    if "code" in rec:
        return f"{rec['instruction']}\n\n```{rec.get('lang', 'python')}\n{rec['code']}```"
    return str(rec["instruction"])


def _shipped(suite: str, limit: int | None) -> list[BenchPrompt]:
    return _prompts(suite, shipped_records(suite)[:limit])


def _prompts(suite: str, records: list[dict[str, Any]]) -> list[BenchPrompt]:
    return [BenchPrompt(suite, str(r["id"]), _prompt_text(r), bool(r.get("copy", False)), str(r.get("source", "")))
            for r in records]


def _user_file(path: Path, limit: int | None) -> list[BenchPrompt]:
    """A suite of the user's own: JSON lines with "id" and "instruction" (and optionally
    "code", appended as a code block in "lang", Python by default, and "copy")."""
    with path.open("r", encoding="utf-8") as f:
        records = _read_jsonl(iter(f), str(path))[:limit]
    for n, rec in enumerate(records, 1):
        if "id" not in rec or "instruction" not in rec:
            raise ValueError(f"{path} record {n} needs \"id\" and \"instruction\" fields")
    return _prompts(path.stem, records)


def find_questions(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The Spec-Bench question file: `explicit`, or ../shared/data/ beside the cwd or the repository."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"no Spec-Bench question file at {path}: check --questions")
        return path
    repo = Path(__file__).resolve().parent.parent
    for base in (Path.cwd(), repo):
        path = base.parent / "shared" / "data" / QUESTIONS_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"Spec-Bench questions ({QUESTIONS_FILE}) not found in ../shared/data: pass --questions PATH "
        "(the file of the Spec-Bench repository, one JSON object with 'category' and 'turns' a line)"
    )


def _specbench(category: str | None, limit: int | None, questions: Path) -> list[BenchPrompt]:
    with questions.open("r", encoding="utf-8") as f:
        records = _read_jsonl(iter(f), str(questions))
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_cat.setdefault(str(rec["category"]), []).append(rec)
    if category is not None and category not in by_cat:
        raise ValueError(f"no Spec-Bench category {category!r}: choose one of {', '.join(sorted(by_cat))}")
    if category is None:
        per_cat = limit if limit is not None else SPECBENCH_MIXED_PER_CATEGORY
        chosen = [(cat, rec) for cat, recs in by_cat.items() for rec in recs[:per_cat]]
        suite = SPECBENCH
    else:
        per_cat = limit if limit is not None else SPECBENCH_PER_CATEGORY
        chosen = [(category, rec) for rec in by_cat[category][:per_cat]]
        suite = f"{SPECBENCH}:{category}"
    return [BenchPrompt(suite, f"{cat}-{rec.get('question_id', i)}", str(rec["turns"][0]))
            for i, (cat, rec) in enumerate(chosen)]


def load_suite(name: str, limit: int | None = None, questions: str | os.PathLike[str] | None = None) -> list[BenchPrompt]:
    """Prompts of suite `name` (code, edit, specbench, specbench:CATEGORY, or a .jsonl file of
    the user's own); at most `limit` (for `specbench`: per category)."""
    if limit is not None and limit < 1:
        raise ValueError(f"--prompts must be >= 1, got {limit}")
    if name in SHIPPED_SUITES:
        return _shipped(name, limit)
    if name.endswith(".jsonl"):
        if not Path(name).is_file():
            raise FileNotFoundError(f"no prompt file {name}: give the path of a JSON-lines file")
        return _user_file(Path(name), limit)
    if name == SPECBENCH or name.startswith(SPECBENCH + ":"):
        category = name.split(":", 1)[1] if ":" in name else None
        return _specbench(category or None, limit, find_questions(questions))
    raise ValueError(f"unknown suite {name!r}: choose code, edit, specbench, specbench:CATEGORY or a .jsonl file")
