"""auto on a fresh Generator (no calibration record), one tuning against another: what the
margin a plan must clear while its proposers have little verified record
(`AutoTuning.cold_margin`) changes, prompt by prompt.

Each generation runs on a new Generator (as every `pyaccel generate` call does), greedy,
and is scored by its *modelled* speedup: decoded tokens over the sum, per step, of the
measured cost curve's time for that step's batch (1 + drafted tokens) at its depth, in
single-token times. Outputs are identical under greedy decoding whatever the tuning, so
the modelled figure compares tunings without the machine's timing noise; it leaves out
auto's own time per step (the same code in every tuning). The wall-clock decode time is
reported beside it.

    python benchmarks/auto_cold_start.py --cold-margins 0,0.2 --prompts 3 \
        --jsonl bench-results/auto-cold.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pyaccel import Auto, Generator, Model
from pyaccel.bench.suites import load_suite
from pyaccel.methods.auto.policy import AutoTuning

CATEGORIES = ("writing roleplay reasoning math coding extraction stem humanities translation summarization qa "
              "math_reasoning rag").split()
SUITES = [f"specbench:{c}" for c in CATEGORIES] + ["code", "edit"]


def run_one(model: Model, prompt: list[int], cold_margin: float, max_tokens: int) -> dict[str, float]:
    """One fresh generation: tokens, steps, drafted / accepted, held plans, modelled speedup, wall."""
    auto = Auto(tuning=AutoTuning(cold_margin=cold_margin), use_draft=False)
    gen = Generator(model, auto)
    batches: list[tuple[int, int]] = []
    propose = auto.propose

    def logged(tokens: list[int], budget: int):  # type: ignore[no-untyped-def]
        draft = propose(tokens, budget)
        batches.append((len(tokens), 1 + len(draft)))
        return draft

    auto.propose = logged  # type: ignore[method-assign]
    try:
        res = gen.generate(prompt, max_tokens=max_tokens, temperature=0.0)
    finally:
        gen.close()
    cost = 0.0
    for depth, batch in batches:
        times = model.costs.curve(depth).times
        cost += float(times[batch - 1] / times[0])
    s = res.stats
    return {"tokens": s.decoded_tokens, "steps": len(batches), "drafted": s.drafted, "accepted": s.accepted,
            "held": float(auto.counters.get("held_plans", 0.0)),
            "modelled": s.decoded_tokens / cost if cost else 1.0, "wall_s": s.decode_s}


def summary(rows: list[dict], margins: list[float]) -> None:
    """Per tuning: geometric mean and minimum of the modelled speedup, prompts below 0.97,
    and the geometric mean of its ratio to the first tuning's."""
    print("| cold_margin | prompts | geometric mean | min | below 0.97 | vs first |")
    print("|---|---|---|---|---|---|")
    first = np.array([r["runs"][str(margins[0])]["modelled"] for r in rows])
    for m in margins:
        sp = np.array([r["runs"][str(m)]["modelled"] for r in rows])
        print(f"| {m} | {len(sp)} | {np.exp(np.log(sp).mean()):.3f} | {sp.min():.3f} | {int((sp < 0.97).sum())} "
              f"| {np.exp(np.log(sp / first).mean()):.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--cold-margins", default="0,0.2", help="comma-separated AutoTuning.cold_margin values")
    ap.add_argument("--prompts", type=int, default=3, help="prompts per suite (the first ones)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--jsonl", type=Path, help="write one row per prompt here")
    ap.add_argument("--summarize", type=Path, help="only print the summary of an earlier --jsonl")
    args = ap.parse_args()
    margins = [float(x) for x in args.cold_margins.split(",")]
    if args.summarize:
        rows = [json.loads(line) for line in args.summarize.read_text().splitlines() if line.strip()]
        summary(rows, margins)
        return 0
    model = Model(args.model, progress=False)
    out = args.jsonl.open("w") if args.jsonl else None
    rows = []
    for suite in SUITES:
        for bp in load_suite(suite, args.prompts):
            prompt = model.chat_prompt([{"role": "user", "content": bp.text}])
            row = {"suite": suite, "id": bp.id,
                   "runs": {str(m): run_one(model, prompt, m, args.max_tokens) for m in margins}}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
    summary(rows, margins)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
