"""How big a lookahead window pays on a device: (W, N, G) from the cost model.

A window of W columns and N - 1 levels adds (W - 1) + W (N - 2) tokens to every pass and
G candidate n-grams up to G (N - 1) more; what it buys is a pool whose n-grams are
accepted more often. The expected tokens per pass of each size (`LookaheadTuning.tau`)
are measured on Spec-Bench prompts (the runs and their commands are in the docs); the predicted
speedup of a size is that tau over the cost of its pass on the device's curve at the
current context depth. Without a window the pool still holds the prompt's and the
output's n-grams and each step's tree plan decides what to verify.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...cost_model import CostModel


@dataclass(frozen=True)
class WindowSize:
    window: int  # W columns (0: no window)
    ngram: int  # N: n-gram length of the pool (the window has N - 1 levels)
    guesses: int  # G: candidate n-grams verified per pass (and kept per key in the pool)

    @property
    def window_tokens(self) -> int:
        return 0 if self.window == 0 else (self.window - 1) + self.window * (self.ngram - 2)

    @property
    def verify_tokens(self) -> int:
        """Verified nodes at most (candidates that share a prefix need fewer)."""
        return self.guesses * (self.ngram - 1)

    @property
    def tokens_per_pass(self) -> int:
        return 1 + self.window_tokens + self.verify_tokens

    def __str__(self) -> str:
        return f"W={self.window} N={self.ngram} G={self.guesses}"


@dataclass(frozen=True)
class WindowPlan:
    size: WindowSize
    tau: float  # expected tokens per pass (from LookaheadTuning.tau)
    relative_cost: float  # the pass's cost over one token's, at the planned depth
    expected_speedup: float


# Measured tau (greedy, Qwen2.5-Coder-1.5B, Spec-Bench median over categories) of each
# window size, cost model off; the runs and their commands are in the docs.
MEASURED_TAU: dict[tuple[int, int, int], float] = {(7, 5, 7): 1.38, (5, 4, 5): 1.42}


@dataclass(frozen=True)
class LookaheadTuning:
    """The knobs of lookahead decoding."""

    # Window sizes the cost model chooses among, with their measured tau.
    tau: dict[tuple[int, int, int], float] = field(default_factory=lambda: dict(MEASURED_TAU))
    # A window must beat plain decoding by this much on the curve to be used.
    margin: float = 0.05
    # Prior P(some candidate is right one token deeper), per depth, before evidence; and
    # how much that evidence is remembered (per sample of a depth).
    hazard_prior: tuple[float, ...] = (0.3, 0.5, 0.6, 0.65, 0.7, 0.7, 0.7, 0.7)
    hazard_decay: float = 0.98
    hazard_prior_weight: float = 4.0
    # The window is sized again after this many new tokens of context.
    replan_every: int = 128
    # Deepest prompt-lookup candidate merged into the tree (with lookup=True).
    lookup_depth: int = 16

    def validate(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"lookahead margin must be in [0, 1), got {self.margin}")
        if not 0.0 < self.hazard_decay <= 1.0 or self.hazard_prior_weight <= 0:
            raise ValueError(f"lookahead hazard_decay must be in (0, 1] and hazard_prior_weight > 0, got "
                             f"{self.hazard_decay}, {self.hazard_prior_weight}")
        if not self.hazard_prior or not all(0.0 <= a <= 1.0 for a in self.hazard_prior):
            raise ValueError(f"lookahead hazard_prior must hold probabilities, got {self.hazard_prior}")
        if self.replan_every < 1 or self.lookup_depth < 1:
            raise ValueError(f"lookahead replan_every and lookup_depth must be >= 1, got {self.replan_every}, "
                             f"{self.lookup_depth}")


def plan_window(costs: "CostModel", depth: int, tuning: LookaheadTuning, max_seqs: int,
                max_tokens: int) -> WindowPlan | None:
    """The measured window size with the best predicted speedup at `depth` that fits in
    `max_seqs` attention sequences and `max_tokens` per pass; None when none beats plain
    decoding by the tuning's margin."""
    best: WindowPlan | None = None
    for (w, n, g), tau in sorted(tuning.tau.items()):
        size = WindowSize(w, n, g)
        if w + g > max_seqs or size.tokens_per_pass > min(max_tokens, costs.max_nodes(depth) + 1):
            continue
        rel = float(costs.curve(depth).cost_at(size.tokens_per_pass)) / float(costs.curve(depth).cost_at(1))
        plan = WindowPlan(size, tau, rel, tau / rel)
        if best is None or plan.expected_speedup > best.expected_speedup:
            best = plan
    if best is None or best.expected_speedup <= 1.0 + tuning.margin:
        return None
    return best
