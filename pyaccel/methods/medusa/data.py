"""Training data for Medusa heads: the prompts, their train / held-out split, and the shards
of hidden states that collection writes.

Split: in every category (a Spec-Bench category, the shipped code / edit suites, each
--data file) every HOLD_OUT_EVERY-th prompt (1-based, by file order) is held out. Training
and evaluation both call `held_out`, so heads are never trained on an evaluation prompt.

A shard (npz) holds whole sequences, one prompt each, rows in position order:

    hidden    [N, d] float16   the target's final normed hidden state at a position
    next      [N] int32        the target's greedy token after that position (for answer
                               rows: the answer's next token)
    seq       [N] int32        sequence index within the shard
    prompt    [N] bool         row of the prompt (its last `prompt_rows` positions)
    ids       [S] str          prompt id of each sequence
    category  [S] str

Head k (1..K) at row r learns `next[r + k]` (the token k + 1 steps after the position),
`labels` builds those columns; rows whose sequence ends too early get -1.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ...jsonlines import json_objects, read_text

HOLD_OUT_EVERY = 5
TRAIN, EVAL = "train", "eval"
_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class TrainPrompt:
    """One prompt, applied as a single user turn of the target's chat template."""

    id: str  # unique across sources: "<source>/<id>"
    category: str
    text: str
    held_out: bool


def held_out(index_in_category: int) -> bool:
    """The split rule: the 5th, 10th, ... prompt of every category is held out."""
    return index_in_category % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1


def _split(source: str, records: Iterable[tuple[str, str, str]]) -> list[TrainPrompt]:
    """(category, id, text) records in file order -> prompts with the split applied per category."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for category, rid, text in records:
        out.append(TrainPrompt(f"{source}/{rid}", category, text, held_out(seen[category])))
        seen[category] += 1
    return out


def _read_text(path: Path) -> str:
    return read_text(path, "give a text file of prompts")


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line; each line must be one JSON object."""
    return json_objects(_read_text(path), str(path), shape='a "prompt" or "instruction" field')


def specbench_prompts(questions: Path) -> list[TrainPrompt]:
    """The first turn of every Spec-Bench question, split per category."""
    records = []
    for i, (n, r) in enumerate(_read_jsonl(questions)):
        turns = r.get("turns")
        if "category" not in r or not isinstance(turns, list) or not turns:
            raise ValueError(f"{questions} line {n} is not a Spec-Bench question (one JSON object with a "
                             "'category' and a non-empty list 'turns' a line): pass the Spec-Bench question "
                             "file as --questions, or your own prompts as --data FILE")
        records.append((str(r["category"]), f"{r['category']}-{r.get('question_id', i)}", str(turns[0])))
    return _split("specbench", records)


def shipped_prompts() -> list[TrainPrompt]:
    """pyaccel's own code and edit prompts (pyaccel/data/prompts), split per suite."""
    from ...bench.suites import _prompt_text, shipped_records

    out = []
    for suite in ("code", "edit"):
        out += _split(suite, ((suite, str(r["id"]), _prompt_text(r)) for r in shipped_records(suite)))
    return out


def _record_text(rec: dict[str, Any], path: Path, n: int) -> str:
    if "instruction" in rec:
        code = f"\n\n```python\n{rec['code']}```" if "code" in rec else ""
        return f"{rec['instruction']}{code}"
    for key in ("prompt", "text", "question"):
        if key in rec:
            return str(rec[key])
    if "turns" in rec and rec["turns"]:
        return str(rec["turns"][0])
    raise ValueError(f"{path} line {n} has none of the fields instruction, prompt, text, question, turns: "
                     "give each line one of them")


