"""How often a copy goes on at a prose boundary: prompt lookup's shadow drafts scored per
position by the class of the token drafted there and of the one before it.

One `lookup` Generator runs the suites' prompts in order (greedy, as `pyaccel bench` does);
every position its shadows score is counted by (token class, class of the token before it
in the draft; "root" for the first) where the copy's context agreement is at least
--min-agreement tokens. Classes: "punct" (the token's text, spaces aside, is only
punctuation marks: `boundaries.is_punct`), "nl" (it holds a line break), "word" (the rest).
The shadows do not depend on what was drafted, so the counts are those of any lookup
setting. Not a pytest module.

    python benchmarks/boundary_stats.py                       # Spec-Bench (13 categories) + code
    python benchmarks/boundary_stats.py --suite edit --suite benchmarks/data/edit_holdout.jsonl \
        --prompts 12 --max-tokens 256
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from pyaccel import Generator, Model
from pyaccel.bench.suites import load_suite
from pyaccel.methods import shadow
from pyaccel.methods.lookup.boundaries import is_punct
from pyaccel.methods.lookup.tuning import N_BUCKETS, agreement_bucket

sys.path.insert(0, str(Path(__file__).parent))
from curve_runs import FLOOR_SUITES  # noqa: E402


def token_class(piece: bytes) -> str:
    if b"\n" in piece:
        return "nl"
    return "punct" if is_punct(piece) else "word"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--suite", action="append", help="suites (default: the 13 Spec-Bench categories and code)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts per suite (the first ones)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--min-agreement", type=int, default=4)
    args = ap.parse_args()
    model = Model(args.model, progress=False)
    piece = model.backend.token_bytes
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    min_bucket = agreement_bucket(args.min_agreement)
    add = shadow.ShadowScorer.add

    def counted(self: shadow.ShadowScorer, start: int, tokens: Sequence[int], stats: Any) -> None:
        toks = [int(t) for t in tokens]
        buckets = getattr(stats, "buckets", None)

        class Counting:
            def observe_position(self, position: int, accepted: bool) -> None:
                if buckets is not None and position < len(buckets) and buckets[position] % N_BUCKETS >= min_bucket:
                    before = token_class(piece(toks[position - 1])) if position else "root"
                    cell = counts[(token_class(piece(toks[position])), before)]
                    cell[0] += 1
                    cell[1] += int(accepted)
                stats.observe_position(position, accepted)

        add(self, start, toks, Counting())

    shadow.ShadowScorer.add = counted  # type: ignore[method-assign]
    gen = Generator(model, "lookup")
    for suite in args.suite or FLOOR_SUITES:
        for bp in load_suite(suite, args.prompts):
            gen.reset()
            gen.generate(model.chat_prompt([{"role": "user", "content": bp.text}]), max_tokens=args.max_tokens,
                         temperature=0.0)
    print(f"| token | token before | positions | accepted (agreement >= {args.min_agreement}) |")
    print("|---|---|---|---|")
    for (cls, before), (n, ok) in sorted(counts.items()):
        print(f"| {cls} | {before} | {n} | {ok / n:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
