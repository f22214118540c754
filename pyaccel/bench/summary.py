"""`pyaccel bench summary`: Markdown tables of one or more `pyaccel bench --json` runs pooled
(`pooled`): each suite's median per method, each method's geometric mean with its bootstrap
interval and own time, the noise floor of a plain-vs-plain control, one method against
another prompt by prompt, and one method's prompts one by one."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from .pooled import (
    IDLE_TAU,
    PROMPT_FLOOR,
    SUITE_FLOOR,
    Interval,
    TimedRun,
    compare,
    geometric_mean,
    median_speedup,
    noise_floor,
    per_prompt,
)

# The speeds, relative to plain decoding, at which the noise floor table is read.
NOISE_RATIOS = (1.0, 0.995, 0.99, 0.985, 0.98)


@dataclass(frozen=True)
class SummaryOptions:
    control: str = "plain:"  # the plain-vs-plain control's method label
    draws: int = 2000  # bootstrap resamples of every interval (0: none)
    compare: tuple[str, str] | None = None  # first method against the second, prompt by prompt
    per_prompt: str | None = None  # a method whose prompts are listed one by one
    prefix: str = ""  # only the prompts whose id starts with this, in the per-prompt table


def _methods(runs: Sequence[TimedRun]) -> list[str]:
    return list(dict.fromkeys(r.method for r in runs))


def _interval(iv: Interval, digits: int = 3) -> str:
    return "-" if iv.low is None or iv.high is None else f"{iv.low:.{digits}f}-{iv.high:.{digits}f}"


def suite_table(runs: Sequence[TimedRun]) -> list[str]:
    """Per suite and method: runs per prompt, the median over prompts of each prompt's median
    speedup, the lowest prompt, the median tau; then per method the suites at the floor."""
    lines = ["| suite | method | runs per prompt | median speedup | lowest prompt | median tau |",
             "|---|---|---|---|---|---|"]
    at_floor: dict[str, int] = {}
    suites = list(dict.fromkeys(r.suite for r in runs))
    for suite in suites:
        for method in _methods(runs):
            prompts = {k: v for k, v in per_prompt(runs, method).items() if k[0] == suite}
            if not prompts:
                continue
            medians = {k[1]: median_speedup(v) for k, v in prompts.items()}
            median = statistics.median(medians.values())
            at_floor[method] = at_floor.get(method, 0) + (median >= SUITE_FLOOR)
            low = min(medians, key=medians.__getitem__)
            taus = [r.tau for v in prompts.values() for r in v if r.tau is not None]
            tau = f"{statistics.median(taus):.2f}" if taus else "-"
            counts = "/".join(map(str, sorted({len(v) for v in prompts.values()})))
            lines.append(f"| {suite} | {method} | {counts} | {median:.3f}x | {low} {medians[low]:.3f}x | {tau} |")
    lines.append("")
    lines.append(f"suites at {SUITE_FLOOR}x or more: "
                 + ", ".join(f"{method} {n} of {len(suites)}" for method, n in at_floor.items()))
    return lines


def _ms_per_step(runs: Sequence[TimedRun], field: str) -> str:
    values = [1e3 * getattr(r, field) / r.steps for r in runs if getattr(r, field) is not None and r.steps]
    return f"{statistics.median(values):.2f}" if values else "-"


def _own_share(runs: Sequence[TimedRun]) -> str:
    shares = [100 * (r.draft_s + r.overhead_s) / r.decode_s for r in runs
              if r.draft_s is not None and r.overhead_s is not None and r.decode_s > 0]
    return f"{statistics.median(shares):.2f}" if shares else "-"


def _idle(runs: Sequence[TimedRun], draws: int) -> str:
    """Target time over plain's on the runs that gained nothing: above the control's, the
    method slows the target's own passes (its batches, its cache use), not only drafts in vain."""
    ratios = [r.target_s / r.plain_target_s for r in runs
              if r.tau is not None and r.tau <= IDLE_TAU and r.target_s and r.plain_target_s]
    if not ratios:
        return "-"
    iv = geometric_mean(ratios, draws)
    return f"{iv.value:.3f} ({_interval(iv)}; {len(ratios)} runs; median {statistics.median(ratios):.3f})"


def floor_table(runs: Sequence[TimedRun], draws: int) -> list[str]:
    """Per method: the geometric mean of every run's speedup with its interval, the time it
    spends drafting and otherwise outside the target's passes per step, that own time's share
    of the decode, and its target time over plain's where it gained nothing."""
    lines = ["| method | runs | geometric mean | 95% interval | drafting ms/step | other ms/step | own share % "
             "| target time / plain's, runs at tau 1.00 (95% interval) |", "|---|---|---|---|---|---|---|---|"]
    for method in _methods(runs):
        mine = [r for r in runs if r.method == method]
        iv = geometric_mean([r.speedup for r in mine], draws)
        lines.append(f"| {method} | {len(mine)} | {iv.value:.3f}x | {_interval(iv)} | {_ms_per_step(mine, 'draft_s')} "
                     f"| {_ms_per_step(mine, 'overhead_s')} | {_own_share(mine)} | {_idle(mine, draws)} |")
    return lines


