"""Are `auto`'s plans worth the tokens they predict? Replayed over `pyaccel bench --json`
runs' plain outputs (no model decode, no timing noise): every drafted step's expected
tokens (1 + the calibrated path probabilities of the nodes its plan kept) against the
tokens it committed (1 + accepted), pooled by draft size. `plan_calibration.py` does the
same by band of predicted speedup on live generations.

One proposer carried over every file's prompts in order, each prompt replayed `--rounds`
times in a row as `pyaccel bench --rounds` runs it; only the last round's steps count.

    python benchmarks/replay_calibration.py bench-results/eplain52.json bench-results/hxplain53.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyaccel.bench.replay import simulate
from pyaccel.types import Draft

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import bound_replays  # noqa: E402

BANDS = ((1, 3), (4, 15), (16, 36), (37, 63))


def main() -> int:
    args, model, proposer, recorded = bound_replays(__doc__, "auto", "auto:plan_margin=0.05")
    plan_fn, pending = proposer._plan, {}

    def plan(*a):  # type: ignore[no-untyped-def]
        pending["plan"] = plan_fn(*a)
        return pending["plan"]

    rows: list[tuple[int, float, int]] = []  # (drafted, expected tokens, committed tokens)

    def step(done: int, draft: Draft, path: list[int], depth: int) -> None:
        made = pending.pop("plan", None)  # this step's plan, if it made one
        if len(draft) and made is not None and len(made.nodes) == len(draft):
            rows.append((len(draft), float(made.expected_tokens), len(path) + 1))

    proposer._plan = plan
    for p, prompt, output in recorded:
        for rnd in range(args.rounds):
            pending.clear()
            simulate(proposer, prompt, output, model.costs.relative_at, max_tokens=p["max_tokens"],
                     on_step=step if rnd == args.rounds - 1 else None)
    print(f"{len(rows)} drafted steps (last round)")
    print("| draft size | steps | expected tokens | committed tokens | committed / expected |\n|---|---|---|---|---|")
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r[0] <= hi]
        if band:
            e, t = sum(r[1] for r in band), sum(r[2] for r in band)
            print(f"| {lo}-{hi} | {len(band)} | {e:.1f} | {t} | {t / e:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
