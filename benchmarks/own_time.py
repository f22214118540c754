"""A method's own time per step (its propose and observe, timed with perf_counter) and
its share of the generation's time, on free-text prompts.

    python benchmarks/own_time.py --method auto
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from pyaccel import Generator, Model

PROMPTS = (
    "Write a short essay on the history of the printing press and its effect on European society.",
    "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting cultural experiences "
    "and must-see attractions.",
    "Explain the difference between mitosis and meiosis to a high-school student.",
)


def _timed(fn: Callable[..., Any], key: str, spent: dict[str, float]) -> Callable[..., Any]:
    """fn, adding its time to spent[key] (and counting steps on propose)."""

    def call(*a: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*a)
        finally:
            spent[key] += time.perf_counter() - t
            spent["steps"] += key == "propose"

    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="auto")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    model = Model(args.model, embeddings=False, progress=False)
    for text in PROMPTS:
        prompt = model.chat_prompt([{"role": "user", "content": text}])
        gen = Generator(model, args.method)
        m = gen.method
        spent = {"propose": 0.0, "observe": 0.0, "steps": 0}
        m.propose, m.observe = _timed(m.propose, "propose", spent), _timed(m.observe, "observe", spent)
        t0 = time.perf_counter()
        gen.generate(prompt, max_tokens=args.max_tokens, temperature=0.0)
        total = time.perf_counter() - t0
        n = spent["steps"]
        print(f"{args.method} steps={n} propose={1e3 * spent['propose'] / n:.3f}ms "
              f"observe={1e3 * spent['observe'] / n:.3f}ms "
              f"own%={100 * (spent['propose'] + spent['observe']) / total:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
