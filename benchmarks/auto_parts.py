"""Where auto's own time goes per step: each part of its step timed by wrapping it, and how
many steps with candidates `may_pay`'s threshold shortcut settles.

One Generator for the given prompts (greedy); every part is timed around the call, so the
wrappers' own cost (a few microseconds) is in the figures. Not a pytest module.

    python benchmarks/auto_parts.py --suite specbench:math_reasoning --prompts 3
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from typing import Any, Callable

from pyaccel import Generator, Model
from pyaccel.bench.suites import load_suite


def timed(obj: Any, name: str, label: str, total: dict[str, float], calls: Counter) -> None:
    """Replace `obj.name` on the instance by a wrapper adding its time to total[label]."""
    fn: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            total[label] += time.perf_counter() - t
            calls[label] += 1

    setattr(obj, name, wrapper)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--suite", default="specbench:math_reasoning")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    model = Model(args.model, embeddings=True, progress=False)
    gen = Generator(model, "auto")
    auto = gen.method
    total: dict[str, float] = defaultdict(float)
    calls: Counter = Counter()
    shortcut: Counter = Counter()

    may_pay = auto._may_pay

    def counted(cands: list[Any], depth: int, budget: int) -> bool:
        if cands:
            top = max(auto.calibration.bound(c) for c in cands)
            shortcut["taken" if top < auto._threshold(auto._costs.curve(depth)) else "not taken"] += 1
        return may_pay(cands, depth, budget)

    auto._may_pay = counted
    timed(auto, "_may_pay", "may_pay (with the counting above)", total, calls)
    for sub in auto.subs:
        timed(sub, "candidates", f"{sub.name}.candidates", total, calls)
        timed(sub, "observe", f"{sub.name}.observe", total, calls)
    timed(auto, "propose", "propose (all of it)", total, calls)
    timed(auto, "observe", "observe (all of it)", total, calls)
    own = steps = 0.0
    for bp in load_suite(args.suite, args.prompts):
        gen.reset()
        res = gen.generate(model.chat_prompt([{"role": "user", "content": bp.text}]),
                           max_tokens=args.max_tokens, temperature=0.0)
        own += res.stats.decode_s - res.stats.target_s
        steps += res.stats.target_forwards
    print(f"own time {1000 * own / steps:.3f} ms a step over {int(steps)} steps")
    for label in total:
        print(f"{label:36s} {1000 * total[label] / calls[label]:.3f} ms a call, {calls[label]} calls")
    held = auto._held_threshold
    print(f"threshold shortcut: {shortcut['taken']} of {sum(shortcut.values())} steps with candidates"
          f" (threshold {held[1]:.3f} at the last depth)" if held else "no step had candidates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
