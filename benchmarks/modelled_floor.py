"""Each method's speedup on the bench's prompts as the cost curve predicts it, without the
machine's timing noise: a floor check to run before (not instead of) `pyaccel bench`.

For every prompt and method, one greedy generation records each step's batch (1 + drafted
tokens) and depth. Its modelled time is the measured cost curve's time for those batches,
in single-token times, plus the method's own time (decode time outside the target's
passes: proposing, verifying, feedback), converted to the same units with this run's time
per unit. A run's modelled speed is

    decoded tokens / (sum of batch costs + own time / time per unit)

and its modelled speedup that over plain decoding's on the same prompt (plain always runs).

Only the own-time part carries the machine's noise (about 1% of decode time for auto).
Outputs are plain decoding's up to near-ties, so the batches are what the bench's would be.

--carry keeps one Generator per method for all prompts, in order, as `pyaccel bench` does
(what a method learns carries over from prompt to prompt); without it every generation
starts on a new Generator, as every `pyaccel generate` call does.

    python benchmarks/modelled_floor.py --methods auto,lookup --prompts 1 --carry \
        --jsonl bench-results/modelled-floor.jsonl
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

sys.path.insert(0, str(Path(__file__).parent))
from curve_runs import FLOOR_SUITES, batch_cost, logged_passes  # noqa: E402


def logged_generation(model: Model, gen: Generator, prompt: list[int], max_tokens: int) -> dict[str, Any]:
    """One greedy generation on `gen`, with the batch and depth of every pass it took."""
    res, passes = logged_passes(gen, prompt, max_tokens)
    batches = [(p["depth"], 1 + p["drafted"]) for p in passes]
    units = sum(batch_cost(model, depth, batch) for depth, batch in batches)
    s = res.stats
    own_s = max(0.0, s.decode_s - s.target_s)
    own_units = own_s / (s.target_s / units) if units and s.target_s > 0 else 0.0
    decoded = s.decoded_tokens
    return {"decoded": decoded, "steps": len(batches), "drafted": s.drafted, "accepted": s.accepted,
            "units": units, "own_units": own_units, "speed": decoded / (units + own_units) if units else 0.0,
            "speed_passes_only": decoded / units if units else 0.0}


def summary(rows: list[dict[str, Any]], methods: list[str]) -> None:
    """Per method: the modelled speedup per suite (median over its prompts), the lowest, the
    suites at 0.97x or more, and the geometric mean over prompts; then its own time, the
    geometric mean of its passes alone, its lowest prompts and its drafted and kept tokens."""
    suites = list(dict.fromkeys(r["suite"] for r in rows))
    print("| method | " + " | ".join(s.removeprefix("specbench:") for s in suites) + " | min | at 0.97x+ | geometric mean |")
    print("|---|" + "---|" * (len(suites) + 3))
    for m in methods:
        per = {s: float(np.median([r["runs"][m]["modelled"] for r in rows if r["suite"] == s])) for s in suites}
        allsp = np.array([r["runs"][m]["modelled"] for r in rows])
        ok = sum(v >= 0.97 for v in per.values())
        print(f"| {m} | " + " | ".join(f"{per[s]:.3f}" for s in suites)
              + f" | {min(per.values()):.3f} | {ok} of {len(suites)} | {np.exp(np.log(allsp).mean()):.3f} |")
    print()
    print("| method | own time (% of pass time) | geometric mean, passes only | lowest prompts | prompts under 0.93x "
          "| drafted / kept |")
    print("|---|---|---|---|---|---|")
    for m in methods:
        runs = [r["runs"][m] for r in rows]
        own = 100 * sum(x["own_units"] for x in runs) / sum(x["units"] for x in runs)
        passes = np.exp(np.log([x["modelled_passes_only"] for x in runs]).mean())
        low = sorted(rows, key=lambda r: r["runs"][m]["modelled"])[:3]
        lows = ", ".join(f"{r['id']} {r['runs'][m]['modelled']:.3f}" for r in low)
        under = sum(x["modelled"] < 0.93 for x in runs)
        print(f"| {m} | {own:.2f} | {passes:.3f} | {lows} | {under} of {len(runs)} "
              f"| {sum(x['drafted'] for x in runs)} / {sum(x['accepted'] for x in runs)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--methods", default="auto", help="method specs separated by ';' (a spec may hold commas)")
    ap.add_argument("--suite", action="append", help="suites (default: the 13 Spec-Bench categories and code)")
    ap.add_argument("--prompts", type=int, default=1, help="prompts per suite (the first ones)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--carry", action="store_true", help="one Generator per method for every prompt, as the bench")
    ap.add_argument("--no-hidden-states", action="store_true",
                    help="open the model without hidden states (auto then holds no Medusa heads)")
    ap.add_argument("--jsonl", type=Path, help="write one row per prompt here")
    ap.add_argument("--summarize", type=Path, help="only print the summary of an earlier --jsonl")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(";") if m.strip()]
    if "plain" not in methods:
        methods.insert(0, "plain")
    if args.summarize:
        summary([json.loads(x) for x in args.summarize.read_text().splitlines() if x.strip()], methods)
        return 0
    model = Model(args.model, embeddings=not args.no_hidden_states, progress=False)
    shared = {m: Generator(model, m) for m in methods} if args.carry else {}
    out = args.jsonl.open("w") if args.jsonl else None
    rows = []
    for suite in args.suite or FLOOR_SUITES:
        for bp in load_suite(suite, args.prompts):
            prompt = model.chat_prompt([{"role": "user", "content": bp.text}])
            runs = {}
            for m in methods:
                gen = shared[m] if args.carry else Generator(model, m)
                runs[m] = logged_generation(model, gen, prompt, args.max_tokens)
                if not args.carry:
                    gen.close()
            for run in runs.values():
                run["modelled"] = run["speed"] / runs["plain"]["speed"]
                run["modelled_passes_only"] = run["speed_passes_only"] / runs["plain"]["speed_passes_only"]
            row = {"suite": suite, "id": bp.id, "runs": runs}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
    summary(rows, methods)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