def file_prompts(path: str | os.PathLike[str]) -> list[TrainPrompt]:
    """A file of the user's own: JSON lines (fields instruction [+ code], prompt, text,
    question or turns; optional category) or plain text (prompts separated by blank lines)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no data file {path}: give JSON lines or a text file of prompts")
    if path.suffix in (".jsonl", ".json"):
        items = [(str(r.get("category", path.stem)), str(r.get("id", i)), _record_text(r, path, n))
                 for i, (n, r) in enumerate(_read_jsonl(path), 1)]
    else:
        blocks = [b.strip() for b in _read_text(path).split("\n\n")]
        items = [(path.stem, str(n), b) for n, b in enumerate((b for b in blocks if b), 1)]
    if not items:
        raise ValueError(f"{path} holds no prompts: give JSON lines with a \"prompt\" or \"instruction\" field, or "
                         "text with prompts separated by blank lines")
    return _split(f"file:{path.name}", items)


def default_prompts(questions: Path | None, data: Sequence[str | os.PathLike[str]] = ()) -> list[TrainPrompt]:
    """The prompts of a run: the user's --data files if given, else Spec-Bench (found as
    `pyaccel bench` finds it) and pyaccel's code prompts."""
    if data:
        return [p for f in data for p in file_prompts(f)]
    from ...bench.suites import find_questions

    if questions is not None:  # find_questions says what is wrong with the file given
        return specbench_prompts(find_questions(questions)) + shipped_prompts()
    try:
        path = find_questions(None)
    except FileNotFoundError:
        raise FileNotFoundError(
            "the Spec-Bench questions (spec_bench_questions.jsonl) are not in ../shared/data: pass "
            "--questions PATH to that file, or --data FILE with prompts of your own (JSON lines with an "
            "\"instruction\" or \"prompt\" field, or plain text with prompts separated by blank lines)") from None
    return specbench_prompts(path) + shipped_prompts()


def interleave(prompts: Sequence[TrainPrompt]) -> list[TrainPrompt]:
    """Round-robin over categories, file order within each: a run cut short by its time
    budget still covers every category."""
    by_cat: dict[str, list[TrainPrompt]] = defaultdict(list)
    for p in prompts:
        by_cat[p.category].append(p)
    queues = list(by_cat.values())
    out: list[TrainPrompt] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


# ---- shards -----------------------------------------------------------------------------------


@dataclass
class Collected:
    """One collected sequence before it is written."""

    id: str
    category: str
    hidden: npt.NDArray[np.float16]  # [n, d]
    next: npt.NDArray[np.int32]  # [n]
    prompt_rows: int  # the first prompt_rows rows are prompt positions


@dataclass
class Dataset:
    """Rows of one split, concatenated over shards (see the module docstring)."""

    hidden: npt.NDArray[np.float16]
    next: npt.NDArray[np.int32]
    seq: npt.NDArray[np.int64]  # global sequence index
    prompt: npt.NDArray[np.bool_]
    category: npt.NDArray[np.int32]  # index into `categories`, per row
    categories: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.next.shape[0])

    def select(self, rows: npt.NDArray[np.bool_]) -> "Dataset":
        return Dataset(self.hidden[rows], self.next[rows], self.seq[rows], self.prompt[rows], self.category[rows],
                       self.categories)


def labels(ds: Dataset, n_heads: int) -> npt.NDArray[np.int32]:
    """[N, n_heads + 1]: column k is next[r + k] within the row's sequence, else -1.
    Column 0 is the target's own next token; head k trains on column k."""
    n = len(ds)
    out = np.full((n, n_heads + 1), -1, dtype=np.int32)
    for k in range(n_heads + 1):
        same = np.zeros(n, dtype=bool)
        same[: n - k] = ds.seq[k:] == ds.seq[: n - k]
        out[: n - k, k] = np.where(same[: n - k], ds.next[k:], -1)
    return out


