"""`pyaccel bench trace`: greedy generations through `Generator(..., trace=...)`, every decode
step recorded (`pyaccel.StepTrace`) and every run priced on the model's measured cost curve:
a floor check without the machine's timing noise, to run before (not instead of) the bench.

A run's modelled time is the curve's time for its passes (each step's batch at its depth),
in single-token times, plus its own time (decode time outside the target's passes: proposing,
verifying, feedback), turned into the same units with the run's own time per unit:

    modelled speed = decoded tokens / (sum of pass costs + own time / time per unit)

and its modelled speedup that over plain decoding's on the same prompt (plain always runs).
Only the own-time part carries the machine's noise. Outputs are plain decoding's up to
near-ties, so the passes are the ones the bench would time.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..generator import Generator
from ..methods.spec import MethodSpec
from ..types import StepTrace
from .pooled import PROMPT_FLOOR, SUITE_FLOOR
from .runner import prompt_tokens
from .runners import PEERS, PLAIN, make_proposer
from .suites import SPECBENCH, BenchPrompt

if TYPE_CHECKING:
    from ..model import Model

LOWEST_SHOWN = 3


@dataclass(frozen=True)
class TraceOptions:
    max_tokens: int
    carry: bool = True  # one Generator per method over every prompt, as `pyaccel bench` (False: one per run)
    draft_model: str | None = None  # of draft methods that name none
    heads: str | None = None  # of medusa methods that name none


@dataclass(frozen=True)
class TracedRun:
    """One greedy generation's steps and its decode time split, priced on the cost curve."""

    steps: tuple[StepTrace, ...]
    decoded: int
    decode_s: float
    target_s: float
    units: float  # the passes' cost in single-token times
    own_units: float  # the time outside the passes, in the same units

    @property
    def speed(self) -> float:
        return self.decoded / (self.units + self.own_units) if self.units else 0.0

    @property
    def speed_passes_only(self) -> float:
        return self.decoded / self.units if self.units else 0.0

    @property
    def drafted(self) -> int:
        return sum(s.drafted for s in self.steps)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)


@dataclass(frozen=True)
class TracedPrompt:
    prompt: BenchPrompt
    runs: dict[str, TracedRun] = field(default_factory=dict)  # by method label, plain first

    @property
    def group(self) -> str:
        """The prompt's suite; a mixed Spec-Bench suite's prompts by their category."""
        if self.prompt.suite == SPECBENCH:
            return f"{SPECBENCH}:{self.prompt.id.rsplit('-', 1)[0]}"
        return self.prompt.suite

    @property
    def timed(self) -> bool:
        """Every run took a decode step (an answer that ends at its first token has none to price)."""
        return all(r.units > 0 for r in self.runs.values())

    def modelled(self, label: str, passes_only: bool = False) -> float:
        """The run's modelled speedup over plain decoding's on this prompt."""
        run, plain = self.runs[label], self.runs[PLAIN]
        if passes_only:
            return run.speed_passes_only / plain.speed_passes_only if plain.speed_passes_only else 0.0
        return run.speed / plain.speed if plain.speed else 0.0


def pass_units(model: "Model", step: StepTrace) -> float:
    """The step's pass in single-token times at its depth. A batch past the measured sizes is
    priced at the largest measured size's cost per token: the curve says nothing beyond it."""
    times = model.costs.curve(step.depth).times
    if step.batch <= len(times):
        return float(times[step.batch - 1] / times[0])
    return float(times[-1] / times[0]) * step.batch / len(times)


def _priced(model: "Model", steps: Sequence[StepTrace], decoded: int, decode_s: float, target_s: float) -> TracedRun:
    units = sum(pass_units(model, s) for s in steps)
    own_s = max(0.0, decode_s - target_s)
    own_units = own_s / (target_s / units) if units and target_s > 0 else 0.0
    return TracedRun(tuple(steps), decoded, decode_s, target_s, units, own_units)


def check_methods(methods: Sequence[MethodSpec]) -> None:
    peers = [m.label for m in methods if m.name in PEERS]
    if peers:
        raise ValueError(f"trace runs pyaccel's own decode loop: leave {', '.join(peers)} (llama-cpp-python's "
                         "own generation, which has no steps to trace) out of --methods")


def _generate(model: "Model", gen: Generator, steps: list[StepTrace], tokens: list[int], max_tokens: int) -> TracedRun:
    steps.clear()
    gen.reset()  # every run prefills afresh, as the bench's do
    s = gen.generate(tokens, max_tokens=max_tokens, temperature=0.0).stats
    return _priced(model, list(steps), s.decoded_tokens, s.decode_s, s.target_s)


