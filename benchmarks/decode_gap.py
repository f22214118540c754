"""Does a longer pause between decodes slow the decodes themselves? Plain decoding with a
fixed amount of busy work added to every step (what a method's own time does between the
target's passes: the runtime's worker threads wait longer, the caches cool), each gap its
own Generator, taking turns in alternating order. Reports the target's median time per
pass for each gap. Not a pytest module.

    python benchmarks/decode_gap.py --gaps-us 0,500,1000,3000 --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import time

from pyaccel import Generator, Model
from pyaccel.methods.base import NoDraft
from pyaccel.types import Draft

PROMPT = "Write a short essay on the history of the printing press."


class BusyGap(NoDraft):
    """Plain decoding that spends `us` microseconds of busy work before each step."""

    name = "busy-gap"

    def __init__(self, us: int) -> None:
        self.us = us

    def propose(self, tokens: list[int], budget: int) -> Draft:
        end = time.perf_counter() + self.us * 1e-6
        while time.perf_counter() < end:
            pass
        return Draft.empty()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--gaps-us", default="0,500,1000,3000")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    model = Model(args.model, progress=False)
    prompt = model.chat_prompt([{"role": "user", "content": PROMPT}])
    gaps = [int(g) for g in args.gaps_us.split(",")]
    gens = {g: Generator(model, BusyGap(g)) for g in gaps}
    for gen in gens.values():
        gen.generate(prompt, max_tokens=4, temperature=0.0)  # warm-up
    per_pass: dict[int, list[float]] = {g: [] for g in gaps}
    for rnd in range(args.rounds):
        for g in gaps if rnd % 2 == 0 else gaps[::-1]:
            gens[g].reset()
            stats = gens[g].generate(prompt, max_tokens=args.max_tokens, temperature=0.0).stats
            per_pass[g].append(1e3 * stats.target_s / stats.target_forwards)
    print("| gap per step | target ms per pass, median | runs |")
    print("|---|---|---|")
    for g in gaps:
        runs = " ".join(f"{x:.2f}" for x in per_pass[g])
        print(f"| {g} us | {statistics.median(per_pass[g]):.2f} | {runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
