"""Tau of Medusa decoding per tree (static, dynamic), cost model off: every pass verifies the
whole tree (at most --max-nodes nodes). Greedy; the held-out Spec-Bench questions (the
heads' own train / held-out split, `pyaccel.methods.medusa.data`), --prompts per category.
Tau does not depend on the machine's speed, so this can run on a busy machine; each
finished prompt is appended to --out as one JSON line with the heads' time per step, and a
rerun skips what is there.

    python benchmarks/medusa_tau.py --heads HEADS.gguf --out bench-results/medusa-tau.jsonl --threads 1
    python benchmarks/medusa_tau.py --out bench-results/medusa-tau.jsonl --report

Parts run side by side (`--part 1/2`, `--part 2/2`, one --out each); cat their files for --report.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyaccel
from jsonl_rows import append_row, done_keys, read_rows
from pyaccel.bench.suites import find_questions
from pyaccel.methods.medusa.collect import prompt_tokens
from pyaccel.methods.medusa.data import TrainPrompt, specbench_prompts


def held_out_prompts(per_category: int, questions: str | None) -> list[TrainPrompt]:
    out: list[TrainPrompt] = []
    taken: dict[str, int] = {}
    for p in specbench_prompts(find_questions(questions)):
        if p.held_out and taken.get(p.category, 0) < per_category:
            taken[p.category] = taken.get(p.category, 0) + 1
            out.append(p)
    return out


def report(path: Path) -> None:
    rows = read_rows(path)
    cats = sorted({r["category"] for r in rows})
    print("| tree | nodes | heads ms / step | target token ms | " + " | ".join(cats) + " | median |")
    print("|---" * (len(cats) + 5) + "|")
    for tree in dict.fromkeys(r["tree"] for r in rows):
        mine = [r for r in rows if r["tree"] == tree]
        per = {c: statistics.median(r["tau"] for r in mine if r["category"] == c) for c in cats
               if any(r["category"] == c for r in mine)}
        nodes = statistics.median(r["nodes_per_step"] for r in mine)
        ms = statistics.median(r["heads_ms"] for r in mine)
        token = statistics.median(r["token_ms"] for r in mine)
        cells = [f"{per[c]:.2f}" if c in per else "-" for c in cats]
        median = statistics.median(per.values())
        print(f"| {tree} | {nodes:.0f} | {ms:.1f} | {token:.1f} | " + " | ".join(cells) + f" | {median:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--heads", default=None, help="default: the heads `pyaccel medusa train` wrote for the model")
    ap.add_argument("--tree", action="append", default=None, help="static, dynamic (default: both)")
    ap.add_argument("--max-nodes", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=1, help="held-out questions per category")
    ap.add_argument("--questions", default=None)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=None, help="tau does not depend on it; 1 suits a busy machine")
    ap.add_argument("--part", default="1/1", metavar="I/N",
                    help="run the I-th of N interleaved parts of the prompts (parallel runs, one --out each)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--report", action="store_true", help="print the table of --out and exit")
    args = ap.parse_args()
    if args.report:
        report(args.out)
        return 0
    part, parts = (int(x) for x in args.part.split("/"))
    prompts = held_out_prompts(args.prompts, args.questions)[part - 1::parts]
    done = done_keys(args.out, "tree", "id")
    model = pyaccel.Model(args.model, n_threads=args.threads, embeddings=True, progress=False)
    # One target token's time now, to set the heads' time per step against.
    plain = pyaccel.Generator(model, "plain").generate(prompt_tokens(model, prompts[0].text), max_tokens=32).stats
    token_ms = 1e3 * plain.target_s / max(plain.target_forwards, 1)
    for tree in args.tree or ["static", "dynamic"]:
        method = pyaccel.Medusa(args.heads, tree=tree, max_nodes=args.max_nodes, cost_model=False)
        gen = pyaccel.Generator(model, method)
        for p in prompts:
            if (tree, p.id) in done:
                continue
            before = dict(method.counters)
            t0 = time.perf_counter()
            res = gen.generate(prompt_tokens(model, p.text), max_tokens=args.max_tokens)
            c = method.counters
            runs = c["heads_runs"] - before["heads_runs"]
            row = dict(tree=tree, id=p.id, category=p.category, tau=res.stats.tau, tokens=len(res.tokens),
                       passes=res.stats.target_forwards,
                       nodes_per_step=(c["tree_nodes"] - before["tree_nodes"]) / max(runs, 1),
                       heads_ms=1e3 * (c["heads_s"] - before.get("heads_s", 0.0)) / max(runs, 1),
                       pass_ms=1e3 * res.stats.target_s / max(res.stats.target_forwards, 1), token_ms=token_ms,
                       accepted_per_depth=res.stats.acceptance_per_position,
                       seconds=time.perf_counter() - t0)
            append_row(args.out, row)
            print(f"{tree:8s} {p.id:40s} tau {res.stats.tau:.2f} heads {row['heads_ms']:.1f} ms "
                  f"({row['seconds']:.0f} s)", file=sys.stderr)
    report(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