class DataStore:
    """Shards of one target's data in a folder, with a manifest of the prompts done per split
    (what makes collection resumable)."""

    def __init__(self, root: Path, target_sha256: str, n_embd: int) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest = self._load_manifest(target_sha256, n_embd)

    def _load_manifest(self, sha: str, n_embd: int) -> dict[str, Any]:
        path = self.root / _MANIFEST
        fresh: dict[str, Any] = {"target_sha256": sha, "n_embd": n_embd, "done": {TRAIN: [], EVAL: []},
                                 "shards": {TRAIN: [], EVAL: []}, "rows": {TRAIN: 0, EVAL: 0},
                                 "seconds": {TRAIN: 0.0, EVAL: 0.0}}
        if not path.is_file():
            return fresh
        try:
            got = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {path} ({exc}): delete the folder {self.root} and train again") from None
        if not isinstance(got, dict) or got.get("target_sha256") != sha or got.get("n_embd") != n_embd:
            raise ValueError(f"the data in {self.root} was not collected for this model: delete that folder and "
                             "train again")
        return got

    def done(self, split: str) -> set[str]:
        return set(self.manifest["done"][split])

    def rows(self, split: str) -> int:
        return int(self.manifest["rows"][split])

    def write(self, split: str, seqs: Sequence[Collected]) -> None:
        """Append a shard of finished sequences and record their prompts as done."""
        if not seqs:
            return
        name = f"{split}-{len(self.manifest['shards'][split]):05d}.npz"
        tmp = self.root / f".{name}.{os.getpid()}.npz"
        np.savez(tmp, hidden=np.concatenate([s.hidden for s in seqs]),
                 next=np.concatenate([s.next for s in seqs]),
                 seq=np.concatenate([np.full(len(s.next), i, np.int32) for i, s in enumerate(seqs)]),
                 prompt=np.concatenate([np.arange(len(s.next)) < s.prompt_rows for s in seqs]),
                 ids=np.array([s.id for s in seqs]), category=np.array([s.category for s in seqs]))
        os.replace(tmp, self.root / name)
        m = self.manifest
        m["shards"][split].append(name)
        m["done"][split] += [s.id for s in seqs]
        m["rows"][split] += int(sum(len(s.next) for s in seqs))
        self._save_manifest()

    def seconds(self, split: str) -> float:
        """Collection time spent on `split` so far, over every run."""
        return float(self.manifest["seconds"][split])

    def add_seconds(self, split: str, seconds: float) -> None:
        self.manifest["seconds"][split] += seconds
        self._save_manifest()

    def clear(self) -> None:
        """Forget everything collected (a run without --resume starts afresh)."""
        for name in self.manifest["shards"][TRAIN] + self.manifest["shards"][EVAL]:
            (self.root / name).unlink(missing_ok=True)
        self.manifest = {**self.manifest, "done": {TRAIN: [], EVAL: []}, "shards": {TRAIN: [], EVAL: []},
                         "rows": {TRAIN: 0, EVAL: 0}, "seconds": {TRAIN: 0.0, EVAL: 0.0}}
        self._save_manifest()

    def mark_skipped(self, split: str, ids: Sequence[str]) -> None:
        self.manifest["done"][split] += list(ids)
        self._save_manifest()

    def _save_manifest(self) -> None:
        tmp = self.root / f".{_MANIFEST}.{os.getpid()}"
        tmp.write_text(json.dumps(self.manifest), encoding="utf-8")
        os.replace(tmp, self.root / _MANIFEST)

    def load(self, split: str) -> Dataset:
        """Every row of `split`; raises when nothing was collected."""
        shards = self.manifest["shards"][split]
        if not shards:
            raise ValueError(f"no {split} data in {self.root}: collect it first (`pyaccel medusa train` does)")
        parts: dict[str, list[Any]] = defaultdict(list)
        cats: dict[str, int] = {}
        base = 0
        for name in shards:
            with np.load(self.root / name) as z:
                seq = z["seq"].astype(np.int64)
                seq_cat = np.array([cats.setdefault(str(c), len(cats)) for c in z["category"]], np.int32)
                parts["hidden"].append(z["hidden"])
                parts["next"].append(z["next"])
                parts["seq"].append(seq + base)
                parts["prompt"].append(z["prompt"])
                parts["category"].append(seq_cat[seq])
                base += len(z["ids"])
        hidden, nxt, seq, prompt, category = (np.concatenate(parts[k])
                                              for k in ("hidden", "next", "seq", "prompt", "category"))
        return Dataset(hidden, nxt, seq, prompt, category, tuple(cats))
