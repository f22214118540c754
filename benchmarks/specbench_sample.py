"""Spec-Bench questions the floor runs do not use, as a `pyaccel bench --suite FILE.jsonl`.

`--suite specbench:CATEGORY --prompts 3` takes each category's first 3 questions, and every
tuning decision of `auto` was checked on those. This writes, per category, `--per-category`
questions evenly spread over the ones after the first `--skip`: prompts no knob was set on,
to replay a method over (`benchmarks/replay_passes.py`) or time. Ids are
CATEGORY-QUESTION_ID, as the bench names Spec-Bench prompts (`per_prompt.py --prefix`
groups them by category). Not a pytest module.

    python benchmarks/specbench_sample.py --out bench-results/spec_unseen.jsonl
    pyaccel bench --suite bench-results/spec_unseen.jsonl --methods plain --max-tokens 96 --json bench-results/plain-spec-unseen.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pyaccel.bench.suites import find_questions


def spread(n_questions: int, skip: int, count: int) -> list[int]:
    """`count` indices evenly spread over skip .. n_questions - 1 (all of them if fewer)."""
    free = n_questions - skip
    if free <= count:
        return list(range(skip, n_questions))
    if count == 1:
        return [skip]
    return sorted({skip + (i * (free - 1)) // (count - 1) for i in range(count)})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the .jsonl file to write")
    ap.add_argument("--skip", type=int, default=3, help="questions per category the floor runs use (the first)")
    ap.add_argument("--per-category", type=int, default=5)
    ap.add_argument("--questions", help="Spec-Bench question file (default: ../shared/data)")
    args = ap.parse_args()
    if args.skip < 0 or args.per_category < 1:
        raise SystemExit("--skip must be >= 0 and --per-category >= 1")
    by_cat: dict[str, list[dict]] = {}
    with find_questions(args.questions).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                by_cat.setdefault(str(rec["category"]), []).append(rec)
    rows = [{"id": f"{cat}-{recs[i]['question_id']}", "instruction": str(recs[i]["turns"][0])}
            for cat, recs in by_cat.items() for i in spread(len(recs), args.skip, args.per_category)]
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} questions from {len(by_cat)} categories -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
