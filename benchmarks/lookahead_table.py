"""Tau of lookahead per window size (W, N, G), cost model off: every pass runs the given
window and verifies up to G pool candidates. Greedy; one prompt per Spec-Bench category
and the code suite (by default). Tau does not depend on the machine's speed, so this can
run on a busy machine; each finished prompt is appended to --out as one JSON line, and a
rerun skips what is there.

    python benchmarks/lookahead_table.py --out bench-results/lookahead-tau.jsonl \
        --setting 7,5,7 --setting 0,5,7 --setting 7,5,7,lookup --setting 5,4,5
    python benchmarks/lookahead_table.py --out bench-results/lookahead-tau.jsonl --report
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyaccel
from jsonl_rows import append_row, done_keys, read_rows
from pyaccel.bench.suites import load_suite


def parse_setting(text: str) -> tuple[str, dict]:
    parts = text.split(",")
    w, n, g = (int(x) for x in parts[:3])
    opts: dict = dict(window=w, ngram=n, guesses=g, cost_model=False)
    for flag in parts[3:]:
        if flag == "lookup":
            opts["lookup"] = True
        elif flag == "random":
            opts["init"] = "random"
        elif flag == "noseed":
            opts["seed_pool"] = False
        else:
            raise SystemExit(f"unknown setting flag {flag!r}: lookup, random, noseed")
    return text, opts


def category(prompt_id: str, suite: str) -> str:
    return prompt_id.rsplit("-", 1)[0] if suite.startswith("specbench") else suite


def report(path: Path) -> None:
    rows = read_rows(path)
    by_setting: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        by_setting.setdefault(r["setting"], {}).setdefault(r["category"], []).append(r["tau"])
    cats = sorted({r["category"] for r in rows})
    print("| W,N,G | tokens/pass (median) | " + " | ".join(cats) + " | Spec-Bench median |")
    print("|---" * (len(cats) + 3) + "|")
    for setting, per in by_setting.items():
        spec = [statistics.median(v) for c, v in per.items() if c not in ("code", "edit")]
        tpp = statistics.median(r["tokens_per_pass"] for r in rows if r["setting"] == setting)
        cells = [f"{statistics.median(per[c]):.2f}" if c in per else "-" for c in cats]
        med = f"{statistics.median(spec):.2f}" if spec else "-"
        print(f"| {setting} | {tpp:.0f} | " + " | ".join(cells) + f" | {med} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--setting", action="append", default=[], help="W,N,G[,lookup|random|noseed]")
    ap.add_argument("--suite", action="append", default=None, help="default: specbench (1 per category) and code")
    ap.add_argument("--prompts", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=None, help="tau does not depend on it; 1 suits a busy machine")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--report", action="store_true", help="print the table of --out and exit")
    args = ap.parse_args()
    if args.report:
        report(args.out)
        return 0
    suites = args.suite or ["specbench", "code"]
    prompts = [p for s in suites for p in load_suite(s, args.prompts)]
    done = done_keys(args.out, "setting", "id")
    model = pyaccel.Model(args.model, n_seq_max=32, n_threads=args.threads, progress=False)
    for label, opts in map(parse_setting, args.setting):
        gen = pyaccel.Generator(model, pyaccel.Lookahead(**opts))
        for p in prompts:
            if (label, p.id) in done:
                continue
            t0 = time.perf_counter()
            res = gen.chat([{"role": "user", "content": p.text}], max_tokens=args.max_tokens)
            c = gen.method.counters
            passes = res.stats.target_forwards
            row = dict(setting=label, id=p.id, category=category(p.id, p.suite), tau=res.stats.tau,
                       tokens=len(res.tokens), passes=passes,
                       tokens_per_pass=1 + (c["drafted"] + c["window_steps"] * _window_tokens(opts)) / max(passes, 1),
                       seconds=time.perf_counter() - t0)
            append_row(args.out, row)
            print(f"{label:14s} {p.id:24s} tau {res.stats.tau:.2f} ({row['seconds']:.0f} s)", file=sys.stderr)
    report(args.out)
    return 0


def _window_tokens(opts: dict) -> int:
    w, n = opts["window"], opts["ngram"]
    return 0 if w == 0 else (w - 1) + w * (n - 2)


if __name__ == "__main__":
    sys.exit(main())
