"""Where a method's greedy output differs from plain decoding's in a bench run, and how
close plain decoding's top-2 logits were there (a near-tie is < 0.5, see README Numerics).

    python benchmarks/near_ties.py bench-results/edit6.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lossless import NEAR_TIE, first_difference, top2_gap  # noqa: E402

from pyaccel import Model  # noqa: E402
from pyaccel.bench.replay import recorded_plain  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a pyaccel bench --json file")
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    data = json.loads(Path(args.results).read_text(encoding="utf-8"))
    worst = 0.0
    with Model(args.model, n_ctx=4096) as model:
        for p, prompt, plain in recorded_plain(data, model):
            for r in p["runs"]:
                i = first_difference(plain, r["tokens"]) if r.get("tokens") else None
                if i is None or i >= min(len(plain), len(r["tokens"])):
                    continue
                gap = top2_gap(model, prompt, plain[:i])
                worst = max(worst, gap)
                print(f"{p['id']} {r['method']} round {r.get('round', '?')}: first difference at token {i}, "
                      f"top-2 gap {gap:.3f}")
    print(f"largest gap {worst:.3f} ({'all near-ties' if worst < NEAR_TIE else 'NOT a near-tie'})")
    return 0 if worst < NEAR_TIE else 1


if __name__ == "__main__":
    raise SystemExit(main())
