"""Plain data shared by the API, the decode loop and the proposers.

The objects one decode step passes between the loop and a proposer:

    Draft        what the proposer asks the target to evaluate: verified nodes (a tree
                 under the pending root) and optional auxiliary, unverified tokens
    StepOutcome  what the pass decided (kept nodes, next token) and views of the rows
                 it produced (logits, hidden states), handed to `Proposer.observe`
    StepTrace    what the step did and took, handed to a Generator's `trace` callback

The batch layout of a step is drawn in `pyaccel.decode`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import numpy.typing as npt

from . import defaults

if TYPE_CHECKING:
    from . import _core


# The largest top_k the sampler takes (a C int; any k >= the vocabulary keeps every token).
MAX_TOP_K = 2**31 - 1


def as_float32(value: float) -> float:
    """`value` as the sampler (32-bit floats) holds it: 1e39 is inf there, 1e-50 is 0."""
    try:
        wide = float(value)
    except OverflowError:  # an int beyond any float
        return math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore"):
        return float(np.float32(wide))


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are chosen. temperature 0 is greedy; 0 / 1.0 / 0.0 switch top-k / top-p / min-p off.
    The sampler works in 32-bit floats: a value is checked as it is there (top_p=1e-50 is 0)."""

    temperature: float = defaults.TEMPERATURE
    top_k: int = defaults.TOP_K
    top_p: float = defaults.TOP_P
    min_p: float = defaults.MIN_P
    seed: int | None = None

    def validate(self) -> None:
        for name in ("temperature", "top_p", "min_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
        for name in ("top_k", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        temperature, top_p, min_p = (as_float32(v) for v in (self.temperature, self.top_p, self.min_p))
        if not (temperature >= 0.0 and math.isfinite(temperature)):
            raise ValueError(f"temperature must be >= 0 and finite as a 32-bit float (0 means greedy), got "
                             f"{self.temperature}")
        if self.seed is not None and not -1 <= self.seed < 2**64:
            raise ValueError(f"seed must be in [0, 2**64) (-1 or None: a random seed), got {self.seed}")
        if not 0 <= self.top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be in [0, {MAX_TOP_K}] (0 switches it off), got {self.top_k}")
        if not (0.0 < top_p <= 1.0 and 0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (1 switches it off), got {self.top_p}"
                             + (" (0 as a 32-bit float)" if top_p == 0.0 and self.top_p > 0 else ""))
        if not (0.0 <= min_p <= 1.0 and 0.0 <= self.min_p <= 1.0):
            raise ValueError(f"min_p must be in [0, 1] (0 switches it off), got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class AuxTokens:
    """Unverified tokens evaluated in the same pass as a draft, for the proposer's own use
    (e.g. a Jacobi window): their logits rows come back in `StepOutcome.aux_logits` and
    their cache cells are dropped after the step; they never enter verification.

    offsets[i] >= 1: position of token i relative to the pending root (root + offsets[i]).
    seqs[i]: the auxiliary sequences token i belongs to, numbered 0..n_seqs - 1. Each
      auxiliary sequence sees the committed context and the root; token i sees the
      earlier tokens of its sequences at lower positions (the attention pattern is
      expressed only through these ids).
    outputs: which tokens' logits rows the proposer reads (None: all). A row costs a
      vocabulary-sized projection, so a proposer asks only for the rows it uses.
    """

    tokens: npt.NDArray[np.int32]
    offsets: npt.NDArray[np.int32]
    seqs: tuple[tuple[int, ...], ...]
    outputs: npt.NDArray[np.bool_] | None = None

    @staticmethod
    def make(tokens: Sequence[int], offsets: Sequence[int], seqs: Sequence[Sequence[int]],
             outputs: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> "AuxTokens":
        return AuxTokens(np.asarray(tokens, dtype=np.int32), np.asarray(offsets, dtype=np.int32),
                         tuple(tuple(int(s) for s in ids) for ids in seqs),
                         None if outputs is None else np.asarray(outputs, dtype=bool))

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_seqs(self) -> int:
        return 1 + max((max(ids) for ids in self.seqs if ids), default=-1)


@dataclass(frozen=True)
class Draft:
    """Proposed tokens as a tree under the pending root token (a chain has parents i - 1).

    q: optional draft distributions [n + 1, n_vocab]; row 0 at the root, row j + 1 at node j
      (the distribution node j's children were drawn from). None: deterministic proposals.
    layout: `_core.tree_layout(parents)` computed once by a proposer whose tree shape is
      static, so the loop does not rebuild it every step (None: the loop computes it).
    aux: auxiliary, unverified tokens for the same pass (see `AuxTokens`).
    """

    tokens: npt.NDArray[np.int32]
    parents: npt.NDArray[np.int32]
    q: npt.NDArray[np.float32] | None = None
    layout: "_core.TreeLayout | None" = None
    aux: AuxTokens | None = None

    @staticmethod
    def empty() -> "Draft":
        return Draft(np.zeros(0, np.int32), np.zeros(0, np.int32))

    @staticmethod
    def chain(tokens: Sequence[int] | npt.NDArray[np.int32], q: npt.NDArray[np.float32] | None = None) -> "Draft":
        tok = np.asarray(tokens, dtype=np.int32)
        return Draft(tok, np.arange(-1, len(tok) - 1, dtype=np.int32), q)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@dataclass(frozen=True)
class StepOutcome:
    """One decode step as the proposer sees it in `observe`.

    accepted: node ids of the draft kept, root to tip; next_token: the token emitted after
    them (the next pending root). logits / hidden: views of the pass's rows in batch order:
    the root, the draft nodes, the auxiliary tokens (those with outputs, see `aux_logits`).
    hidden is None unless the Model was created with embeddings=True. The views point into
    llama.cpp's buffers and are valid only until `observe` returns: copy what you keep.
    """

    draft: Draft
    accepted: Sequence[int]
    next_token: int
    n_past: int  # cached tokens before the root (the root's position)
    logits: npt.NDArray[np.float32]
    hidden: npt.NDArray[np.float32] | None = None

    @property
    def accepted_tokens(self) -> list[int]:
        return [int(self.draft.tokens[i]) for i in self.accepted]

    @property
    def tip_row(self) -> int:
        """Row of the last kept node (0: the root, when nothing was accepted)."""
        return 1 + int(self.accepted[-1]) if len(self.accepted) else 0

    @property
    def aux_logits(self) -> npt.NDArray[np.float32]:
        """Rows of the auxiliary tokens that asked for outputs (`AuxTokens.outputs`), in order."""
        return self._aux_rows(self.logits)

    @property
    def aux_hidden(self) -> npt.NDArray[np.float32] | None:
        return None if self.hidden is None else self._aux_rows(self.hidden)

    def _aux_rows(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        rest = rows[1 + len(self.draft):]
        aux = self.draft.aux
        if aux is not None and aux.outputs is not None and len(rest) == len(aux) != int(aux.outputs.sum()):
            return rest[aux.outputs]  # every row came back (embeddings=True): pick the asked ones
        return rest

    @property
    def tip_hidden(self) -> npt.NDArray[np.float32] | None:
        """The target's final hidden state at the last kept node (what Medusa heads read)."""
        return None if self.hidden is None else self.hidden[self.tip_row]


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    new_tokens: int = 0
    decoded_tokens: int = 0  # tokens committed by decode steps (after the prefill's first token)
    target_forwards: int = 0
    drafted: int = 0
    accepted: int = 0  # draft tokens verification kept that are in the output (not past a stop)
    drafted_per_position: list[int] = field(default_factory=list)
    accepted_per_position: list[int] = field(default_factory=list)
    # Accepted draft tokens by the proposer whose candidate they were (auto mixes several).
    accepted_by: dict[str, int] = field(default_factory=dict)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    target_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0

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
        """Decode speed: the tokens of the decode steps over their time (the first token
        comes from the prefill, in prefill_s); 0.0 when no step ran."""
        return self.decoded_tokens / self.decode_s if self.decoded_tokens and self.decode_s > 0 else 0.0

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


# Result.finish_reason of a generation whose `cancel` event was set.
CANCELLED = "cancelled"


@dataclass(frozen=True)
class StepTrace:
    """One decode step, as the loop hands it to a `Generator(..., trace=callback)`.

    The prefill (which gives the first token) is no step. Times are wall seconds of this
    step alone; whatever `step_s` holds beyond `propose_s`, `target_s` and `verify_s` is the
    proposer's feedback (`observe`) and the commit to the cache.
    """

    index: int  # steps before this one in the generation
    depth: int  # tokens in the target's cache before the pass (the pending root excluded)
    batch: int  # tokens in the pass: the root, the draft nodes and any auxiliary tokens
    drafted: int  # draft nodes the proposer gave for verification
    accepted: int  # of those, kept tokens that reached the output (as `Stats.accepted` counts)
    # Tokens this step committed: the accepted and the target's own; an end-of-generation
    # token counts (as in `Stats.decoded_tokens`) though it is not in `Result.tokens`.
    committed: int
    tokens: tuple[int, ...]  # those tokens
    propose_s: float  # in the proposer's `propose`
    target_s: float  # in the target's forward pass (llama_decode)
    verify_s: float  # verifying the draft against the target's logits
    step_s: float  # the whole step: the above, feedback to the proposer, the cache commit


@dataclass
class Result:
    """One answer. `text` is what was streamed: it ends before a matched stop string.
    `tokens` are every token the model committed, a matched stop string's included (the
    string may begin or end inside a token), never the end-of-generation token."""

    text: str
    tokens: list[int]
    finish_reason: str  # "stop" (EOS or a stop string), "length" (max_tokens or context full), "cancelled"
    stats: Stats

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": self.tokens, "finish_reason": self.finish_reason,
                "stats": self.stats.to_dict()}
