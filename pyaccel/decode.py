"""The one decode loop every method shares: propose -> evaluate -> verify -> commit.

One step, with the pending root r (sampled last step, not yet in the target's cache), a
draft tree of n nodes under it with P root-to-leaf paths, and m auxiliary tokens in S
auxiliary sequences, is a single llama_decode:

    batch   [ r | d0 d1 ... d(n-1) | a0 a1 ... a(m-1) ]
    pos     p + 0 | p + depth(d_i)  | p + offset(a_j)          p = n_past, r has depth 0
    seqs    r: 0..P-1 and P..P+S-1 (everything sees the root)
            d_i: the paths through node i (path k = sequence k)
            a_j: P + each auxiliary sequence of a_j
    logits  rows 0..n -> verify_tree -> kept nodes, next token x; those and the rows of
            the auxiliary tokens that ask for them (and hidden states) -> Proposer.observe

Before the decode, sequence 0 (the committed context) is copied to sequences 1..P+S-1
(in a unified KV cache a copy only tags cells). Commit keeps the winning path's cells
below p + 1 + accepted in sequence 0 and drops everything else, auxiliary cells
included; the accepted tokens and x are emitted, and x becomes the next root.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from . import _core
from .backend import LlamaBackend
from .errors import ContextOverflowError, ModelOutputError, PrefillCancelled, ProposerFailedWarning, PyaccelError
from .kvcache import TargetCache
from .stops import StopMatcher
from .types import CANCELLED, AuxTokens, Draft, Result, SamplingConfig, Stats, StepOutcome, StepTrace
from .vocab import Detokenizer

if TYPE_CHECKING:
    from .methods.base import Proposer

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    prompt: list[int]
    max_tokens: int
    sampling: SamplingConfig
    stop: Sequence[str] = ()
    # Reuse the cached prefix of earlier calls (False: prefill the whole prompt afresh).
    cache_prompt: bool = True
    # Set from any thread: the generation ends before its next prompt chunk or decode step.
    cancel: threading.Event | None = None


def sampling_params(s: SamplingConfig) -> _core.SamplingParams:
    return _core.SamplingParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p)


def new_rng(seed: int | None, salt: int = 0) -> _core.Rng:
    """A seeded generator (a fresh random seed when None); `salt` separates streams."""
    base = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
    return _core.Rng(base ^ salt)


class _Emitter:
    """Turns committed tokens into text, watching EOS, stop strings and max_tokens."""

    def __init__(self, backend: LlamaBackend, req: Request) -> None:
        self.backend = backend
        self.max_tokens = req.max_tokens
        self.detok = Detokenizer(backend)
        self.stops = StopMatcher(req.stop)
        self.tokens: list[int] = []
        self.text: list[str] = []
        self.finish: str | None = None

    def push(self, token: int) -> str:
        """Commit one token; returns the text it releases."""
        if self.backend.is_eog(token):
            self.finish = "stop"
            return self._release(self.detok.flush(), final=True)
        self.tokens.append(token)
        out = self._release(self.detok.push(token), final=False)
        if self.stops.stopped:
            self.finish = "stop"
        elif len(self.tokens) >= self.max_tokens:
            self.finish = "length"
            out += self._release(self.detok.flush(), final=True)
        return out

    def _release(self, piece: str, final: bool) -> str:
        out = self.stops.push(piece)
        if final:
            out += self.stops.flush()
        self.text.append(out)
        return out

    def close(self, reason: str = "length") -> str:
        """End early (context full, or cancelled): release whatever is held back."""
        if self.finish is None:
            self.finish = reason
            return self._release(self.detok.flush(), final=True)
        return ""


# ---- one pass -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pass:
    """What one evaluated batch left behind: its rows and how its paths map to sequences."""

    logits: np.ndarray
    hidden: np.ndarray | None
    n_paths: int
    n_seqs: int  # paths + auxiliary sequences
    depth_counts: list[int]  # draft nodes per depth 1, 2, ...
    n_tokens: int  # in the batch: root, draft nodes, auxiliary tokens


def check_draft(draft: Draft, budget: int, n_vocab: int, name: str, room: int | None = None) -> None:
    """A proposer's output is the caller's input: refuse what would corrupt the pass.
    `budget` bounds the verified nodes, `room` (default: budget) the nodes and auxiliary
    tokens together (the batch and the context after the root)."""
    if not isinstance(draft, Draft):
        raise TypeError(f"proposer {name!r} returned {type(draft).__name__}, not a pyaccel.Draft")
    _check_int_arrays(name, ("tokens", draft.tokens), ("parents", draft.parents))
    if draft.aux is not None:
        _check_aux(draft.aux, name)
    if len(draft) > budget:
        raise ValueError(f"proposer {name!r} drafted {len(draft)} nodes, over its budget {budget}")
    n_aux = len(draft.aux) if draft.aux is not None else 0
    room = budget if room is None else room
    if len(draft) + n_aux > room:
        raise ValueError(f"proposer {name!r} drafted {len(draft)} nodes and {n_aux} auxiliary tokens, over the "
                         f"{room} the batch and the context leave after the root")
    if draft.parents.shape != draft.tokens.shape:
        raise ValueError(f"proposer {name!r} gave {len(draft.parents)} parents for {len(draft)} tokens")
    if draft.q is not None and (not isinstance(draft.q, np.ndarray) or draft.q.shape != (len(draft) + 1, n_vocab)):
        raise ValueError(f"proposer {name!r}: q must be a float32 array of shape ({len(draft) + 1}, {n_vocab}) "
                         f"(one draft distribution per node and one at the root), got {getattr(draft.q, 'shape', None)}")
    if draft.layout is not None and not isinstance(draft.layout, _core.TreeLayout):
        raise TypeError(f"proposer {name!r}: the precomputed layout must be a _core.tree_layout(parents), got "
                        f"{type(draft.layout).__name__}")
    if draft.layout is not None and draft.layout.n_nodes != len(draft):
        raise ValueError(f"proposer {name!r}: the precomputed layout has {draft.layout.n_nodes} nodes, "
                         f"the draft {len(draft)}")
    toks = draft.tokens if draft.aux is None else np.concatenate((draft.tokens, draft.aux.tokens))
    if toks.size and (int(toks.min()) < 0 or int(toks.max()) >= n_vocab):
        raise ValueError(f"proposer {name!r} drafted token ids outside the vocabulary 0..{n_vocab - 1} (an n-gram "
                         "cache built with another model's tokenizer does this: rebuild it with this model)")


def _check_int_arrays(name: str, *arrays: tuple[str, object]) -> None:
    for what, arr in arrays:
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iu" or arr.ndim != 1:
            shape = f" of shape {arr.shape}" if isinstance(arr, np.ndarray) else ""
            raise TypeError(f"proposer {name!r}: draft {what} must be a 1-D int array (np.int32), got "
                            f"{getattr(arr, 'dtype', type(arr).__name__)}{shape}")


def _is_id(s: object) -> bool:
    return isinstance(s, (int, np.integer)) and not isinstance(s, bool)


def _check_aux(aux: object, name: str) -> None:
    """Auxiliary tokens the pass can lay out. llama.cpp refuses a batch (llama_decode
    returns -1) in which a sequence's positions have a gap: every auxiliary sequence's
    offsets must run 1, 2, ... up to its deepest."""
    if not isinstance(aux, AuxTokens):
        raise TypeError(f"proposer {name!r}: draft aux must be a pyaccel.AuxTokens (AuxTokens.make builds one), "
                        f"got {type(aux).__name__}")
    _check_int_arrays(name, ("aux tokens", aux.tokens), ("aux offsets", aux.offsets))
    if not isinstance(aux.seqs, (tuple, list)) or not all(isinstance(ids, (tuple, list)) and all(map(_is_id, ids))
                                                          for ids in aux.seqs):
        raise TypeError(f"proposer {name!r}: auxiliary seqs must hold one sequence of int ids per token "
                        "(AuxTokens.make builds them)")
    if aux.outputs is not None and (not isinstance(aux.outputs, np.ndarray) or aux.outputs.dtype != np.bool_):
        raise TypeError(f"proposer {name!r}: auxiliary outputs must be a bool array (a flag per token) or None")
    if len(aux.offsets) != len(aux) or len(aux.seqs) != len(aux) or aux.outputs is not None and \
            aux.outputs.shape != (len(aux),):
        raise ValueError(f"proposer {name!r}: auxiliary tokens need one offset, one seq list and (if outputs "
                         "is given) one output flag each")
    if len(aux) and (int(aux.offsets.min()) < 1 or min(min(s, default=0) for s in aux.seqs) < 0 or not all(aux.seqs)):
        raise ValueError(f"proposer {name!r}: auxiliary offsets must be >= 1 and every auxiliary token "
                         "needs at least one sequence id >= 0")
    depths: dict[int, set[int]] = {}
    for offset, ids in zip(aux.offsets.tolist(), aux.seqs):
        for s in ids:
            depths.setdefault(int(s), set()).add(offset)
    for s, seen in sorted(depths.items()):
        if len(seen) != max(seen):
            raise ValueError(f"proposer {name!r}: auxiliary sequence {s} has tokens at offsets {sorted(seen)[:8]}, "
                             "with a gap: llama.cpp needs each sequence's positions unbroken (offsets 1, 2, ... up "
                             "to its deepest)")


def _evaluate(backend: LlamaBackend, root: int, draft: Draft, n_past: int) -> _Pass:
    """One llama_decode of [root] + draft + auxiliary tokens, laid out as the module docstring draws."""
    aux = draft.aux if draft.aux is not None and len(draft.aux) else None
    if len(draft) == 0 and aux is None:
        backend.decode([root], [n_past])
        return _Pass(backend.logits_rows(), _hidden(backend), 1, 1, [], 1)
    layout = draft.layout if draft.layout is not None else _core.tree_layout(draft.parents)
    n_paths = layout.n_paths
    n_seqs = n_paths + (aux.n_seqs if aux is not None else 0)
    if n_seqs > backend.n_seq_max:
        raise ValueError(
            f"the step needs {n_seqs} sequences ({n_paths} draft paths + {n_seqs - n_paths} auxiliary) but the "
            f"target context allows {backend.n_seq_max}: create the Model with a larger n_seq_max"
        )
    for s in range(1, n_seqs):
        backend.kv_copy(0, s)
    depth = np.asarray(layout.depth, dtype=np.int32) if len(draft) else np.zeros(0, np.int32)
    parts_tok = [np.asarray([root], np.int32), draft.tokens]
    parts_pos = [np.zeros(1, np.int32), depth]
    parts_out = [np.ones(1 + len(draft), np.int8)]
    seqs: list[list[int]] | None = [list(range(n_seqs))] + [list(s) for s in layout.node_seqs]
    if aux is not None:
        parts_tok.append(aux.tokens)
        parts_pos.append(aux.offsets)
        parts_out.append(np.ones(len(aux), np.int8) if aux.outputs is None else aux.outputs.astype(np.int8))
        seqs = seqs + [[n_paths + s for s in ids] for ids in aux.seqs]
    tokens = np.concatenate(parts_tok).astype(np.int32)
    positions = n_past + np.concatenate(parts_pos).astype(np.int32)
    if n_seqs == 1:
        seqs = None
    backend.decode(tokens, positions, seqs, np.concatenate(parts_out))
    counts = np.bincount(depth, minlength=int(depth.max()) + 1)[1:].tolist() if len(depth) else []
    return _Pass(backend.logits_rows(), _hidden(backend), n_paths, n_seqs, counts, len(tokens))


def _hidden(backend: LlamaBackend) -> np.ndarray | None:
    return backend.embeddings_rows() if backend.config.embeddings else None


def _commit_kv(backend: LlamaBackend, p: _Pass, path: int, keep_until: int) -> None:
    """Leave exactly the cells below position `keep_until` of the winning path, in sequence 0."""
    if p.n_seqs == 1:
        backend.kv_remove(0, keep_until, -1)
        return
    backend.kv_keep(path)
    backend.kv_remove(path, keep_until, -1)
    if path != 0:
        backend.kv_copy(path, 0)
        backend.kv_remove(path)


# ---- the loop -----------------------------------------------------------------------------


@dataclass
class _State:
    """One generation in progress."""

    req: Request
    emitter: _Emitter
    params: _core.SamplingParams
    rng: _core.Rng
    history: list[int]  # prompt + every committed token; the last is the pending root
    stats: Stats = field(default_factory=Stats)
    failed: bool = False  # a built-in proposer failed: the rest of the generation decodes plainly


def _budget(backend: LlamaBackend, st: _State) -> int | None:
    """Draft nodes this step may hold; None when the context is full."""
    n_past = len(st.history) - 1
    room = backend.n_ctx - n_past - 1
    if room < 0:
        return None
    return max(0, min(room, backend.max_batch - 1, st.req.max_tokens - len(st.emitter.tokens) - 1))


def _step(backend: LlamaBackend, cache: TargetCache, proposer: "Proposer", st: _State,
          budget: int) -> tuple[list[int], _Pass]:
    """Propose, evaluate, verify and commit once to the cache; returns the tokens to commit
    to the output (the kept draft tokens, then the target's next token) and the pass."""
    n_past = len(st.history) - 1
    root = st.history[-1]
    td = time.perf_counter()
    room = min(backend.n_ctx - n_past - 1, backend.max_batch - 1)

    def checked_draft() -> Draft:
        draft = proposer.propose(st.history, budget)
        check_draft(draft, budget, backend.n_vocab, proposer.name, room)
        return draft

    draft = Draft.empty()
    if budget > 0 and not st.failed:
        # A malformed draft of a built-in method falls back to plain decoding as its failure does.
        proposed = _guarded(proposer, st, checked_draft)
        if proposed is not None and not st.failed:  # it did not fail just now
            draft = proposed
    te = time.perf_counter()
    p = _evaluate(backend, root, draft, n_past)
    tv = time.perf_counter()
    cache.note_decode(1 + len(draft) + (len(draft.aux) if draft.aux is not None else 0), tv - te)
    with _model_output(draft):
        res = _core.verify_tree(p.logits[: 1 + len(draft)], draft.tokens, draft.parents, st.params, st.rng,
                                draft.q, proposer.typical)
    tc = time.perf_counter()
    stats = st.stats
    stats.draft_s += te - td
    stats.target_s += tv - te
    stats.verify_s += tc - tv
    stats.target_forwards += 1
    accepted = list(res.accepted)
    outcome = StepOutcome(draft, accepted, int(res.next_token), n_past, p.logits, p.hidden)
    tokens = outcome.accepted_tokens
    _commit_kv(backend, p, res.path, n_past + 1 + len(tokens))
    cache.record([root] + tokens)
    if not st.failed:
        _guarded(proposer, st, proposer.observe, outcome)
    return tokens + [outcome.next_token], p


def _builtin(proposer: "Proposer") -> bool:
    return type(proposer).__module__.startswith("pyaccel.methods.")


def _guarded(proposer: "Proposer", st: _State, call: Callable[..., T], *args: Any) -> T | None:
    """call(*args), one of `proposer`'s hooks. A built-in proposer that fails is a bug in
    pyaccel, not in the user's call: warn (once per generation), set st.failed, return
    None, and the rest of the generation decodes plainly (lossless either way). A user's
    own proposer fails loudly, as its author needs to see."""
    try:
        return call(*args)
    except Exception as exc:
        if not _builtin(proposer):
            raise
        if not st.failed:  # one warning per generation (end() may fail after propose() did)
            st.failed = True
            # pyaccel's own errors say what the user can do (a cache file of another model);
            # anything else is a fault of the method itself.
            cause = ("" if isinstance(exc, PyaccelError) else
                     " This is a bug in pyaccel: please report it with the prompt.")
            warnings.warn(f"method {proposer.name!r} failed ({type(exc).__name__}: {exc}); this generation goes "
                          f"on with plain decoding, its output unchanged.{cause}", ProposerFailedWarning,
                          stacklevel=2)
        return None


@contextmanager
def _model_output(draft: Draft | None) -> Iterator[None]:
    """Non-finite logits come from the model, not from the caller: say so."""
    try:
        yield
    except ValueError as exc:
        if "target_logits" in str(exc) and "NaN or inf" in str(exc) or draft is None and "NaN" in str(exc):
            raise ModelOutputError(
                "the model produced NaN or inf logits: the model file may be damaged (a registry model: "
                "`pyaccel models pull NAME --force` fetches it again) or the llama.cpp build faulty for this "
                "device (try n_gpu_layers=0, or another quantisation)"
            ) from None
        raise


def check_request(backend: LlamaBackend, req: Request) -> None:
    """A request the backend can serve; TypeError, ValueError or ContextOverflowError naming
    what is wrong. Made before `run`, so that a stream's errors come when it is created."""
    if not req.prompt:
        raise ValueError("the prompt is empty: give at least one token of text")
    if isinstance(req.max_tokens, bool) or not isinstance(req.max_tokens, (int, np.integer)):
        raise TypeError(f"max_tokens must be an int, got {type(req.max_tokens).__name__} {req.max_tokens!r}")
    if req.max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {req.max_tokens}")
    if len(req.prompt) >= backend.n_ctx:
        raise ContextOverflowError(
            f"the prompt has {len(req.prompt)} tokens but the context holds {backend.n_ctx}: "
            "use a larger n_ctx (--n-ctx) or a shorter prompt"
        )
    bad = [t for t in req.prompt if not 0 <= t < backend.n_vocab]
    if bad:
        raise ValueError(f"prompt token {bad[0]} is outside the vocabulary 0..{backend.n_vocab - 1}")
    req.sampling.validate()


def run(backend: LlamaBackend, cache: TargetCache, proposer: "Proposer", req: Request,
        trace: Callable[[StepTrace], None] | None = None) -> Iterator[str | Result]:
    """Generate for `req`, yielding text pieces as they are committed and finally the Result.
    `req` is one `check_request` passed (Generator.stream checks it when it is called).
    `trace`, where given, is called with each decode step's `StepTrace` once the step's
    tokens are in the output."""
    st = _State(req, _Emitter(backend, req), sampling_params(req.sampling), new_rng(req.sampling.seed),
                list(req.prompt), Stats(prompt_tokens=len(req.prompt)))
    if req.max_tokens == 0:
        yield Result("", [], "length", st.stats)
        return
    t0 = time.perf_counter()
    if not req.cache_prompt or (req.sampling.seed is not None and not req.sampling.greedy):
        # A reused prefix changes the batch shapes, hence the logits in their last bits,
        # hence which token a seeded draw picks (or greedy decoding at a near-tie): a seeded
        # run, and one asked to, prefills afresh.
        cache.truncate(0)
    try:
        st.stats.cached_prompt_tokens = cache.prefill(req.prompt, req.cancel)
    except PrefillCancelled:
        st.stats.prefill_s = time.perf_counter() - t0
        yield Result("", [], CANCELLED, st.stats)
        return
    with _model_output(None):
        first = _core.sample(backend.logits_rows()[-1], st.params, st.rng)
    t1 = time.perf_counter()
    st.stats.prefill_s = t1 - t0
    # before any other decode: it may read the prefill's rows
    _guarded(proposer, st, proposer.begin, list(req.prompt), req.sampling)
    try:
        yield from _commit(st, [first])
        while st.emitter.finish is None:
            if req.cancel is not None and req.cancel.is_set():
                piece = st.emitter.close(CANCELLED)
                if piece:
                    yield piece
                break
            budget = _budget(backend, st)
            if budget is None:
                piece = st.emitter.close()
                if piece:
                    yield piece
                break
            # Without a trace the step allocates nothing for it: the mark is its only cost.
            mark = None if trace is None else _Mark.of(st)
            tokens, p = _step(backend, cache, proposer, st, budget)
            step_s = 0.0 if mark is None else time.perf_counter() - mark.t
            committed = yield from _commit(st, tokens)
            # a kept draft token past a stop string or the end token is not in the output
            accepted = min(len(tokens) - 1, committed)
            st.stats.record_draft(p.depth_counts, accepted)
            if mark is not None:
                trace(mark.record(st.stats, p, tokens[:committed], accepted, step_s))
    finally:
        if not backend.closed:  # the Model closed under a suspended stream: nothing left to tidy
            _guarded(proposer, st, proposer.end)
            cache.settle(st.history[:-1])  # every committed token but the pending root
    st.stats.new_tokens = len(st.emitter.tokens)
    st.stats.decode_s = time.perf_counter() - t1
    yield Result("".join(st.emitter.text), st.emitter.tokens, st.emitter.finish or "length", st.stats)


@dataclass(frozen=True)
class _Mark:
    """The clock and the step's counters as a traced step starts."""

    t: float
    index: int
    depth: int
    draft_s: float
    target_s: float
    verify_s: float

    @classmethod
    def of(cls, st: _State) -> "_Mark":
        s = st.stats
        return cls(time.perf_counter(), s.target_forwards, len(st.history) - 1, s.draft_s, s.target_s, s.verify_s)

    def record(self, s: Stats, p: _Pass, tokens: list[int], accepted: int, step_s: float) -> StepTrace:
        """The step's trace, its times the counters' growth since the mark."""
        return StepTrace(index=self.index, depth=self.depth, batch=p.n_tokens, drafted=sum(p.depth_counts),
                         accepted=accepted, committed=len(tokens), tokens=tuple(tokens),
                         propose_s=s.draft_s - self.draft_s, target_s=s.target_s - self.target_s,
                         verify_s=s.verify_s - self.verify_s, step_s=step_s)


def _commit(st: _State, tokens: list[int]) -> Generator[str, None, int]:
    """Emit committed tokens until the generation finishes; returns how many it committed.
    The first token of a call comes from the prefill and is not a decode-step token."""
    n = 0
    for n, tok in enumerate(tokens, 1):
        if len(st.history) > len(st.req.prompt):
            st.stats.decoded_tokens += 1
        piece = st.emitter.push(tok)
        st.history.append(tok)
        if piece:
            yield piece
        if st.emitter.finish is not None:
            break
    return n
