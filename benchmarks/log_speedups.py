"""Speedups read back from a `pyaccel bench` progress log (its stderr), for a run stopped
before it wrote --json (since `pyaccel bench` writes the prompts it finished on Ctrl-C,
only older runs need this): per prompt and round each method's decode tokens/s over plain
decoding's, as the bench computes them (from the logged tokens/s, rounded to 0.01), then
per suite and method the median over prompts of each prompt's median, the lowest prompt,
tau, and `--compare A,B` prompt by prompt. Only prompts every method finished in every
round count. Verdict lines (a run whose output is not identical to plain's) are counted.

    python benchmarks/log_speedups.py /tmp/e52.log --compare auto,lookup
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from dataclasses import dataclass, field

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


def speedups(p: Prompt, method: str) -> list[float]:
    return [r[method][0] / r["plain"][0] for r in p.rounds if r["plain"][0] > 0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--compare", default=None, help="A,B: method A against B prompt by prompt")
    args = ap.parse_args()
    prompts, planned = parse(args.log)
    methods = {m for p in prompts for r in p.rounds for m in r}
    done = complete(prompts, planned, methods)
    print(f"{len(done)} of {len(prompts)} logged prompts finished by every method in all {planned} rounds\n")
    print("| suite | method | prompts | median speedup | lowest prompt | median tau |")
    print("|---|---|---|---|---|---|")
    for suite in dict.fromkeys(p.suite for p in done):
        rows = [p for p in done if p.suite == suite]
        for method in sorted(methods - {"plain"}):
            per = {p.id: statistics.median(speedups(p, method)) for p in rows}
            low = min(per, key=per.get)
            tau = statistics.median(r[method][1] for p in rows for r in p.rounds)
            print(f"| {suite} | {method} | {len(rows)} | {statistics.median(per.values()):.3f}x | "
                  f"{low} {per[low]:.3f}x | {tau:.2f} |")
    if args.compare:
        a, b = args.compare.split(",")
        ratios = [statistics.median(speedups(p, a)) / statistics.median(speedups(p, b)) for p in done]
        ahead = sum(r >= 1.0 for r in ratios)
        gmean = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(f"\n{a} / {b} per prompt: geometric mean {gmean:.3f}, {a} at least level on {ahead} of {len(ratios)}")
    done_ids = {p.id for p in done}
    verdicts = [v for p in prompts if p.id in done_ids for v in p.verdicts]
    print(f"\nruns not identical to plain decoding's: {len(verdicts)}")
    for v in verdicts:
        print(f"  {v}")


if __name__ == "__main__":
    main()
