"""The knobs of prompt lookup (`LookupTuning`) and the buckets of context agreement its
acceptance statistics are kept in."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import _core


def agreement_bucket(k: int) -> int:
    """Acceptance is tracked per bucket of context agreement k >= 1 (half-octaves:
    1, 2, 3, 4-5, 6-7, 8-11, 12-15, 16-22, ...): a token after k agreeing tokens."""
    return _core.agreement_bucket(k, N_BUCKETS)


def agreement_buckets(ks: np.ndarray) -> np.ndarray:
    """`agreement_bucket` of each k."""
    return _core.agreement_buckets(ks, N_BUCKETS)


N_BUCKETS = 2 * 7 + 1  # up to k = 128 = the context cap + the deepest draft
CONTEXT_CAP = 64  # context agreement is counted this far back: beyond it a copy is a copy


@dataclass(frozen=True)
class LookupTuning:
    """The knobs of prompt lookup."""

    # Decay per outcome of the acceptance statistics: a long confirmed copy must be able to
    # reach an estimate near 1 (a decay of d caps it near d), which long drafts need.
    stats_decay: float = 0.98
    stats_prior_weight: float = 4.0  # the priors' weight, in outcomes
    # Prior P(accepted) per agreement bucket of a fresh match (bucket 1 is never used).
    prior_fresh: tuple[float, ...] = (0.2, 0.2, 0.45, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.9, 0.95, 0.95, 0.97,
                                      0.97, 0.97)
    # Keep the openings' statistics and the named hazard from call to call: a user's edits
    # resemble each other. Fresh matches are relearnt for each prompt.
    keep_copy_stats: bool = True
    # Trust an edit that turns one name the instruction quotes into another from its first
    # sight (`pyaccel.methods.lookup.named`).
    quoted_edits: bool = True
    # Weigh a draft entering an occurrence of a quoted name the output is likely to change
    # by a learnt P(accepted there), from named_prior, until an edit of the name is seen.
    named_hazard: bool = True
    named_prior: float = 0.3
    # Track a copy that begins where a fenced code block of the prompt begins apart
    # (`CopyFollower.relation`: OPENING), from prior_opening: how far a user's answers copy
    # the block from its first line.
    block_openings: bool = True
    prior_opening: tuple[float, ...] = prior_fresh
    # A learnt edit drafts once it has been seen this often (`CopyFollower`).
    min_seen: int = 2

    def validate(self) -> None:
        if not 0.0 <= self.named_prior <= 1.0:
            raise ValueError(f"lookup named_prior must be in [0, 1], got {self.named_prior}")
        if not 0.0 < self.stats_decay <= 1.0:
            raise ValueError(f"lookup stats_decay must be in (0, 1], got {self.stats_decay}")
        if self.stats_prior_weight <= 0 or self.min_seen < 1:
            raise ValueError(f"lookup stats_prior_weight must be > 0 and min_seen >= 1, got "
                             f"{self.stats_prior_weight}, {self.min_seen}")
        for name in ("prior_fresh", "prior_opening"):
            prior = getattr(self, name)
            if len(prior) != N_BUCKETS or not all(0.0 <= a <= 1.0 for a in prior):
                raise ValueError(f"lookup {name} must hold {N_BUCKETS} probabilities, got {prior}")
