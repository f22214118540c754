"""What prompt lookup learns at the places it prices apart: its probability of a copy going
on at a prose boundary and at a comment line end (`pyaccel.methods.lookup.boundaries`), per
relation of the copy to the output, after each prompt of `pyaccel bench --json` runs'
plain outputs replayed in order (no model decode, no timing noise). Both are kept from
call to call, so each row is what the next prompt starts from.

    python benchmarks/hazard_rates.py bench-results/eplain52.json bench-results/hxplain53.json
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyaccel.bench.replay import simulate
from pyaccel.methods.lookup.rewrites import AWAY, FRESH, IN_LINE, OPENING

sys.path.insert(0, str(Path(__file__).parent))
from replay_passes import bound_replays  # noqa: E402

RELATIONS = (("fresh", FRESH), ("in line", IN_LINE), ("away", AWAY), ("opening", OPENING))


def main() -> int:
    args, model, proposer, recorded = bound_replays(__doc__, "lookup", "lookup:comment_prior=0.5")
    names = " | ".join(name for name, _ in RELATIONS)
    print(f"| after prompt | comment line end: {names} | prose boundary: {names} |")
    print("|---|" + "---|" * (2 * len(RELATIONS)))
    for p, prompt, output in recorded:
        for _ in range(args.rounds):
            simulate(proposer, prompt, output, model.costs.relative_at, max_tokens=p["max_tokens"])
        stats = proposer._stats
        rates = [stats.comment(r) for _, r in RELATIONS] + [stats.boundary(r) for _, r in RELATIONS]
        print(f"| {p['id']} | " + " | ".join(f"{x:.2f}" for x in rates) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
