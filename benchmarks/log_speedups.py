"""A `pyaccel bench` progress log (its stderr) turned back into its `--json` shape, for a run
stopped before it wrote --json (since `pyaccel bench` writes the prompts it finished on
Ctrl-C, only older runs need this). Per prompt and round each method's decode tokens/s over
plain decoding's, as the bench computes them (from the logged tokens/s, rounded to 0.01),
and its tau. Only prompts every method finished in every round are kept. Verdict lines (a
run whose output is not identical to plain's) are printed. The statistics are
`pooled_rounds.py`'s:

    python benchmarks/log_speedups.py bench-results/e52.log --json bench-results/e52.json
    python benchmarks/pooled_rounds.py bench-results/e52.json --compare auto,lookup
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROMPT = re.compile(r"^\[(\d+)/(\d+)\] (\S+) (\S+) \(")
ROUND = re.compile(r"^  round (\d+)/(\d+)")
RUN = re.compile(r"^    (\S+): (\d+) tokens, ([\d.]+) tok/s(?:, tau ([\d.]+))?")
VERDICT = re.compile(r"^    (\S+): (?!\d+ tokens)(.+)")


@dataclass
class Prompt:
    suite: str
    id: str
    rounds: list[dict[str, tuple[float, float]]] = field(default_factory=list)  # method -> (tok/s, tau)
    verdicts: list[str] = field(default_factory=list)


def parse(path: str) -> tuple[list[Prompt], int]:
    """The prompts of the log in order, each with its rounds' runs; and the rounds planned."""
    prompts: list[Prompt] = []
    planned = 0
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if m := PROMPT.match(line):
            prompts.append(Prompt(m.group(3), m.group(4)))
        elif (m := ROUND.match(line)) and prompts:
            planned = int(m.group(2))
            prompts[-1].rounds.append({})
        elif (m := RUN.match(line)) and prompts and prompts[-1].rounds:
            prompts[-1].rounds[-1][m.group(1)] = (float(m.group(3)), float(m.group(4) or 1.0))
        elif (m := VERDICT.match(line)) and prompts:
            prompts[-1].verdicts.append(f"{prompts[-1].id} {m.group(1)}: {m.group(2)}")
    return prompts, planned


def complete(prompts: list[Prompt], planned: int, methods: set[str]) -> list[Prompt]:
    return [p for p in prompts if len(p.rounds) == planned and all(methods <= set(r) for r in p.rounds)]


def as_json(prompts: list[Prompt]) -> dict[str, Any]:
    """The bench's `--json` shape, as far as a log tells it: per prompt its suite, id and
    runs (method, round, speedup over plain decoding in that round, tau)."""
    return {"prompts": [
        {"suite": p.suite, "id": p.id,
         "runs": [{"method": m, "round": k, "speedup": (rate / r["plain"][0] if r["plain"][0] > 0 else None),
                   "tau": tau}
                  for k, r in enumerate(p.rounds) for m, (rate, tau) in r.items()]}
        for p in prompts]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--json", required=True, help="where to write the runs, in the bench's --json shape")
    args = ap.parse_args()
    prompts, planned = parse(args.log)
    methods = {m for p in prompts for r in p.rounds for m in r}
    done = complete(prompts, planned, methods)
    Path(args.json).write_text(json.dumps(as_json(done), indent=1), encoding="utf-8")
    print(f"{len(done)} of {len(prompts)} logged prompts finished by every method in all {planned} rounds: "
          f"written to {args.json}")
    verdicts = [v for p in done for v in p.verdicts]
    print(f"runs not identical to plain decoding's: {len(verdicts)}")
    for v in verdicts:
        print(f"  {v}")


if __name__ == "__main__":
    main()
