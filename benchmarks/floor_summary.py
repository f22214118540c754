"""Pooled numbers of a `pyaccel bench --json` floor run, per method: the geometric mean of
every run's speedup with a bootstrap 95% interval, and the method's own time per step
(the bench's draft_s and overhead_s over the steps, steps = decoded tokens / tau), and
over its runs that gained nothing (tau <= 1.005) the geometric mean of its target time
over plain's in the same round, with a bootstrap 95% interval, and their median (one
disturbed run moves the mean, not the median): above the control's, the method would slow
the target's own passes (its batches, its cache use), not just draft in vain.

    python benchmarks/floor_summary.py bench-results/floor20.json --void specbench:writing:1

--void SUITE:ROUND leaves out one round of one suite (e.g. one disturbed by another process).
Last, the noise floor: how many suites and prompts a method of a given speed would show
under the floor criterion's 0.97x / 0.93x from the control's run-to-run spread alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BOOTSTRAP = 2000


def runs_of(path: Path, void: set[tuple[str, int]]) -> dict[str, list[dict[str, float]]]:
    """Every timed run per method label (runs with no decode phase to time, speedup null or
    0, and the void rounds left out); each run gains `plain_target_s`, plain decoding's
    target time on its prompt and round."""
    out: dict[str, list[dict[str, float]]] = {}
    for prompt in json.loads(path.read_text(encoding="utf-8"))["prompts"]:
        plain = {int(r["round"]): r["target_s"] for r in prompt["runs"] if r["method"] == "plain"}
        for run in prompt["runs"]:
            if run["speedup"] and (prompt["suite"], int(run["round"])) not in void:
                out.setdefault(run["method"], []).append({**run, "plain_target_s": plain.get(int(run["round"]), 0.0)})
    return out


def idle_target_ratios(runs: list[dict[str, float]]) -> np.ndarray:
    """Target time over plain's, for each run at tau <= 1.005."""
    return np.asarray([r["target_s"] / r["plain_target_s"] for r in runs
                       if r["tau"] <= 1.005 and r["plain_target_s"] > 0])


def geometric_mean(speedups: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean and the 2.5th / 97.5th percentiles of its bootstrap."""
    logs = np.log(speedups)
    rng = np.random.default_rng(seed)
    boot = [np.exp(rng.choice(logs, len(logs)).mean()) for _ in range(BOOTSTRAP)]
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(np.exp(logs.mean())), float(low), float(high)


def noise_floor(runs: list[dict[str, float]], ratio: float, prompts: int, rounds: int,
                draws: int = 20000, seed: int = 0) -> tuple[float, float]:
    """For a method `ratio` times plain decoding's speed, measured with the run-to-run spread
    of `runs` (the control's speedups, centred on their median) in suites of `prompts`
    prompts of `rounds` runs each: P(a suite median under 0.97x), P(a prompt median under
    0.93x)."""
    logs = np.log([r["speedup"] for r in runs])
    logs = logs - np.median(logs)
    rng = np.random.default_rng(seed)
    sample = rng.choice(logs, (draws, prompts, rounds)) + np.log(ratio)
    prompt_medians = np.exp(np.median(sample, axis=2))
    suite_medians = np.median(prompt_medians, axis=1)
    return float((suite_medians < 0.97).mean()), float((prompt_medians < 0.93).mean())


def own_ms_per_step(runs: list[dict[str, float]], field: str) -> float:
    return float(np.median([1e3 * r[field] / (r["decoded"] / r["tau"]) for r in runs]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path)
    ap.add_argument("--void", action="append", default=[], help="SUITE:ROUND (0-based) to leave out")
    ap.add_argument("--control", default="plain:", help="the plain-vs-plain control's label")
    args = ap.parse_args()
    void = {(v.rsplit(":", 1)[0], int(v.rsplit(":", 1)[1])) for v in args.void}
    data = json.loads(args.json.read_text(encoding="utf-8"))
    print("| method | runs | geometric mean | 95% interval | drafting ms/step | feedback ms/step | own share % "
          "| target time / plain's, runs at tau 1.00 (95% interval) |")
    print("|---|---|---|---|---|---|---|---|")
    for method, runs in runs_of(args.json, void).items():
        mean, low, high = geometric_mean(np.asarray([r["speedup"] for r in runs]))
        share = np.median([100 * (r["draft_s"] + r["overhead_s"]) / r["decode_s"] for r in runs])
        idle = idle_target_ratios(runs)
        idle_text = "-"
        if len(idle):
            ratio, r_low, r_high = geometric_mean(idle)
            idle_text = f"{ratio:.3f} ({r_low:.3f}-{r_high:.3f}; {len(idle)} runs; median {np.median(idle):.3f})"
        print(f"| {method} | {len(runs)} | {mean:.3f}x | {low:.3f}-{high:.3f} | "
              f"{own_ms_per_step(runs, 'draft_s'):.2f} | {own_ms_per_step(runs, 'overhead_s'):.2f} | {share:.2f} "
              f"| {idle_text} |")
    control = runs_of(args.json, void).get(args.control)
    if control:
        suites = {p["suite"] for p in data["prompts"]}
        prompts, rounds = len(data["prompts"]) // len(suites), int(data["setup"]["rounds"])
        print(f"\nThe noise floor: with the run-to-run spread of {args.control}'s runs, a method this many times "
              f"plain decoding's speed has, in expectation, this many of {len(suites)} suites ({prompts} prompts, "
              f"{rounds} rounds each) under 0.97x and of {len(data['prompts'])} prompts under 0.93x:\n")
        print("| speed | suites under 0.97x | prompts under 0.93x |")
        print("|---|---|---|")
        for ratio in (1.0, 0.995, 0.99, 0.985, 0.98):
            p_suite, p_prompt = noise_floor(control, ratio, prompts, rounds)
            print(f"| {ratio:.3f}x | {len(suites) * p_suite:.1f} | {len(data['prompts']) * p_prompt:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
