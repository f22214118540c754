"""The timed runs of one or more `pyaccel bench --json` files, pooled as one run of all their
rounds, and the statistics `pyaccel bench summary` reports on them: geometric means with
bootstrap intervals, the noise floor a plain-vs-plain control implies, and one method
against another prompt by prompt."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Sequence

import numpy as np

BOOTSTRAP_DRAWS = 2000
NOISE_DRAWS = 20000
# The floor criterion: every suite's median speedup at SUITE_FLOOR or more, no prompt's
# median under PROMPT_FLOOR.
SUITE_FLOOR = 0.97
PROMPT_FLOOR = 0.93
# A run at this tau or less gained nothing from its drafts (plain decoding's tau is 1).
IDLE_TAU = 1.005


@dataclass(frozen=True)
class TimedRun:
    """One run with a decode phase to time, and plain decoding's target time on the same
    prompt in the same round of the same file (None where plain's is missing). The time
    split and tau are None for llama-cpp-python's peers, which do not report them."""

    file: int  # index of the results file among those pooled
    suite: str
    prompt: str
    method: str
    round: int
    speedup: float
    tau: float | None
    decoded: int
    decode_s: float
    target_s: float | None
    draft_s: float | None
    overhead_s: float | None
    plain_target_s: float | None
    oracle: float | None  # the prompt's n-gram oracle bound, where the bench computed it

    @property
    def steps(self) -> float | None:
        """Target passes of the run (decoded tokens over tau)."""
        return self.decoded / self.tau if self.tau else None


@dataclass(frozen=True)
class Interval:
    """A statistic and its 95% bootstrap interval (None where no bootstrap was drawn)."""

    value: float
    low: float | None = None
    high: float | None = None


def parse_void(items: Iterable[str]) -> set[tuple[str, int]]:
    """--void SUITE:ROUND (rounds 0-based) as (suite, round) pairs."""
    out = set()
    for item in items:
        suite, _, rnd = item.rpartition(":")
        if not suite or not rnd.isdigit():
            raise ValueError(f"--void takes SUITE:ROUND with a 0-based round (specbench:writing:1), got {item!r}")
        out.add((suite, int(rnd)))
    return out


def _run(index: int, prompt: dict[str, Any], run: dict[str, Any], plain: dict[int, float]) -> TimedRun:
    rnd = int(run["round"])
    return TimedRun(index, prompt["suite"], prompt["id"], run["method"], rnd, float(run["speedup"]), run.get("tau"),
                    int(run["decoded"]), float(run["decode_s"]), run.get("target_s"), run.get("draft_s"),
                    run.get("overhead_s"), plain.get(rnd), prompt.get("oracle_speedup"))


def read_runs(paths: Sequence[str], void: Collection[tuple[str, int]] = ()) -> list[TimedRun]:
    """Every timed run of the files, in order: runs with no decode phase to time (speedup null)
    and the (suite, round) pairs of `void` left out."""
    from .replay import read_results  # it imports every method: not while the command line is parsed

    out = []
    for index, path in enumerate(paths):
        for prompt in read_results(path)["prompts"]:
            plain = {int(r["round"]): r["target_s"] for r in prompt["runs"]
                     if r["method"] == "plain" and r.get("target_s")}
            out += [_run(index, prompt, r, plain) for r in prompt["runs"]
                    if r["speedup"] and (prompt["suite"], int(r["round"])) not in void]
    if not out:
        raise ValueError(f"no timed runs in {', '.join(paths)}: every run is voided or decoded nothing to time")
    return out


def geometric_mean(values: Sequence[float], draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> Interval:
    """The geometric mean of `values` and the 2.5th / 97.5th percentiles of its bootstrap
    (`draws` resamples with replacement; 0: no interval)."""
    logs = np.log(np.asarray(values, dtype=float))
    mean = float(np.exp(logs.mean()))
    if draws <= 0:
        return Interval(mean)
    rng = np.random.default_rng(seed)
    boot = np.exp(logs[rng.integers(0, len(logs), (draws, len(logs)))].mean(axis=1))
    low, high = np.percentile(boot, [2.5, 97.5])
    return Interval(mean, float(low), float(high))


def noise_floor(control: Sequence[float], ratio: float, prompts: int, rounds: int,
                draws: int = NOISE_DRAWS, seed: int = 0) -> tuple[float, float]:
    """For a method `ratio` times plain decoding's speed, measured with the run-to-run spread
    of `control` (the plain-vs-plain control's speedups, centred on their median) in suites
    of `prompts` prompts of `rounds` runs each: P(a suite median under SUITE_FLOOR),
    P(a prompt median under PROMPT_FLOOR)."""
    logs = np.log(np.asarray(control, dtype=float))
    logs = logs - np.median(logs)
    rng = np.random.default_rng(seed)
    sample = rng.choice(logs, (draws, prompts, rounds)) + np.log(ratio)
    prompt_medians = np.exp(np.median(sample, axis=2))
    suite_medians = np.median(prompt_medians, axis=1)
    return float((suite_medians < SUITE_FLOOR).mean()), float((prompt_medians < PROMPT_FLOOR).mean())


def per_prompt(runs: Iterable[TimedRun], method: str) -> dict[tuple[str, str], list[TimedRun]]:
    """(suite, prompt id) -> the method's runs on it, in order."""
    out: dict[tuple[str, str], list[TimedRun]] = {}
    for r in runs:
        if r.method == method:
            out.setdefault((r.suite, r.prompt), []).append(r)
    return out


def median_speedup(runs: Sequence[TimedRun]) -> float:
    return float(statistics.median(r.speedup for r in runs))


@dataclass(frozen=True)
class Comparison:
    """One method against another on one suite's prompts: the geometric mean over prompts of
    the ratio of their per-prompt median speedups, how many prompts the first is ahead on,
    and the ratio of their suite medians (median over prompts of each prompt's median)."""

    prompts: int
    ahead: int
    geometric: Interval
    medians: Interval


def compare(first: Sequence[Sequence[float]], second: Sequence[Sequence[float]],
            draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> Comparison:
    """`first[k]` and `second[k]` are the two methods' speedups on prompt k. The intervals
    resample the prompts and, within each drawn prompt, each method's runs."""
    a = np.array([np.median(x) for x in first])
    b = np.array([np.median(x) for x in second])
    geo, med = float(np.exp(np.mean(np.log(a / b)))), float(np.median(a) / np.median(b))
    ahead = int((a > b).sum())
    if draws <= 0:
        return Comparison(len(a), ahead, Interval(geo), Interval(med))
    rng = np.random.default_rng(seed)
    geos, meds = [], []
    for _ in range(draws):
        picks = rng.integers(0, len(first), len(first))
        ra = np.array([np.median(rng.choice(first[k], len(first[k]))) for k in picks])
        rb = np.array([np.median(rng.choice(second[k], len(second[k]))) for k in picks])
        geos.append(np.exp(np.mean(np.log(ra / rb))))
        meds.append(np.median(ra) / np.median(rb))
    g_lo, g_hi = np.percentile(geos, [2.5, 97.5])
    m_lo, m_hi = np.percentile(meds, [2.5, 97.5])
    return Comparison(len(a), ahead, Interval(geo, float(g_lo), float(g_hi)),
                      Interval(med, float(m_lo), float(m_hi)))
