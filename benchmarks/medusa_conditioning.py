"""Medusa heads with and without conditioning on the known next token, trained for the same
number of steps on data `pyaccel medusa train` already collected, measured on its held-out
answers (top-1 / top-5 per head). One JSON line per variant in --out; a rerun skips what is
there. The two variants can run side by side (`--variant plain` / `--variant token`).

    python benchmarks/medusa_conditioning.py --variant plain --out bench-results/medusa-conditioning.jsonl
    python benchmarks/medusa_conditioning.py --variant token --out bench-results/medusa-conditioning.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyaccel
from jsonl_rows import append_row, done_keys
from pyaccel.methods.medusa import train as T
from pyaccel.methods.medusa.data import DataStore
from pyaccel.methods.medusa.format import model_sha256
from pyaccel.methods.medusa.pipeline import data_dir, held_out_rank, prepare_training

VARIANTS = {"plain": False, "token": True}


def run(model: pyaccel.Model, token: bool, steps: int) -> dict[str, object]:
    """Train one variant for `steps` steps; its held-out top-1 and top-5 per head."""
    cfg = replace(T.TrainConfig(), steps=steps, token_conditioned=token)
    store = DataStore(data_dir(model), model_sha256(model), model.backend.n_embd)
    state, inputs = prepare_training(model, store, cfg)
    t0 = time.perf_counter()
    state = T.train_heads(state, cfg, inputs.out, inputs.train, inputs.val, embd=inputs.embd)
    seconds = time.perf_counter() - t0
    rank, _ = held_out_rank(T.final_weights(state, inputs.out, inputs.embd), store, 5)
    return dict(steps=steps, train_rows=len(inputs.train.labels), seconds=round(seconds, 1),
                top1=[round(float(x), 3) for x in rank[:, 0]], top5=[round(float(x), 3) for x in rank.sum(axis=1)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS), default=None,
                    help="plain (h alone), token (h and the next token's embedding); default: both")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    done = done_keys(args.out, "variant", "steps")
    with pyaccel.Model(args.model, n_threads=1, progress=False) as model:
        for variant in args.variant or list(VARIANTS):
            if (variant, args.steps) in done:
                continue
            row = dict(variant=variant, **run(model, VARIANTS[variant], args.steps))
            append_row(args.out, row)
            print(row, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
