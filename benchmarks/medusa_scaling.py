"""How held-out accuracy of the default (token-conditioned) Medusa heads grows with the number of
training rows: train on a fixed-seed random part of the data `pyaccel medusa train` already
collected (1/8, 1/4, 1/2, all of it) for the same number of steps, and measure every run on the
same, whole held-out split (top-1 / top-5 per head). `--weight-decay` adds decoupled (AdamW)
decay on W and U. One JSON line per run in --out; a rerun skips what is there.

`--unit rows` keeps a random part of the training rows (the draft vocabulary and the
validation rows are those of the whole data); `--unit answers` keeps a random part of the
collected answers (whole sequences, the draft vocabulary chosen from them): what a shorter
collection would have given. Validation rows (every 10th answer) stay whole in both.

    python benchmarks/medusa_scaling.py --out bench-results/medusa-scaling.jsonl
    python benchmarks/medusa_scaling.py --fraction 1 --weight-decay 1 --weight-decay 10 --out bench-results/medusa-scaling.jsonl
    python benchmarks/medusa_scaling.py --unit answers --out bench-results/medusa-scaling.jsonl
    python benchmarks/medusa_scaling.py --report --out bench-results/medusa-scaling.jsonl
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import pyaccel
from jsonl_rows import append_row, done_keys, read_rows
from pyaccel.methods.medusa import train as T
from pyaccel.methods.medusa.data import TRAIN, DataStore, Dataset
from pyaccel.methods.medusa.format import model_sha256
from pyaccel.methods.medusa.pipeline import VALIDATION_EVERY, data_dir, held_out_rank, prepare_training

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
KEY = ("unit", "fraction", "steps", "weight_decay", "seed")


class AnswerSubset(DataStore):
    """The collected data with a random `fraction` of the training answers kept (whole sequences)
    and every validation answer: what a shorter collection gives to `prepare_training`."""

    def __init__(self, root: Path, target_sha256: str, n_embd: int, fraction: float, seed: int) -> None:
        super().__init__(root, target_sha256, n_embd)
        self.fraction, self.seed = fraction, seed

    def load(self, split: str) -> Dataset:
        ds = super().load(split)
        if split != TRAIN or self.fraction >= 1.0:
            return ds
        seqs = np.unique(ds.seq)
        val = seqs[seqs % VALIDATION_EVERY == VALIDATION_EVERY - 1]
        train = np.setdiff1d(seqs, val)
        kept = np.random.default_rng(self.seed).choice(train, max(round(self.fraction * len(train)), 1), replace=False)
        return ds.select(np.isin(ds.seq, np.concatenate([kept, val])))


def row_subset(data: T.TrainData, fraction: float, seed: int) -> T.TrainData:
    """A random `fraction` of the training rows (in their original order)."""
    if fraction >= 1.0:
        return data
    n = len(data.labels)
    rows = np.sort(np.random.default_rng(seed).choice(n, max(round(fraction * n), 1), replace=False))
    return T.TrainData(data.hidden[rows], data.labels[rows], data.token[rows] if data.token is not None else None)


def rounded(xs: Any) -> list[float]:
    return [round(float(x), 3) for x in xs]


def run(model: pyaccel.Model, unit: str, fraction: float, steps: int, weight_decay: float,
        seed: int) -> dict[str, object]:
    """Train the default heads on part of the data; their held-out top-1 and top-5 per head."""
    cfg = replace(T.TrainConfig(), steps=steps, weight_decay=weight_decay)
    args = (data_dir(model), model_sha256(model), model.backend.n_embd)
    store = AnswerSubset(*args, fraction, seed) if unit == "answers" else DataStore(*args)
    state, inputs = prepare_training(model, store, cfg)
    train = row_subset(inputs.train, fraction, seed) if unit == "rows" else inputs.train
    t0 = time.perf_counter()
    state = T.train_heads(state, cfg, inputs.out, train, inputs.val, embd=inputs.embd)
    seconds = time.perf_counter() - t0
    rank, coverage = held_out_rank(T.final_weights(state, inputs.out, inputs.embd), store, 5)
    return dict(train_rows=len(train.labels), seconds=round(seconds, 1), coverage=round(coverage, 3),
                top1=rounded(rank[:, 0]), top5=rounded(rank.sum(axis=1)),
                w_rms=round(float(np.sqrt(np.mean(state.w ** 2))), 4),
                history=[(s, round(loss, 3), round(acc, 3)) for s, loss, acc in state.history])


def fit_log_rows(rows: list[dict[str, Any]], head: int) -> tuple[float, float]:
    """Least squares top-1 = a + b ln(train_rows) over `rows`: (a, b)."""
    x = np.log([r["train_rows"] for r in rows])
    y = np.array([r["top1"][head] for r in rows])
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def rows_for(a: float, b: float, top1: float) -> float:
    """Training rows at which the fit reaches `top1` (an extrapolation beyond the data)."""
    return math.exp((top1 - a) / b) if b > 0 else math.inf


def parse_target(text: str) -> tuple[int, float]:
    """'HEAD:TOP1' (heads from 1) -> (0-based head, top-1)."""
    head, top1 = text.split(":")
    return int(head) - 1, float(top1)


def report(path: Path, targets: list[tuple[int, float]], rows_per_minute: float | None) -> str:
    """The runs as a markdown table, and per unit and target head the fit over the undecayed
    runs (the whole data is the same run in both units)."""
    rows = sorted(read_rows(path), key=lambda r: (r["unit"], r["weight_decay"], r["fraction"], r["seed"]))
    header = "| unit | fraction | seed | train rows | steps | weight decay | head 1 top-1 / top-5 | head 2 | head 3 |"
    lines = [header + " coverage | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        heads = " | ".join(f"{t1:.3f} / {t5:.3f}" for t1, t5 in zip(r["top1"], r["top5"]))
        lines.append(f"| {r['unit']} | {r['fraction']:g} | {r['seed']} | {r['train_rows']:,} | {r['steps']} | {r['weight_decay']:g} "
                     f"| {heads} | {r['coverage']:.3f} | {r['seconds']:.0f} |")
    whole = [r for r in rows if r["weight_decay"] == 0 and r["fraction"] >= 1.0][:1]  # the same run in both units
    for unit in sorted({r["unit"] for r in rows}):
        plain = [r for r in rows if r["unit"] == unit and r["weight_decay"] == 0 and r["fraction"] < 1.0] + whole
        if len(plain) < 2:
            continue
        for head, top1 in targets:
            a, b = fit_log_rows(plain, head)
            need = rows_for(a, b, top1)
            minutes = f", {need / rows_per_minute:,.0f} minutes of collection" if rows_per_minute else ""
            lines.append(f"{unit}, head {head + 1}: top-1 = {a:.3f} + {b:.4f} ln(rows) ({b * math.log(2):.3f} per "
                         f"doubling); top-1 {top1} at {need:,.0f} rows (extrapolated){minutes}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--unit", choices=("rows", "answers"), default="rows")
    ap.add_argument("--fraction", type=float, action="append", default=None, help=f"default: {FRACTIONS}")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--weight-decay", type=float, action="append", default=None, help="default: 0")
    ap.add_argument("--seed", type=int, default=0, help="which random part of the data")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--report", action="store_true", help="print the table and the fit of --out, run nothing")
    ap.add_argument("--target", type=parse_target, action="append", default=None,
                    help="HEAD:TOP1 to extrapolate to (default: 1:0.5 and 2:0.32)")
    ap.add_argument("--rows-per-minute", type=float, default=None, help="training rows per minute of collection")
    args = ap.parse_args()
    if args.report:
        print(report(args.out, args.target or [(0, 0.5), (1, 0.32)], args.rows_per_minute))
        return 0
    done = done_keys(args.out, *KEY)
    with pyaccel.Model(args.model, n_threads=1, progress=False) as model:
        for decay in args.weight_decay or [0.0]:
            for fraction in args.fraction or FRACTIONS:
                key = dict(unit=args.unit, fraction=fraction, steps=args.steps, weight_decay=decay, seed=args.seed)
                if tuple(key.values()) in done:
                    continue
                row = dict(**key, **run(model, args.unit, fraction, args.steps, decay, args.seed))
                append_row(args.out, row)
                print({k: v for k, v in row.items() if k != "history"}, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
