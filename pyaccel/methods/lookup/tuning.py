"""The knobs of prompt lookup (`LookupTuning`) and the buckets of context agreement its
acceptance statistics are kept in."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import _core
from .rewrites import FollowerTuning


def agreement_bucket(k: int) -> int:
    """Acceptance is tracked per bucket of context agreement k >= 1 (half-octaves:
    1, 2, 3, 4-5, 6-7, 8-11, 12-15, 16-22, ...): a token after k agreeing tokens."""
    return _core.agreement_bucket(k, N_BUCKETS)


def agreement_buckets(ks: np.ndarray) -> np.ndarray:
    """`agreement_bucket` of each k."""
    return _core.agreement_buckets(ks, N_BUCKETS)


N_BUCKETS = 2 * 7 + 1  # up to k = 128 = the context cap + the deepest draft


@dataclass(frozen=True)
class LookupTuning:
    """The knobs of prompt lookup, with the values measured best on this project's suites."""

    # A copy runs for hundreds of tokens with acceptance near 1; a decay of 0.95 caps the
    # estimate near 0.955, which would cap drafts at ~15 tokens. 0.98 remembers ~50
    # outcomes per bucket and lets a long confirmed copy reach ~0.98 (drafts of ~31 on the
    # CPU curve).
    stats_decay: float = 0.98
    stats_prior_weight: float = 4.0
    # Context agreement is counted this far back: beyond it a copy is a copy.
    context_cap: int = 64
    # Prior acceptance per bucket, so the first steps of a generation draft sensibly:
    # rounded down from the rates measured on the shipped edit and code suites and on
    # Spec-Bench (writing, roleplay, math, summarisation, RAG): ~0.2 after 1 agreeing
    # token, ~0.6 after 3, ~0.8 after 8, and >= 0.95 once 32 tokens agree (bucket 1 is
    # never used).
    prior_fresh: tuple[float, ...] = (0.2, 0.2, 0.45, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.9, 0.95, 0.95, 0.97,
                                      0.97, 0.97)
    # Matches are tracked apart by how they stand to the copy the output follows
    # (`CopyFollower.relation`), in buckets N_BUCKETS * relation + bucket: a copy resuming
    # where it left off is far likelier to go on than a chance repeat of a few tokens
    # elsewhere while the output is editing a copy.
    prior_in_line: tuple[float, ...] = (0.5, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.9, 0.95, 0.95, 0.97, 0.97, 0.99,
                                        0.99, 0.99)
    prior_away: tuple[float, ...] = prior_fresh
    # How copies behave while the output edits one carries over from call to call (a
    # user's edits resemble each other); fresh matches are relearnt for each prompt.
    keep_copy_stats: bool = True
    copy_stats_decay: float = 0.99
    # Carry the fresh-match statistics over too (they restart with every prompt otherwise).
    # Carried, they shorten the ramp at the start of each answer but draft longer at chance
    # matches later: on the AMD host's first 8 edit prompts lookup fell from 2.009x to
    # 1.946x and auto from 1.975x to 1.969x (modelled, docs/benchmarks.md). So off.
    keep_fresh_stats: bool = False
    # Names the instruction quotes (`pyaccel.methods.lookup.named`): an edit turning one
    # into another is trusted from its first sight (quoted_edits), and a draft entering an
    # occurrence of a name the output may change is accepted there with a learnt
    # probability of its own (named_hazard), kept from call to call: from named_prior
    # before the output has shown an edit of the name (it will most likely break there),
    # from named_prior_edited after (drafted with the edit applied; the output may still
    # keep the name at some occurrences). hazard_after_edit=False: none after.
    quoted_edits: bool = True
    # Once the output has turned one quoted name into another, every occurrence of the old
    # name is respelled in its context and re-tokenized, and drafted so: a name that
    # shares a token with the text around it (`(timer`, `orders_by`) changes its tokens
    # beyond the name's own, which no edit learnt from other occurrences would cover.
    respell_renames: bool = True
    named_hazard: bool = True
    named_prior: float = 0.3
    named_prior_edited: float = 0.8
    hazard_after_edit: bool = True
    # A copy that begins where a fenced code block of the prompt begins (the answer opens
    # its block as the prompt does and goes on from there) has acceptance statistics of its
    # own until it breaks or grows strong (`CopyFollower.relation`: OPENING), from
    # prior_opening and kept from call to call: they learn how far a user's answers copy
    # from their first line. On the AMD host's 20 edit prompts (modelled) auto took 3.5%
    # fewer passes with them (2,732 against 2,832 units), lookup 3.0%. Taken for in-line
    # copies instead, they raised the in-line statistics that then drafted long where type
    # hints break copies (hints-bisect 258 units against 205; docs/benchmarks.md).
    block_openings: bool = True
    prior_opening: tuple[float, ...] = prior_fresh
    # A node copying a prose boundary (`pyaccel.methods.lookup.boundaries`: punctuation
    # outside code blocks, or the token after it) takes a learnt probability of going on
    # there, one per relation, from boundary_prior and kept from call to call, as a factor
    # on its agreement hazard (whose buckets keep counting every position, boundaries
    # included, so a boundary is priced below its own rate: on the side of drafting less).
    # An answer copying prose goes its own way at a clause's end far more often than
    # inside it (0.49 against 0.88 on Spec-Bench, benchmarks/boundary_stats.py), inside
    # code no more often.
    # Scored into their own statistics instead of the buckets, the boundaries left word
    # estimates high where a restated question changes one term (math-112 0.934x against
    # 0.971x, modelled on the AMD host; docs/benchmarks.md).
    boundary_hazard: bool = True
    boundary_prior: float = 0.5
    # The same, with statistics of its own, at a node copying a comment line end (the line
    # break of a comment or docstring line inside a code block, or the token after it:
    # `pyaccel.methods.lookup.boundaries`). Code is copied line for line, but a rewritten
    # docstring or comment reuses the old phrases and wraps its lines elsewhere: on the AMD
    # host docstring-which (edit_extra) drafted 63 tokens there and kept 0-2 (0.918x plain,
    # modelled; docs/benchmarks.md).
    comment_hazard: bool = True
    comment_prior: float = 0.85
    follower: FollowerTuning = field(default_factory=FollowerTuning)

    def validate(self) -> None:
        for name in ("stats_decay", "copy_stats_decay"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"lookup {name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("named_prior", "named_prior_edited", "boundary_prior", "comment_prior"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"lookup {name} must be in [0, 1], got {getattr(self, name)}")
        if self.stats_prior_weight <= 0 or self.context_cap < 1:
            raise ValueError(f"lookup stats_prior_weight must be > 0 and context_cap >= 1, got "
                             f"{self.stats_prior_weight}, {self.context_cap}")
        for name in ("prior_fresh", "prior_in_line", "prior_away", "prior_opening"):
            prior = getattr(self, name)
            if len(prior) != N_BUCKETS or not all(0.0 <= a <= 1.0 for a in prior):
                raise ValueError(f"lookup {name} must hold {N_BUCKETS} probabilities, got {prior}")
        self.follower.validate()
