"""Where a copying method loses time on the edit suites, step by step, priced on the
measured cost curve against the n-gram oracle (`pyaccel.bench.oracle`).

For every prompt, plain greedy decoding gives the output y and the oracle's a[i] (how many
tokens after y[i] a perfect n-gram drafter gets right). Each method's greedy generation
then logs every step: its root position i, the drafted tokens d and the accepted ones.
Its pass costs (single-token times, at the step's depth) are split into

- kept: c(1 + accepted), what the step would have cost had it drafted only what was kept;
- rejected: c(1 + d) - c(1 + accepted), the price of the drafted tokens that were wrong;

and its steps counted by kind: no draft where the oracle had a copy of 2+ tokens
("missed"), a draft cut short of the copy ("short"), a draft past its end ("over").

    python benchmarks/edit_losses.py --methods "lookup;auto" --suite edit --prompts 12
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pyaccel import Generator, Model
from pyaccel.bench.oracle import accept_lengths, oracle_cost
from pyaccel.bench.suites import load_suite

sys.path.insert(0, str(Path(__file__).parent))
from curve_runs import batch_cost, logged_passes  # noqa: E402


def losses(model: Model, steps: list[dict[str, int]], a: np.ndarray) -> dict[str, Any]:
    """The split of a run's pass costs and its step kinds against the oracle's a[i]."""
    out = {"kept": 0.0, "rejected": 0.0, "missed": 0, "missed_tokens": 0, "short": 0, "over": 0, "steps": len(steps),
           "committed": 0}
    for s in steps:
        d, k, i = s["drafted"], s["accepted"], s["root"]
        out["kept"] += batch_cost(model, s["depth"], 1 + k)
        out["rejected"] += batch_cost(model, s["depth"], 1 + d) - batch_cost(model, s["depth"], 1 + k)
        out["committed"] += k + 1
        oracle = int(a[i]) if 0 <= i < len(a) else 0
        if d == 0 and oracle >= 2:
            out["missed"] += 1
            out["missed_tokens"] += oracle
        elif 0 < d == k < oracle:
            out["short"] += 1
        elif d > k:
            out["over"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--methods", default="lookup;auto", help="method specs separated by ';'")
    ap.add_argument("--suite", action="append", help="suites (default: edit)")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--jsonl", type=Path)
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(";") if m.strip()]
    model = Model(args.model, progress=False)
    plain = Generator(model, "plain")
    gens = {m: Generator(model, m) for m in methods}
    out = args.jsonl.open("w") if args.jsonl else None
    totals: dict[str, dict[str, float]] = {m: {} for m in ["oracle", *methods]}
    for suite in args.suite or ["edit"]:
        for bp in load_suite(suite, args.prompts):
            prompt = model.chat_prompt([{"role": "user", "content": bp.text}])
            y = list(plain.generate(prompt, max_tokens=args.max_tokens, temperature=0.0).tokens)
            a = accept_lengths(prompt, y)
            rows = [[batch_cost(model, len(prompt) + i + 1, b) for b in range(1, 65)] for i in range(len(a))]
            row: dict[str, Any] = {"suite": suite, "id": bp.id, "tokens": len(a),
                                   "oracle_units": oracle_cost(a, rows) if len(a) else 0.0}
            for m, gen in gens.items():
                _, steps = logged_passes(gen, prompt, args.max_tokens)
                row[m] = losses(model, steps, a)
            for m in methods:
                r = row[m]
                print(f"{bp.id:40s} {m:8s} units {r['kept'] + r['rejected']:7.1f} (rejected {r['rejected']:5.1f}) "
                      f"oracle {row['oracle_units']:6.1f}  steps {r['steps']:3d} missed {r['missed']:2d} "
                      f"({r['missed_tokens']:3d} tok) short {r['short']:2d} over {r['over']:2d}", flush=True)
                for key in ("kept", "rejected", "missed", "missed_tokens", "short", "over", "committed"):
                    totals[m][key] = totals[m].get(key, 0.0) + r[key]
            totals["oracle"]["units"] = totals["oracle"].get("units", 0.0) + row["oracle_units"]
            totals["oracle"]["committed"] = totals["oracle"].get("committed", 0.0) + row["tokens"]
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
    print(json.dumps(totals, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
