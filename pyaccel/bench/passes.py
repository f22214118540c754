"""`pyaccel bench passes`: any method's passes replayed over a `pyaccel bench --json` run's
plain outputs, without the target (`replay.simulate`): per prompt its steps, drafted tokens
and speedup priced on the cost curve (passes only, no own time), their totals and geometric
mean, each suite's median and the method's counters; every step of chosen prompts; and two
methods replayed in many prompt orders.

Greedy and exact for proposers that only read the tokens. One proposer is carried over every
prompt in order, each prompt replayed `rounds` times in a row, as `pyaccel bench --rounds`
runs it: what a method carries from prompt to prompt (copy statistics, calibration) decides
some of its bets, so a suite median that moves with the prompt order is chance, not the method.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..methods import make_method
from ..methods.base import Proposer
from ..types import Draft
from .oracle import oracle_speedup
from .replay import simulate

if TYPE_CHECKING:
    from ..model import Model

Recorded = list[tuple[dict[str, Any], list[int], list[int]]]  # replay.recorded_plain's
# The counters shown after a replay: those a method keeps of its steps and drafts.
COUNTER_PREFIXES = ("steps", "drafted", "accepted", "skipped")
LOWEST_SHOWN = 3


@dataclass(frozen=True)
class PassesOptions:
    method: str = "auto"  # a method spec
    rounds: int = 1  # times each prompt is replayed in a row, as `pyaccel bench --rounds`
    repeats: int = 1  # passes over all the prompts, the proposer carried; the last one is reported
    by_prefix: bool = False  # medians per prompt-id prefix (a Spec-Bench category), not per suite
    oracle: bool = False  # each prompt's n-gram oracle bound on the same curve, and the share of it
    shuffle: int | None = None  # replay the prompts in an order shuffled with this seed
    show: frozenset[str] = field(default_factory=frozenset)  # prompt ids whose every step is printed

    def validate(self) -> None:
        if self.rounds < 1 or self.repeats < 1:
            raise ValueError(f"--rounds and --repeats must be >= 1, got {self.rounds} and {self.repeats}")


def fixed_curve(text: str) -> list[float]:
    """--curve SIZE:TIME,... ("1:1,2:1.63,4:2.78"): single-token times relative to one token,
    linearly interpolated at every size up to the largest."""
    try:
        pairs = sorted((int(a), float(b)) for a, b in (item.split(":") for item in text.split(",")))
    except ValueError:
        raise ValueError(f"--curve takes SIZE:TIME pairs separated by commas (1:1,2:1.63,4:2.78), "
                         f"got {text!r}") from None
    if pairs[0] != (1, 1.0) or len(pairs) < 2:
        raise ValueError("--curve must start at 1:1 (times are relative to one token) and give another size")
    sizes, times = zip(*pairs)
    return [float(t) for t in np.interp(np.arange(1, sizes[-1] + 1), sizes, times)]


def bound_method(spec: str, model: "Model") -> Proposer:
    proposer = make_method(spec)
    proposer.bind(model)
    return proposer


def step_printer(model: "Model", output: list[int], lines: list[str]) -> Callable[[int, Draft, list[int], int], None]:
    """A `simulate` on_step that adds a line per step of one prompt whose output is `output`:
    the output tokens before it, the drafted and kept nodes, the pass's cost in single-token
    times, the text committed and the first rejected draft token."""
    def show(done: int, draft: Draft, path: list[int], depth: int) -> None:
        cost = model.costs.relative_at(depth)[len(draft)]
        miss = model.detokenize([int(draft.tokens[len(path)])]) if len(path) < len(draft) else ""
        text = model.detokenize(output[done:done + len(path) + 1])
        lines.append(f"{done:4d} drafted {len(draft):2d} kept {len(path):2d} cost {cost:.2f} | "
                     f"{text!r:.70} | rejected: {miss!r}")
    return show


@dataclass(frozen=True)
class Replayed:
    record: dict[str, Any]
    prompt: list[int]
    output: list[int]
    sims: list[dict[str, float]]  # one per round

    @property
    def speedup(self) -> float:
        return float(statistics.median(s["speedup"] for s in self.sims))


def replay_rounds(proposer: Proposer, model: "Model", recorded: Recorded, rounds: int, repeats: int = 1,
                  show: frozenset[str] = frozenset(), lines: list[str] | None = None) -> list[Replayed]:
    """`proposer` carried over `recorded` `repeats` times, each prompt `rounds` times in a row;
    the last repeat's replays. The steps of the prompts in `show` go to `lines`."""
    rel = model.costs.relative_at
    out = []
    for rep in range(repeats):
        final = rep == repeats - 1
        for record, prompt, output in recorded:
            sims = []
            for rnd in range(rounds):
                on_step = None
                if final and record["id"] in show and lines is not None:
                    lines.append(f"== {record['id']}" + (f", round {rnd + 1}" if rounds > 1 else ""))
                    on_step = step_printer(model, output, lines)
                sims.append(simulate(proposer, prompt, output, rel, on_step=on_step, max_tokens=record["max_tokens"]))
            if final:
                out.append(Replayed(record, prompt, output, sims))
    return out


def _group(record: dict[str, Any], by_prefix: bool) -> str:
    return record["id"].rsplit("-", 1)[0] if by_prefix else record["suite"]


