"""pyaccel's C++ core: sampling transforms, draft-tree layout and verification.

Conventions (csrc/verify.h, csrc/tree.h have the full contract):

- A draft is a tree of n nodes under an implicit root, the last committed token.
  ``parents[i]`` is -1 (child of the root) or an earlier node index; a chain is
  ``[-1, 0, 1, ..., n-2]``; n = 0 is plain decoding.
- ``target_logits`` row 0 holds the target's logits after the root, row i + 1
  those after node i: shape (n + 1, n_vocab), C-contiguous float32, read in
  place (never copied). ``draft_probs`` is aligned the same way: row j + 1 is
  the draft distribution q from which node j's children were drawn, siblings
  without replacement. None means a deterministic draft (q one-hot per child).
- The sampler chain is llama-cpp-python's default order:
  top_k -> top_p -> min_p -> temperature; temperature 0 is greedy.

Caller mistakes raise ValueError with a message that says what to do.
"""

import os
from typing import Optional, Sequence, Union, overload

import numpy as np
import numpy.typing as npt

_Float32Array = npt.NDArray[np.float32]
_IntArrayLike = Union[npt.NDArray[np.integer], Sequence[int]]

class Rng:
    """Seeded xoshiro256** generator owned by the caller; not thread-safe."""

    def __init__(self, seed: int) -> None:
        """Any Python int; reduced mod 2**64."""
    def uniform(self) -> float:
        """Uniform float in [0, 1)."""
    def get_state(self) -> bytes:
        """32 bytes that set_state() restores exactly."""
    def set_state(self, state: bytes) -> None: ...
    def __getstate__(self) -> bytes: ...
    def __setstate__(self, state: bytes) -> None: ...

class SamplingParams:
    """top_k -> top_p -> min_p -> temperature; setters validate like __init__."""

    temperature: float  # >= 0, 0 = greedy
    top_k: int  # >= 0, 0 = off
    top_p: float  # in (0, 1], 1 = off
    min_p: float  # in [0, 1], 0 = off
    def __init__(
        self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0
    ) -> None: ...

class TypicalParams:
    """Typical acceptance (lossy, opt-in, Medusa): x is acceptable if
    p(x) > min(epsilon, delta * exp(-H(p)))."""

    epsilon: float  # in [0, 1]
    delta: float  # >= 0
    def __init__(self, epsilon: float = 0.09, delta: float = 0.3) -> None: ...

class TreeLayout:
    """How a draft tree maps onto one llama.cpp batch: path k = sequence id k."""

    @property
    def n_nodes(self) -> int: ...
    @property
    def depth(self) -> npt.NDArray[np.int32]:
        """Depth of each node; children of the root have depth 1."""
    @property
    def paths(self) -> list[list[int]]:
        """One root-to-leaf list of node indices per leaf, by leaf index; [[]] when n = 0."""
    @property
    def node_seqs(self) -> list[list[int]]:
        """Ascending ids of the paths through each node (its sequence ids)."""
    @property
    def n_paths(self) -> int: ...

class VerifyResult:
    @property
    def accepted(self) -> list[int]:
        """Node indices along the kept root-to-leaf path, in order."""
    @property
    def next_token(self) -> int:
        """Token emitted after the last accepted node (bonus or correction)."""
    @property
    def path(self) -> int:
        """Lowest index in TreeLayout.paths of a path containing every accepted node."""

def argmax(logits: _Float32Array) -> int:
    """Lowest token id among the largest logits."""

def probs(logits: _Float32Array, params: SamplingParams) -> _Float32Array:
    """The transformed distribution: exactly 0 outside the kept set, sums to 1."""

def sample(logits: _Float32Array, params: SamplingParams, rng: Rng) -> int:
    """argmax when temperature == 0 (rng untouched); else one draw from probs()."""

def sample_probs(p: _Float32Array, rng: Rng) -> int:
    """One draw from a normalised distribution (sum within 1e-3 of 1)."""

def tree_layout(parents: _IntArrayLike) -> TreeLayout: ...
def tree_depths(parents: _IntArrayLike) -> npt.NDArray[np.int32]: ...
def tree_path_products(parents: _IntArrayLike, factor: npt.ArrayLike) -> npt.NDArray[np.float64]: ...
def tree_chain_length(parents: _IntArrayLike) -> int: ...
def tree_flagged_products(
    parents: _IntArrayLike, positions: npt.ArrayLike, probs: npt.ArrayLike, flags: npt.NDArray[np.bool_], h: float,
    n_chain: int
) -> Optional[tuple[npt.NDArray[np.float64], list[int]]]:
    """Node j is flagged when 0 <= positions[j] < len(flags) and flags[positions[j]]:
    (probs[i] times h once per flagged node on i's root path, i included; the flagged
    nodes among 0 .. n_chain - 1), or None when no node is flagged."""