def noise_table(runs: Sequence[TimedRun], control: str) -> list[str]:
    """How many suites and prompts a method of a given speed shows under the floor from the
    control's run-to-run spread alone; nothing where the runs hold no control."""
    mine = [r for r in runs if r.method == control]
    if not mine:
        return []
    suites = len({r.suite for r in runs})
    prompts = len({(r.suite, r.prompt) for r in runs})
    per_suite = max(1, round(prompts / suites))
    rounds = max(1, round(statistics.median(len(v) for v in per_prompt(mine, control).values())))
    lines = [f"The noise floor: with the run-to-run spread of {control}'s runs, a method this many times plain "
             f"decoding's speed has, in expectation, this many of {suites} suites ({per_suite} prompts, {rounds} "
             f"rounds each) under {SUITE_FLOOR}x and of {prompts} prompts under {PROMPT_FLOOR}x:", "",
             f"| speed | suites under {SUITE_FLOOR}x | prompts under {PROMPT_FLOOR}x |", "|---|---|---|"]
    for ratio in NOISE_RATIOS:
        p_suite, p_prompt = noise_floor([r.speedup for r in mine], ratio, per_suite, rounds)
        lines.append(f"| {ratio:.3f}x | {suites * p_suite:.1f} | {prompts * p_prompt:.1f} |")
    return lines


def comparison_lines(runs: Sequence[TimedRun], first: str, second: str, draws: int) -> list[str]:
    """Per suite, `first` against `second` on the prompts both ran."""
    a, b = per_prompt(runs, first), per_prompt(runs, second)
    if not a or not b:
        missing = first if not a else second
        raise ValueError(f"--compare: no timed runs of {missing!r}; the runs hold {', '.join(_methods(runs))}")
    lines = []
    for suite in dict.fromkeys(r.suite for r in runs):
        keys = [k for k in a if k[0] == suite and k in b]
        if not keys:
            continue
        c = compare([[r.speedup for r in a[k]] for k in keys], [[r.speedup for r in b[k]] for k in keys], draws)
        lines.append(f"{suite}: {first} / {second} per prompt, geometric mean {c.geometric.value:.4f} "
                     f"(95% interval {_interval(c.geometric, 4)}); {first} ahead on {c.ahead} of {c.prompts} prompts; "
                     f"suite medians' ratio {c.medians.value:.4f} (95% interval {_interval(c.medians, 4)})")
    return lines


def prompt_table(runs: Sequence[TimedRun], method: str, prefix: str) -> list[str]:
    """`method`'s prompts whose id starts with `prefix`: every run's speedup, their median,
    the median tau, the oracle bound and the median's share of it; then the median over them."""
    chosen = {k: v for k, v in per_prompt(runs, method).items() if k[1].startswith(prefix)}
    if not chosen:
        ids = sorted({r.prompt.rsplit("-", 1)[0] for r in runs})
        raise ValueError(f"--per-prompt: no timed runs of {method!r} on prompts whose id starts with {prefix!r}; "
                         f"the runs hold methods {', '.join(_methods(runs))} and ids starting {', '.join(ids)}")
    lines = ["| prompt | speedups | median | tau | oracle | of oracle |", "|---|---|---|---|---|---|"]
    medians = []
    for (_, pid), mine in chosen.items():
        med = median_speedup(mine)
        medians.append(med)
        taus = [r.tau for r in mine if r.tau is not None]
        bound = mine[0].oracle
        lines.append(f"| {pid} | {' '.join(f'{r.speedup:.2f}x' for r in mine)} | {med:.2f}x | "
                     f"{f'{statistics.median(taus):.2f}' if taus else '-'} | {f'{bound:.2f}x' if bound else '-'} | "
                     f"{f'{med / bound:.2f}' if bound else '-'} |")
    lines += ["", f"median over {len(medians)} prompts: {statistics.median(medians):.2f}x "
              f"(min {min(medians):.2f}x, max {max(medians):.2f}x)"]
    return lines


def summary_lines(runs: Sequence[TimedRun], options: SummaryOptions) -> list[str]:
    """The whole report: the suite and floor tables, the noise floor where the control ran,
    and the comparison and per-prompt table where asked."""
    lines = suite_table(runs) + [""] + floor_table(runs, options.draws)
    noise = noise_table(runs, options.control)
    if noise:
        lines += [""] + noise
    if options.compare is not None:
        lines += [""] + comparison_lines(runs, *options.compare, options.draws)
    if options.per_prompt is not None:
        lines += [""] + prompt_table(runs, options.per_prompt, options.prefix)
    return lines