def _prompt_line(model: "Model", r: Replayed, oracle: bool) -> str:
    rounds = " rounds " + " ".join(f"{s['speedup']:.4f}" for s in r.sims) if len(r.sims) > 1 else ""
    bound = ""
    if oracle:
        best = oracle_speedup(r.prompt, r.output, model.costs.relative_at)
        bound = f" oracle {best:.4f} share {r.speedup / best:.3f}"
    last = r.sims[-1]
    return (f"{r.record['id']:34s} steps {last['steps']:4.0f} drafted {last['drafted']:5.0f}{rounds} "
            f"speedup {r.speedup:.4f}{bound}")


def _totals(replayed: list[Replayed], by_prefix: bool) -> list[str]:
    last = [r.sims[-1] for r in replayed]
    geo = math.exp(statistics.mean(math.log(r.speedup) for r in replayed))
    low = sorted(replayed, key=lambda r: r.speedup)[:LOWEST_SHOWN]
    groups: dict[str, list[float]] = {}
    for r in replayed:
        groups.setdefault(_group(r.record, by_prefix), []).extend(s["speedup"] for s in r.sims)
    under = sum(r.speedup < 0.93 for r in replayed)
    return [f"totals ({len(replayed)} prompts, the last round's steps): steps {sum(s['steps'] for s in last):.0f}, "
            f"drafted {sum(s['drafted'] for s in last):.0f}, geometric mean speedup {geo:.4f}",
            "lowest prompts: " + ", ".join(f"{r.record['id']} {r.speedup:.4f}" for r in low)
            + f"; {under} of {len(replayed)} under 0.93",
            "medians: " + ", ".join(f"{g} {statistics.median(v):.4f}" for g, v in groups.items())]


def passes_lines(model: "Model", recorded: Recorded, options: PassesOptions) -> list[str]:
    """The replay of `options.method` over `recorded`: the shown steps, a line per prompt, the
    totals and medians, and the method's counters over every repeat."""
    options.validate()
    order = list(recorded)
    if options.shuffle is not None:
        random.Random(options.shuffle).shuffle(order)
    proposer = bound_method(options.method, model)
    try:
        lines: list[str] = []
        replayed = replay_rounds(proposer, model, order, options.rounds, options.repeats, options.show, lines)
        lines += [_prompt_line(model, r, options.oracle) for r in replayed]
        lines += _totals(replayed, options.by_prefix)
        counters = {k: v for k, v in proposer.counters.items() if k.startswith(COUNTER_PREFIXES)}
        lines.append(f"counters (all repeats): {counters}")
    finally:
        proposer.close()
    return lines


def _order_medians(replayed: list[Replayed]) -> tuple[dict[str, float], float]:
    """Each suite's median over every round's run (as the bench's tables) and the geometric
    mean of the prompts' medians."""
    suites: dict[str, list[float]] = {}
    for r in replayed:
        suites.setdefault(r.record["suite"], []).extend(s["speedup"] for s in r.sims)
    geo = math.exp(statistics.mean(math.log(r.speedup) for r in replayed))
    return {k: float(statistics.median(v)) for k, v in suites.items()}, geo


def _one_order(model: "Model", order: Recorded, spec: str, options: PassesOptions) -> list[Replayed]:
    proposer = bound_method(spec, model)
    try:
        return replay_rounds(proposer, model, order, options.rounds, options.repeats)
    finally:
        proposer.close()


def orders_lines(model: "Model", recorded: Recorded, options: PassesOptions, against: str, orders: int) -> list[str]:
    """`options.method` against `against` in `orders` shuffled prompt orders (seeds 1..N): per
    order both methods' suite medians and geometric means; in how many orders the first's median
    was at least the second's per suite; per prompt the mean of their ratio across the orders."""
    options.validate()
    if orders < 1:
        raise ValueError(f"--orders must be >= 1, got {orders}")
    lines, wins = [], {}
    ratios: dict[str, list[float]] = {}
    suite_of = {rec["id"]: rec["suite"] for rec, _, _ in recorded}
    for seed in range(1, orders + 1):
        order = list(recorded)
        random.Random(seed).shuffle(order)
        ra, rb = _one_order(model, order, options.method, options), _one_order(model, order, against, options)
        (ma, ga), (mb, gb) = _order_medians(ra), _order_medians(rb)
        for suite in ma:
            wins[suite] = wins.get(suite, 0) + (ma[suite] >= mb[suite])
        lines.append(f"order {seed:2d}: geometric mean {ga:.4f} / {gb:.4f}; medians "
                     + ", ".join(f"{s} {ma[s]:.4f} / {mb[s]:.4f}" for s in ma))
        for a, b in zip(ra, rb):
            ratios.setdefault(a.record["id"], []).append(a.speedup / b.speedup)
    lines.append(f"{options.method} median >= {against} median in: "
                 + ", ".join(f"{suite} {n} of {orders} orders" for suite, n in wins.items()))
    lines.append(f"per prompt, mean of {options.method} / {against} over the orders (min-max):")
    for pid, rs in sorted(ratios.items(), key=lambda kv: statistics.mean(kv[1])):
        lines.append(f"  {pid:34s} {statistics.mean(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})  {suite_of[pid]}")
    return lines
