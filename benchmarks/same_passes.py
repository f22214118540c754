"""How much two timed runs of the same passes differ on this machine: lookup and auto on
chosen prompts, alternating which goes first, each prompt `--runs` times; per run the target
time, the passes and the drafted nodes (where both draft the same nodes in the same passes,
any gap in target time is the machine's). Not a pytest module.

    python benchmarks/same_passes.py rename-difflib-longest-match,rename-textwrap-wrap-chunks --suite benchmarks/data/edit_holdout.jsonl --runs 4
"""

from __future__ import annotations

import argparse
import statistics

import pyaccel
from pyaccel.bench.suites import load_suite


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids", help="prompt ids, comma-separated")
    ap.add_argument("--suite", required=True, help="the suite holding them (a name or a .jsonl file)")
    ap.add_argument("--methods", default="lookup,auto", help="comma-separated method specs")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    model = pyaccel.Model(args.model)
    prompts = {p.id: p for p in load_suite(args.suite)}
    gens = {m: pyaccel.Generator(model, m) for m in args.methods.split(",")}
    for pid in args.ids.split(","):
        tokens = model.chat_prompt([{"role": "user", "content": prompts[pid].text}])
        runs: dict[str, list[pyaccel.Stats]] = {m: [] for m in gens}
        for k in range(args.runs):
            order = list(gens.items()) if k % 2 == 0 else list(gens.items())[::-1]
            for m, gen in order:
                runs[m].append(gen.generate(tokens, max_tokens=args.max_tokens, temperature=0.0).stats)
        for m, stats in runs.items():
            each = " ".join(f"{s.target_s:.3f}s/{s.target_forwards}p/{s.drafted}d" for s in stats)
            print(f"{pid} {m}: {each}; median target {statistics.median(s.target_s for s in stats):.3f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
