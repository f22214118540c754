"""The proposer contract: what the decode loop and the front-ends call on a method.

Lifecycle, in order (each call is made by `pyaccel.Generator` / the decode loop):

    bind(target)            once, when a Generator is built over `target` (a Model):
                            load what the method needs (a draft model, caches), read
                            the target's cost model
    begin(prompt, sampling) a generation starts; the prompt is already in the target
      propose(tokens, budget) -> Draft     before every target pass
      observe(outcome)                     after its verification (a `StepOutcome`)
    end()                   the generation is over (also after an error or an
                            abandoned stream)
    reset()                 forget cached per-model state (KV caches) so that the next
                            generation pays what a fresh one pays (the bench calls it)
    close()                 release resources (models the method opened itself)

`counters` is a read-only view of per-method statistics for reports and the bench.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from ..types import Draft, SamplingConfig, StepOutcome

if TYPE_CHECKING:
    from .. import _core
    from ..model import Model


class Proposer:
    """Base class of every decoding method; every hook but `propose` defaults to nothing."""

    name: str = "custom"
    # How the loop verifies this method's drafts: None is exact (greedy, or lossless
    # rejection sampling); a method may opt into typical acceptance, which is NOT lossless
    # when sampling (Medusa's `typical` option).
    typical: "_core.TypicalParams | None" = None

    def bind(self, target: "Model") -> None:
        """Attach to the target model (called once, by the Generator)."""

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        """A new generation starts from `prompt` (all its tokens are already in the target).
        It is called right after the prefill, so the target backend's last rows
        (`logits_rows()[-1]`, and with embeddings=True `embeddings_rows()[-1]`) are the
        prompt's last token's until the first step."""

    def propose(self, tokens: list[int], budget: int) -> Draft:
        """Draft continuations of `tokens` (prompt + everything emitted, the last one not yet
        evaluated by the target); at most `budget` verified nodes. Auxiliary tokens may
        add up to what the batch and the context hold after the root, at most
        min(n_ctx - len(tokens), max_batch - 1) tokens in all."""
        raise NotImplementedError(f"{type(self).__name__} must implement propose(tokens, budget)")

    def observe(self, outcome: StepOutcome) -> None:
        """Feedback after verification: kept nodes, next token, the pass's rows."""

    def end(self) -> None:
        """The generation is over."""

    def reset(self) -> None:
        """Forget cached per-model state so the next generation starts cold."""

    def close(self) -> None:
        """Release what the method opened itself."""

    @property
    def counters(self) -> Mapping[str, float]:
        """Per-method statistics (read-only)."""
        return MappingProxyType(self._counters())

    def _counters(self) -> dict[str, float]:
        return {}


class NoDraft(Proposer):
    """Plain decoding: proposes nothing, so every step is one token."""

    name = "plain"

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return Draft.empty()
