"""`pyaccel bench --costs`: the measured verification cost curve and the draft lengths the
cost model picks on it, next to a flat GPU-like curve.

The evidence that drafts are sized by the device: where verifying b tokens costs about b
times one token (a small CPU) the plan drafts little or nothing; where it is nearly flat it
drafts long chains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .. import _core
from ..costs import MAX_MEASURED_BATCH, DecodeCosts

if TYPE_CHECKING:
    from ..methods.lookahead import LookaheadTuning
    from ..model import Model

# Sizes shown from the measured curve (the steps of the CPU kernels' tiling are visible).
SHOWN_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)
ALPHAS = (0.5, 0.7, 0.8, 0.9)
# Slope of the synthetic GPU-like curve: each extra token verified costs 2% of one token.
FLAT_SLOPE = 0.02
PLAN_MAX_DRAFT = 32
# A flatter curve still (a small model on a large GPU: 64 tokens cost ~1.3 tokens).
FLATTER_SLOPE = 0.005


def flat_curve(n: int = MAX_MEASURED_BATCH, slope: float = FLAT_SLOPE) -> list[float]:
    """t[b] = 1 + slope * (b - 1), b = 1..n."""
    return [1.0 + slope * (b - 1) for b in range(1, n + 1)]


def curve_table(costs: DecodeCosts) -> str:
    """Markdown: ms and cost relative to one token, per size, behind each measured depth
    (sizes between the swept ones are interpolated from the full curve)."""
    depths = sorted([costs.depth] + list(costs.sweep_depths))
    rows = {d: costs.seconds_at(d) for d in depths}
    head = ["tokens in one decode"] + [f"{what} behind {d}" for d in depths for what in ("ms", "relative")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in SHOWN_SIZES:
        if b <= len(costs.seconds):
            cells = [f"{rows[d][b - 1] * 1e3:.1f} | {rows[d][b - 1] / rows[d][0]:.2f}" for d in depths]
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plan_cell(curve: "_core.CostCurve", alpha: float, draft_cost: float) -> str:
    plan = _core.chain_plan(curve, [alpha] * PLAN_MAX_DRAFT, draft_cost, PLAN_MAX_DRAFT)
    return f"{plan.best_len} ({plan.expected_speedup:.2f}x)"


def plan_table(measured: Sequence[float], draft_costs: Sequence[tuple[str, float]]) -> str:
    """Draft length (expected speedup) chosen by `_core.chain_plan` per alpha and draft cost."""
    curves = [("measured", _core.CostCurve(list(measured))), ("flat", _core.CostCurve(flat_curve(len(measured))))]
    head = ["alpha", "draft cost"] + [f"{name} curve: length (speedup)" for name, _ in curves]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for alpha in ALPHAS:
        for label, cost in draft_costs:
            cells = [f"{alpha:.1f}", label] + [_plan_cell(c, alpha, cost) for _, c in curves]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def lookahead_table(measured: Sequence[float], tuning: "LookaheadTuning | None" = None) -> str:
    """Markdown: every measured lookahead window size with its tau and its predicted speedup
    on the measured and the flat curve, and the size the cost model runs on each."""
    from ..cost_model import CostModel
    from ..methods.lookahead import LookaheadTuning, WindowSize, plan_window

    tuning = tuning if tuning is not None else LookaheadTuning()
    if not tuning.tau:
        return ("(no measured lookahead window sizes: measure each size's tau with `pyaccel bench --suite specbench "
                "--methods lookahead:window=W,ngram=N,guesses=G,cost_model=false` and give them as LookaheadTuning.tau)")
    curves = [("measured", CostModel.fixed(list(measured))),
              (f"flat {FLAT_SLOPE:g}", CostModel.fixed(flat_curve(len(measured)))),
              (f"flat {FLATTER_SLOPE:g}", CostModel.fixed(flat_curve(len(measured), FLATTER_SLOPE)))]
    head = ["W, N, G", "tokens/pass", "tau"] + [f"{name}: relative cost (speedup)" for name, _ in curves]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (w, n, g), tau in sorted(tuning.tau.items()):
        size = WindowSize(w, n, g)
        cells = [f"{w}, {n}, {g}", str(size.tokens_per_pass), f"{tau:.2f}"]
        for _, costs in curves:
            if size.tokens_per_pass > costs.max_nodes(0) + 1:
                cells.append("-")
                continue
            rel = costs.curve(0).cost_at(size.tokens_per_pass) / costs.curve(0).cost_at(1)
            cells.append(f"{rel:.2f} ({tau / rel:.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    for name, costs in curves:
        plan = plan_window(costs, 0, tuning, max_seqs=32, max_tokens=512)
        chosen = f"{plan.size} ({plan.expected_speedup:.2f}x)" if plan else "no window (the pool alone, sized per step)"
        lines.append(f"\nThe cost model runs on the {name} curve: {chosen}")
    return "\n".join(lines)


def _draft_cost(model: "Model", draft: str | None) -> tuple[str, float] | None:
    """One draft-model token's decode time relative to one target token, or None without a draft.
    Both are timed now, one after the other, so a busy machine slows both alike."""
    from ..model import Model

    name = draft
    if name is None:
        spec = model.registry_spec
        name = spec.draft if spec is not None else None
    if name is None:
        return None
    with Model(name, n_ctx=256, n_threads=model.backend.n_threads,
               n_gpu_layers=model.backend.config.n_gpu_layers) as dm:
        ratio = model.costs.relative_token_cost(model.backend, dm.backend)
    return (f"{ratio:.3f} ({dm.name})", ratio)


def costs_report(model: "Model", draft: str | None = None) -> str:
    """Markdown: the measured curve, then the plans on it and on a flat curve."""
    costs = model.costs.measured
    assert costs is not None, "the report shows a measured curve"
    draft_costs = [("0 (n-gram)", 0.0)]
    measured_draft = _draft_cost(model, draft)
    if measured_draft is not None:
        draft_costs.append(measured_draft)
    parts = [f"Decode cost of {model.name} ({model.backend.n_threads} threads):", "", curve_table(costs), "",
             f"Draft length chosen by the cost model (at most {PLAN_MAX_DRAFT}; alpha = per-token acceptance; "
             f"flat: t[b] = 1 + {FLAT_SLOPE} (b - 1), GPU-like):", "", plan_table(costs.relative(), draft_costs)]
    if measured_draft is None:
        parts += ["", f"({model.name} has no registry draft model: pass --draft-model to add its row)"]
    parts += ["", "Lookahead window sizes (tau measured greedy; speedup = tau / relative cost of the pass):", "",
              lookahead_table(costs.relative())]
    return "\n".join(parts)
