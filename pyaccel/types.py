"""Plain data shared by the API, the decode loop and the proposers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

# Every generation default lives here.
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are chosen. temperature 0 is greedy; 0 / 1.0 / 0.0 switch top-k / top-p / min-p off."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def validate(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 switches it off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1 switches it off), got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1] (0 switches it off), got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class Draft:
    """Proposed tokens as a tree under the pending root token (a chain has parents i - 1).

    q: optional draft distributions [n + 1, n_vocab]; row 0 at the root, row j + 1 at node j
    (the distribution node j's children were drawn from). None: deterministic proposals.
    """

    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    q: npt.NDArray[np.float32] | None = None

    @staticmethod
    def empty() -> "Draft":
        return Draft(np.zeros(0, np.int32), np.zeros(0, np.int32))

    @staticmethod
    def chain(tokens: list[int] | npt.NDArray[np.int32], q: npt.NDArray[np.float32] | None = None) -> "Draft":
        tok = np.asarray(tokens, dtype=np.int32)
        return Draft(tok, np.arange(-1, len(tok) - 1, dtype=np.int32), q)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


class Proposer(Protocol):
    """A drafting method. The decode loop calls `propose` before every target pass and
    `observe` after its verification."""

    name: str

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        """A new generation starts from `prompt` (all its tokens are already in the target)."""

    def propose(self, tokens: list[int], budget: int) -> Draft:
        """Draft continuations of `tokens` (prompt + everything emitted, the last one not yet
        evaluated by the target); at most `budget` nodes."""

    def observe(self, draft: Draft, accepted: list[int], next_token: int) -> None:
        """Feedback: node indices of `draft` that were kept, and the token emitted after them."""

    def end(self) -> None:
        """The generation is over."""


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    new_tokens: int = 0
    decoded_tokens: int = 0  # tokens committed by decode steps (after the prefill's first token)
    target_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    drafted_per_position: list[int] = field(default_factory=list)
    accepted_per_position: list[int] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    target_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    predicted_speedup: float | None = None

    @property
    def tau(self) -> float:
        """Mean tokens committed per target forward pass after the prefill (plain decoding: 1)."""
        return self.decoded_tokens / self.target_forwards if self.target_forwards else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def acceptance_per_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_per_position, self.drafted_per_position)]

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def overhead_s(self) -> float:
        """Decode-phase wall time outside the target's llama_decode and the drafting."""
        return max(0.0, self.decode_s - self.target_s - self.draft_s)

    def record_draft(self, n_drafted_by_depth: list[int], n_accepted: int) -> None:
        for depth, n in enumerate(n_drafted_by_depth):
            if depth >= len(self.drafted_per_position):
                self.drafted_per_position.append(0)
                self.accepted_per_position.append(0)
            self.drafted_per_position[depth] += 1 if n else 0
            if depth < n_accepted:
                self.accepted_per_position[depth] += 1
        self.drafted += sum(n_drafted_by_depth)
        self.accepted += n_accepted

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            tau=self.tau,
            acceptance_rate=self.acceptance_rate,
            acceptance_per_position=self.acceptance_per_position,
            tokens_per_s=self.tokens_per_s,
            overhead_s=self.overhead_s,
        )
        return out


@dataclass
class Result:
    text: str
    tokens: list[int]
    finish_reason: str  # "stop" (EOS or a stop string), "length" (max_tokens or context full)
    stats: Stats

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": self.tokens, "finish_reason": self.finish_reason,
                "stats": self.stats.to_dict()}
