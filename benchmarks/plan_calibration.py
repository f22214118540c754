"""Does a plan of `auto` gain what it predicts? Per band of predicted speedup, the speedup
its verified plans realised, on the cost curve (no timing noise).

Every step `auto` drafts, its plan predicts a speedup: expected tokens (1 + the calibrated
path probabilities of the nodes kept) over the batch's cost in single-token times. Once
verified, the step realised (1 + accepted tokens) over the same cost. Pooled per band of
the prediction, realised = sum of tokens / sum of costs, and `net` = tokens - costs (the
single-token times the band's plans saved, negative where they lost). Bands just above
`AutoTuning.plan_margin` show what marginal plans are worth: a plan is chosen as the best
of many subsets of noisy estimates, so the chosen one's estimate errs high.

The proposer's own time (building and planning the tree) is not in these figures.

    python benchmarks/plan_calibration.py --prompts 3 --jsonl bench-results/plans.jsonl
    python benchmarks/plan_calibration.py --summarize bench-results/plans.jsonl

One Generator for all prompts, in order, as `pyaccel bench` keeps (calibration carries).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pyaccel import Generator, Model
from pyaccel.bench.suites import load_suite
from pyaccel.methods.auto.proposer import Auto

sys.path.insert(0, str(Path(__file__).parent))
from curve_runs import FLOOR_SUITES, batch_cost, patched_greedy  # noqa: E402

BANDS = (1.0, 1.03, 1.06, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0, float("inf"))


def plan_rows(model: Model, gen: Generator, prompt: list[int], max_tokens: int) -> list[dict[str, Any]]:
    """One greedy generation on `gen` (method auto); a row per verified plan: its
    prediction, cost and outcome."""
    auto = gen.method
    rows: list[dict[str, Any]] = []
    pending: dict[str, Any] = {}
    plan_fn, propose_fn, observe_fn = auto._plan, auto.propose, auto.observe

    def plan(*a):  # type: ignore[no-untyped-def]
        pending["plan"] = plan_fn(*a)
        return pending["plan"]

    def propose(tokens, budget):  # type: ignore[no-untyped-def]
        pending.clear()
        draft = propose_fn(tokens, budget)
        p = pending.get("plan")
        if len(draft) and p is not None and len(p.nodes) == len(draft):
            pending["row"] = {"depth": len(tokens), "batch": 1 + len(draft),
                              "cost": batch_cost(model, len(tokens), 1 + len(draft)),
                              "predicted": float(p.expected_speedup)}
        return draft

    def observe(outcome):  # type: ignore[no-untyped-def]
        row = pending.pop("row", None)
        if row is not None:
            row["accepted"] = len(outcome.accepted)
            rows.append(row)
        observe_fn(outcome)

    patched_greedy(gen, prompt, max_tokens, _plan=plan, propose=propose, observe=observe)
    return rows


def summary(rows: list[dict[str, Any]]) -> None:
    print(f"{len(rows)} verified plans, {len({r['id'] for r in rows})} prompts")
    print("| predicted speedup | plans | predicted (mean) | realised | net (single-token times) |")
    print("|---|---|---|---|---|")
    for lo, hi in zip(BANDS, BANDS[1:]):
        band = [r for r in rows if lo <= r["predicted"] < hi]
        if not band:
            continue
        tokens = sum(r["accepted"] + 1 for r in band)
        cost = sum(r["cost"] for r in band)
        print(f"| {lo:.2f}-{hi:.2f} | {len(band)} | {np.mean([r['predicted'] for r in band]):.3f} | "
              f"{tokens / cost:.3f} | {tokens - cost:+.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--suite", action="append", help="suites (default: the 13 Spec-Bench categories and code)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts per suite")
    ap.add_argument("--skip", type=int, default=0, help="skip this many first prompts of each suite")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--method", default="auto", help="an auto spec (e.g. auto:use_draft=false)")
    ap.add_argument("--jsonl", type=Path, help="write one row per verified plan here")
    ap.add_argument("--summarize", type=Path, nargs="*", help="only print the summary of earlier --jsonl files")
    args = ap.parse_args()
    if args.summarize:
        summary([json.loads(x) for f in args.summarize for x in f.read_text().splitlines() if x.strip()])
        return 0
    model = Model(args.model, embeddings=True, progress=False)
    gen = Generator(model, args.method)
    if not isinstance(gen.method, Auto):
        raise SystemExit(f"--method must name auto, got {args.method!r}")
    out = args.jsonl.open("w") if args.jsonl else None
    rows = []
    for suite in args.suite or FLOOR_SUITES:
        for bp in load_suite(suite, args.prompts + args.skip)[args.skip:]:
            prompt = model.chat_prompt([{"role": "user", "content": bp.text}])
            for row in plan_rows(model, gen, prompt, args.max_tokens):
                row.update(suite=suite, id=bp.id)
                rows.append(row)
                if out:
                    out.write(json.dumps(row) + "\n")
            print(f"{suite} {bp.id}: {len(rows)} plans so far", file=sys.stderr, flush=True)
    summary(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