def tree_merge(
    candidates: Sequence[tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, int, bool]], n_sources: int,
    max_leaves: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64], npt.NDArray[np.int32],
           npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Candidate trees (tokens, parents, probs, source, learnt), placed in the order given,
    merged into one prefix tree of at most max(0, max_leaves) root-to-leaf paths: (tokens,
    parents, probs (each node's largest estimate), owner (the first source to give it),
    held[node, source] (-1: not there), held_learnt[node, source])."""

def tree_cap_siblings(parents: _IntArrayLike, probs: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """probs with each node's children summing to at most the node's (the root's 1): the
    likeliest sibling keeps its value, each next one what its elders left, a cut node's
    subtree scaled with it."""

def calibrate(probs: npt.ArrayLike, rows: _IntArrayLike, keep: npt.ArrayLike, table: npt.NDArray[np.float64],
              edges: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Estimates rescaled by a calibration table (rows x bands): probs[i] where keep[i], else
    min(1, probs[i] * table[rows[i], band]), band = the number of edges <= probs[i]."""

def calibrate_tree(path_probs: npt.ArrayLike, parents: _IntArrayLike, owner: _IntArrayLike, learnt: npt.ArrayLike,
                   source_rows: _IntArrayLike, table: npt.NDArray[np.float64],
                   edges: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A merged tree's estimates rescaled as by `calibrate` (node i in row
    source_rows[owner[i]], unless learnt[i]); then no node above its parent and siblings
    within their parent (`tree_cap_siblings`)."""

def calibration_record(predicted: npt.NDArray[np.float64], accepted: npt.NDArray[np.float64], edges: npt.ArrayLike,
                       path_probs: npt.ArrayLike, held: npt.ArrayLike, held_learnt: npt.ArrayLike,
                       source_rows: _IntArrayLike, verified: _IntArrayLike, accepted_nodes: _IntArrayLike,
                       scale: float) -> None:
    """Verified tree nodes added in place to the record (rows x bands, C-contiguous float64):
    per verified node and source s holding a non-learnt estimate, min(held, path_prob) / scale
    to predicted[source_rows[s], band] and, where the node is accepted, 1 / scale to
    accepted there."""

def verify_tree(
    target_logits: _Float32Array,
    tokens: _IntArrayLike,
    parents: _IntArrayLike,
    params: SamplingParams,
    rng: Rng,
    draft_probs: Optional[_Float32Array] = None,
    typical: Optional[TypicalParams] = None,
) -> VerifyResult:
    """Greedy (temperature 0), lossless multi-draft rejection sampling, or typical
    acceptance when ``typical`` is given. Only rows on the way are read."""

# ---- other modules: n-gram drafting and the cost model (csrc/ngram.h, csrc/cost.h) ----

_FloatArrayLike = Union[npt.NDArray[np.floating], Sequence[float]]

class DraftTree:
    """A draft tree: node i holds tokens[i] under parents[i] (-1 = the root, the last
    committed token; parents[i] < i). Best branch first; counts[i] = earlier occurrences
    supporting the path to node i; contexts[i] = the longest context agreement among them
    (tokens ending at the occurrence equal to the stream's last tokens, up to the cap);
    sources[i] = where the best-ranked of them ends."""

    @property
    def tokens(self) -> npt.NDArray[np.int32]: ...
    @property
    def parents(self) -> npt.NDArray[np.int32]: ...
    @property
    def counts(self) -> npt.NDArray[np.int32]: ...
    @property
    def contexts(self) -> npt.NDArray[np.int32]: ...
    @property
    def sources(self) -> npt.NDArray[np.int32]:
        """End position of node i's best-ranked supporting occurrence (agreement, then recency)."""
    @property
    def match_len(self) -> int: ...
    @property
    def n_occurrences(self) -> int: ...
    def __len__(self) -> int: ...

def agreement_bucket(k: int, n_buckets: int) -> int:
    """Bucket of context agreement k (half-octaves: 1, 2, 3, 4-5, 6-7, 8-11, ...):
    min(n_buckets - 1, floor(2 log2 max(k, 1)))."""

def agreement_buckets(ks: _IntArrayLike, n_buckets: int) -> npt.NDArray[np.int32]:
    """agreement_bucket of each k."""

def lookup_path_probs(tree: DraftTree, hazard: Sequence[float]) -> npt.NDArray[np.float64]:
    """P(node accepted) per node: P(parent) * c(node). A parent's first child (in node
    order) has c = hazard[agreement_bucket(contexts[i] + depth(i), len(hazard))]; every
    other child shares 1 - that by its count over all the parent's children's counts."""

def lookup_chain(
    tree: DraftTree, n_buckets: int
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], list[int], list[int], npt.NDArray[np.int64],
           Optional[tuple[int, int, int, int]]]:
    """(tokens, parents, chain, buckets, positions, ends) of a lookup tree in one call.
    chain: the first branch's n tokens (nodes 0 .. n - 1, each the child of the one
    before); buckets[i] = agreement_bucket(contexts[i] + i, n_buckets) for chain node i;
    positions[j] = sources[j] + depth(j) (root children depth 1) for every node, the
    stream index it copies; ends = (sources[0], sources[n - 1], contexts[0],
    contexts[n - 1]), None when n == 0."""

class NgramIndex:
    """Prompt-lookup index over one token stream (prompt + output); not thread-safe."""

    def __init__(self, n_min: int = 1, n_max: int = 4) -> None: ...
    def append(self, tokens: _IntArrayLike) -> None: ...
    def truncate(self, n: int) -> None: ...
    def lookup(self, n_min: int, n_max: int, max_len: int, max_candidates: int = 1,
               context_cap: int = 0) -> DraftTree:
        """Continuations of the longest suffix (n_max down to n_min) seen before, merged
        into a tree of at most max_candidates branches ranked by context agreement
        (counted up to max(n, context_cap)), then count, then recency."""
    def chain(self, n_min: int, n_max: int, max_len: int, context_cap: int = 0) -> DraftTree: ...
    def tokens(self) -> npt.NDArray[np.int32]: ...
    def size(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def n_min(self) -> int: ...
    @property
    def n_max(self) -> int: ...

class NgramCache:
    """n-gram (n_min..n_max <= 4 tokens) -> next-token counts; not thread-safe."""

    def __init__(self, n_min: int = 1, n_max: int = 4) -> None: ...
    def update(self, tokens: _IntArrayLike, start: int = 0) -> None:
        """Counts every (tokens[i-n:i] -> tokens[i]) with i >= start: pass the grown stream
        and its previous length."""
    def merge(self, other: NgramCache) -> None:
        """Adds other's counts (same n range). A vocab of 0 adopts other's; two different
        nonzero vocabs raise ValueError and leave this cache unchanged."""
    def save(self, path: Union[str, os.PathLike[str]]) -> None: ...
    @staticmethod
    def load(path: Union[str, os.PathLike[str]]) -> NgramCache:
        """ValueError naming the file when it is missing, truncated or corrupted. vocab is
        read back as saved (0 from files saved before it was recorded)."""
    def counts(self, ngram: _IntArrayLike) -> dict[int, int]: ...
    def __len__(self) -> int: ...
    @property
    def n_min(self) -> int: ...
    @property
    def n_max(self) -> int: ...
    vocab: int
    """Fingerprint (u32) of the tokenizer whose ids this cache counts, saved with it; 0 = unknown."""

class NgramDraftThresholds:
    """Minimum evidence per n (list index n - 1) before a cache drafts; llama.cpp's defaults."""

    context_min_samples: list[int]
    context_min_percent: list[int]
    dynamic_min_samples: list[int]
    dynamic_min_percent: list[int]
    static_n: int
    static_min_samples: int
    static_min_percent: int
    static_weight: int
    def __init__(
        self,
        context_min_samples: Sequence[int] = ...,
        context_min_percent: Sequence[int] = ...,
        dynamic_min_samples: Sequence[int] = ...,
        dynamic_min_percent: Sequence[int] = ...,
        static_n: int = 2,
        static_min_samples: int = 2,
        static_min_percent: int = 50,
        static_weight: int = 100,
    ) -> None: ...

def ngram_cache_draft(
    context_tokens: _IntArrayLike,
    context_cache: NgramCache,
    dynamic_cache: NgramCache,
    static_cache: Optional[NgramCache],
    n_draft: int,
    thresholds: Optional[NgramDraftThresholds] = None,
) -> npt.NDArray[np.int32]:
    """A chain of up to n_draft tokens: context cache, else dynamic, else static."""

class CostCurve:
    """Measured relative time of one target decode of b = 1..B tokens."""

    def __init__(self, times: _FloatArrayLike) -> None: ...
    @staticmethod
    def from_points(sizes: Sequence[int], times: Sequence[float]) -> CostCurve: ...
    def cost_at(self, b: int) -> float: ...
    def efficient_sizes(self, max_b: int) -> list[int]:
        """Sizes b <= max_b that cost strictly less than every larger size up to max_b."""
    @property
    def measured(self) -> int: ...
    @property
    def times(self) -> npt.NDArray[np.float64]: ...

class ChainPlan:
    @property
    def best_len(self) -> int: ...
    @property
    def expected_tokens(self) -> float: ...
    @property
    def expected_cost(self) -> float: ...
    @property
    def expected_speedup(self) -> float: ...

def chain_plan(
    curve: CostCurve,
    alpha: _FloatArrayLike,
    draft_cost_per_token: float = 0.0,
    max_len: Optional[int] = None,
) -> ChainPlan:
    """argmax over k of E(k) / (t[k+1] + k * draft_cost_per_token * t[1]) * t[1]; alpha[i]
    = P(draft token i+1 accepted | the ones before accepted); max_len defaults to len(alpha)."""

class TreePlan:
    @property
    def nodes(self) -> npt.NDArray[np.int32]: ...
    @property
    def parents(self) -> npt.NDArray[np.int32]: ...
    @property
    def expected_tokens(self) -> float: ...
    @property
    def expected_cost(self) -> float: ...
    @property
    def expected_speedup(self) -> float: ...

def tree_plan(
    curve: CostCurve,
    path_prob: _FloatArrayLike,
    parents: _IntArrayLike,
    max_nodes: Optional[int] = None,
) -> TreePlan:
    """Best prefix-closed subset by (1 + sum of path probabilities) / t[m+1]."""

class AcceptanceStats:
    """Per-position conditional acceptance, exponentially decayed, with a prior."""

    @overload
    def __init__(
        self,
        n_positions: int,
        decay: float = 0.95,
        prior_alpha: float = 0.5,
        prior_weight: float = 2.0,
    ) -> None:
        """decay in (0, 1], applied per new sample of a position; the prior counts as
        prior_weight samples of rate prior_alpha."""
    @overload
    def __init__(self, prior_alphas: Sequence[float], decay: float = 0.95, prior_weight: float = 2.0) -> None:
        """One prior rate per position (len(prior_alphas) positions)."""
    def observe(self, n_drafted: int, n_accepted: int) -> None: ...
    def observe_position(self, position: int, accepted: bool) -> None: ...
    def alpha(self) -> npt.NDArray[np.float64]: ...
    def alpha_at(self, position: int) -> float:
        """alpha()[position] alone (0 <= position < n_positions)."""
    @property
    def n_positions(self) -> int: ...

# ---- lookahead decoding (csrc/lookahead.h has the window layout) ----

class NgramPool:
    """n-grams of exactly n tokens keyed by their first token, at most max_per_key per key;
    a full key drops its least recently useful n-gram (added or refreshed longest ago)."""

    def __init__(self, n: int, max_per_key: int) -> None: ...
    def add(self, ngram: _IntArrayLike) -> bool:
        """True when the n-gram was not held before (either way it becomes the most recent)."""
    def add_stream(self, tokens: _IntArrayLike) -> None:
        """Every n-gram of tokens, in stream order."""
    def continuations(self, key: int, limit: int) -> list[list[int]]:
        """Up to limit continuations (n - 1 tokens) of key, most recently useful first."""
    def refresh(self, key: int, prefix: _IntArrayLike) -> None:
        """Mark the n-grams under key whose continuation starts with prefix as useful."""
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def max_per_key(self) -> int: ...
    @property
    def n_keys(self) -> int: ...

class JacobiWindow:
    """W columns x (N - 1) Jacobi levels of guesses ahead of the pending root."""

    def __init__(self, width: int, ngram: int) -> None: ...
    @property
    def width(self) -> int: ...
    @property
    def ngram(self) -> int: ...
    @property
    def n_tokens(self) -> int:
        """Cells evaluated per pass: (W - 1) + W (N - 2)."""
    def reset(self, fill: _IntArrayLike) -> None: ...
    def set_root(self, root: int) -> None: ...
    def tokens(self) -> npt.NDArray[np.int32]: ...
    def offsets(self) -> npt.NDArray[np.int32]: ...
    def seqs(self) -> list[list[int]]: ...
    def output_rows(self) -> npt.NDArray[np.int32]: ...
    def advance(self, next: _IntArrayLike, committed: int, fill: _IntArrayLike,
                pool: Optional[NgramPool]) -> None:
        """Pool each column's n-gram, shift the levels up (next = the newest) and the columns
        left by committed - 1, refilling freed cells from fill."""
    def cells(self) -> list[list[int]]: ...


def silent_log_callback() -> int:
    """Address of a C log callback (ggml_log_callback) that drops every message, for llama_log_set."""
