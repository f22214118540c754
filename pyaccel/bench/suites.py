"""Prompt suites for `pyaccel bench`: code tasks and code edits shipped with pyaccel, and
Spec-Bench categories read from its question file.

code: code completion and generation (little to copy). edit: real Python from the
standard library with an editing instruction, so the answer copies much of the prompt
(the renames almost all of it: `copy` is true for those).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..jsonlines import json_objects, quoted_fields, read_text

SHIPPED_SUITES = ("code", "edit")
SPECBENCH = "specbench"
# Questions taken from each category by `specbench:CATEGORY` / `specbench` unless --prompts says.
SPECBENCH_PER_CATEGORY = 10
SPECBENCH_MIXED_PER_CATEGORY = 3
QUESTIONS_FILE = "spec_bench_questions.jsonl"
USER_FIELDS = ("id", "instruction")  # of each line of a .jsonl suite
QUESTION_FIELDS = ("category", "turns")  # of each line of the Spec-Bench question file


@dataclass(frozen=True)
class BenchPrompt:
    """One benchmark prompt: `text` is applied as a single user turn of the chat template."""

    suite: str
    id: str
    text: str
    copy: bool = False
    source: str = ""


def _read_file(path: Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """The records of a JSON-lines file of the user's; one with none, or not UTF-8 text, is an
    error that names it."""
    records = [rec for _, rec in json_objects(read_text(path, "save it as UTF-8"), str(path), required)]
    if not records:
        raise ValueError(f"{path} holds no prompts: write one JSON object a line, with {quoted_fields(required)}")
    return records


def shipped_records(suite: str) -> list[dict[str, Any]]:
    """The raw records of a suite shipped in pyaccel/data/prompts."""
    res = resources.files("pyaccel").joinpath("data", "prompts", f"{suite}.jsonl")
    return [rec for _, rec in json_objects(res.read_text(encoding="utf-8"), f"pyaccel/data/prompts/{suite}.jsonl")]


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
    return _prompts(path.stem, _read_file(path, USER_FIELDS)[:limit])


def question_dirs() -> list[Path]:
    """Where the Spec-Bench question file is looked for: the `shared/data` folder beside the
    current directory (`../shared/data`) and the one beside the repository pyaccel runs from
    (for a checkout at /work/main: /work/shared/data), whatever the current directory."""
    repository = Path(__file__).resolve().parents[2]  # pyaccel/bench/suites.py -> the checkout
    return list(dict.fromkeys(base.parent / "shared" / "data" for base in (Path.cwd(), repository)))


def find_questions(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The Spec-Bench question file: `explicit`, or the first in `question_dirs()`."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"no Spec-Bench question file at {path}: check --questions")
        return path
    dirs = question_dirs()
    for folder in dirs:
        path = folder / QUESTIONS_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"Spec-Bench questions ({QUESTIONS_FILE}) not found in {' or '.join(map(str, dirs))}: pass --questions PATH "
        "(the file of the Spec-Bench repository, one JSON object with 'category' and 'turns' a line)"
    )


def _specbench(category: str | None, limit: int | None, questions: Path) -> list[BenchPrompt]:
    records = _read_file(questions, QUESTION_FIELDS)
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