def trace_runs(model: "Model", methods: Sequence[MethodSpec], prompts: Sequence[BenchPrompt],
               options: TraceOptions) -> Iterator[TracedPrompt]:
    """Every method once on every prompt, in order, each prompt's runs as it finishes."""
    check_methods(methods)
    collected: dict[str, list[StepTrace]] = {m.label: [] for m in methods}

    def generator(spec: MethodSpec) -> Generator:
        steps = collected[spec.label]
        return Generator(model, make_proposer(spec, model, options.draft_model, options.heads), trace=steps.append)

    carried = {m.label: generator(m) for m in methods} if options.carry else {}
    try:
        for bp in prompts:
            tokens = prompt_tokens(model, bp.text)
            traced = TracedPrompt(bp)
            for spec in methods:
                gen = carried[spec.label] if options.carry else generator(spec)
                try:
                    traced.runs[spec.label] = _generate(model, gen, collected[spec.label], tokens, options.max_tokens)
                finally:
                    if not options.carry:
                        gen.close()
            yield traced
    finally:
        for gen in carried.values():
            gen.close()


def step_lines(model: "Model", run: TracedRun) -> list[str]:
    """One line per step: its depth, batch, drafted / accepted / committed tokens, its times
    in ms (the target's pass, proposing, the whole step), its pass cost and its text."""
    return [f"{s.index:4d} depth {s.depth:5d} batch {s.batch:3d} drafted {s.drafted:2d} accepted {s.accepted:2d} "
            f"committed {s.committed:2d} target {1e3 * s.target_s:7.2f} propose {1e3 * s.propose_s:6.2f} "
            f"step {1e3 * s.step_s:7.2f} cost {pass_units(model, s):5.2f} | {model.detokenize(list(s.tokens))!r:.60}"
            for s in run.steps]


def prompt_lines(traced: TracedPrompt) -> list[str]:
    """One line per method run on the prompt."""
    out = []
    for label, run in traced.runs.items():
        own = 100 * run.own_units / run.units if run.units else 0.0
        out.append(f"{traced.prompt.suite} {traced.prompt.id} {label}: steps {len(run.steps)}, drafted {run.drafted}, "
                   f"accepted {run.accepted}, tau {run.decoded / max(1, len(run.steps)):.2f}, modelled "
                   f"{traced.modelled(label):.3f}x (passes only {traced.modelled(label, True):.3f}x), "
                   f"own time {own:.2f}% of the passes'")
    return out


def _group_table(traced: Sequence[TracedPrompt], labels: Sequence[str]) -> list[str]:
    groups = list(dict.fromkeys(t.group for t in traced))
    lines = ["| method | " + " | ".join(groups) + f" | min | at {SUITE_FLOOR}x+ | geometric mean |",
             "|---|" + "---|" * (len(groups) + 3)]
    for label in labels:
        per = {g: float(np.median([t.modelled(label) for t in traced if t.group == g])) for g in groups}
        every = np.array([t.modelled(label) for t in traced])
        ok = sum(v >= SUITE_FLOOR for v in per.values())
        lines.append(f"| {label} | " + " | ".join(f"{per[g]:.3f}" for g in groups)
                     + f" | {min(per.values()):.3f} | {ok} of {len(groups)} | {np.exp(np.log(every).mean()):.3f} |")
    return lines


def _own_table(traced: Sequence[TracedPrompt], labels: Sequence[str]) -> list[str]:
    lines = [f"| method | own time (% of pass time) | geometric mean, passes only | lowest prompts "
             f"| prompts under {PROMPT_FLOOR}x | drafted / accepted |", "|---|---|---|---|---|---|"]
    for label in labels:
        runs = [t.runs[label] for t in traced]
        own = 100 * sum(r.own_units for r in runs) / max(1e-12, sum(r.units for r in runs))
        passes = np.exp(np.log([t.modelled(label, True) for t in traced]).mean())
        low = sorted(traced, key=lambda t: t.modelled(label))[:LOWEST_SHOWN]
        under = sum(t.modelled(label) < PROMPT_FLOOR for t in traced)
        lines.append(f"| {label} | {own:.2f} | {passes:.3f} | "
                     + ", ".join(f"{t.prompt.id} {t.modelled(label):.3f}" for t in low)
                     + f" | {under} of {len(traced)} | {sum(r.drafted for r in runs)} / "
                       f"{sum(r.accepted for r in runs)} |")
    return lines


def floor_lines(traced: Sequence[TracedPrompt]) -> list[str]:
    """Per method: its modelled speedup per suite (median over its prompts), the lowest, the
    suites at the floor and the geometric mean over prompts; then its own time, the geometric
    mean of its passes alone, its lowest prompts and its drafted and accepted tokens."""
    traced = [t for t in traced if t.timed]
    if not traced:
        return ["no prompt with a decode step to price: raise --max-tokens or choose other prompts"]
    labels = list(traced[0].runs)
    return _group_table(traced, labels) + [""] + _own_table(traced, labels)


def jsonl_row(traced: TracedPrompt) -> dict[str, Any]:
    """A prompt's runs as one JSON object: each run's times, costs, modelled speedups and steps."""
    runs = {label: {"decoded": r.decoded, "decode_s": r.decode_s, "target_s": r.target_s, "units": r.units,
                    "own_units": r.own_units, "modelled": traced.modelled(label),
                    "modelled_passes_only": traced.modelled(label, True), "steps": [asdict(s) for s in r.steps]}
            for label, r in traced.runs.items()}
    return {"suite": traced.prompt.suite, "id": traced.prompt.id, "runs": runs}
