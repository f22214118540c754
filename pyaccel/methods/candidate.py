"""The public candidates API: what a proposer would draft this step, with its own
calibrated estimate of each node being accepted, so that `auto` can merge proposers.

A proposer that supports `auto` has `candidates(tokens, budget) -> list[Candidate]`, called
where `propose` would be (it advances the proposer's per-step state the same way; the
proposer learns from the committed tokens as it does under `propose`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from .. import _core

if TYPE_CHECKING:
    from ..model import Model
    from ..types import SamplingConfig, StepOutcome


@dataclass(frozen=True)
class Candidate:
    """A draft tree one proposer offers under the pending root.

    tokens[i] sits under parents[i] (-1: the root; parents[i] < i).
    path_probs[i]: P(node i is accepted), not conditional on its parent, so it never
      grows along a path, and siblings (exclusive continuations) sum to at most their
      parent's.
    source: the proposer's name; auto's counters credit accepted tokens to it.
    learnt: the estimates come from statistics the proposer keeps of how such drafts fared
      on every position, carried from call to call (prompt lookup's copy statistics), so
      auto takes them as they are: it neither rescales them nor learns from them.
    """

    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    path_probs: npt.NDArray[np.float64]
    source: str
    learnt: bool = False

    @staticmethod
    def chain(tokens: Sequence[int] | npt.NDArray[np.int32], probs: npt.ArrayLike, source: str) -> "Candidate":
        tok = np.asarray(tokens, dtype=np.int32)
        return Candidate(tok, np.arange(-1, len(tok) - 1, dtype=np.int32),
                         np.asarray(probs, dtype=np.float64)[: len(tok)], source)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def expected_tokens(self) -> float:
        """Tokens this tree is expected to add if all of it were verified."""
        return float(self.path_probs.sum())


def main_chain_length(parents: npt.NDArray[np.int32]) -> int:
    """Length of a draft tree's first branch: nodes 0, 1, ... while each is its
    predecessor's child (`parents` as in `Candidate`)."""
    return _core.tree_chain_length(parents)


class CandidateProposer(Protocol):
    """What `auto` calls on a proposer it combines: the `Proposer` lifecycle with
    `candidates` in place of `propose` (PromptLookup, NgramCacheDrafter and Lookahead are
    ones; `Auto(extra=[...])` takes more). `observe` gets each step's outcome with the
    committed tokens as a chain (`StepOutcome.accepted_tokens` + `next_token`), on the steps
    it was asked for candidates.

    Optional: `best_estimate() -> float`, the highest P(accepted) any node of its can carry
    at present (Lookahead has one). Where even that cannot pay, auto asks it only once every
    `AutoTuning.probe_every` steps."""

    name: str

    def bind(self, target: "Model") -> None: ...

    def begin(self, prompt: list[int], sampling: "SamplingConfig") -> None: ...

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]: ...

    def observe(self, outcome: "StepOutcome") -> None: ...

    def end(self) -> None: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...
