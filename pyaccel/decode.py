"""The one decode loop every method shares: propose -> evaluate -> verify -> commit.

One step, with the pending root r (sampled last step, not yet in the target's cache) and
a draft tree of n nodes under it, is a single llama_decode:

    batch   [ r | d0 d1 ... d(n-1) ]          positions n_past + depth (r has depth 0)
    seqs    r: every path; node i: the paths through it (one sequence per leaf)
    logits  all n + 1 rows -> verify_tree -> kept nodes a, next token x

Commit keeps the winning path's accepted cells in sequence 0, drops everything else, emits
the accepted tokens and x, and x becomes the next root.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from . import _core
from .backend import Detokenizer, LlamaBackend
from .errors import ContextOverflowError
from .stops import StopMatcher
from .types import Draft, Proposer, Result, SamplingConfig, Stats


class NoDraft:
    """Plain decoding: proposes nothing, so every step is one token."""

    name = "plain"

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        pass

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return Draft.empty()

    def observe(self, draft: Draft, accepted: list[int], next_token: int) -> None:
        pass

    def end(self) -> None:
        pass


@dataclass(frozen=True)
class Request:
    prompt: list[int]
    max_tokens: int
    sampling: SamplingConfig
    stop: Sequence[str] = ()


class TargetCache:
    """What the target's sequence 0 holds, so a prompt sharing a prefix with the last one
    (multi-turn chat, repeated system prompts) is not evaluated again."""

    def __init__(self, backend: LlamaBackend) -> None:
        self.backend = backend
        self.tokens: list[int] = []

    def prefill(self, prompt: list[int]) -> int:
        """Bring the cache to `prompt`; return how many prompt tokens were already there.
        The last prompt token is always evaluated, so its logits are fresh."""
        common = 0
        for a, b in zip(self.tokens, prompt):
            if a != b:
                break
            common += 1
        common = min(common, len(prompt) - 1)
        self.backend.kv_remove(-1, common, -1)
        self.tokens = prompt[:common]
        self.backend.prefill(prompt[common:], start_pos=common)
        self.tokens = list(prompt)
        return common

    def truncate(self, n: int) -> None:
        self.backend.kv_remove(-1, n, -1)
        del self.tokens[n:]


def _sampling_params(s: SamplingConfig) -> _core.SamplingParams:
    return _core.SamplingParams(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p)


def _seed(s: SamplingConfig) -> int:
    return s.seed if s.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1


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

    def close(self) -> str:
        """End early (context full): release whatever is held back."""
        if self.finish is None:
            self.finish = "length"
            return self._release(self.detok.flush(), final=True)
        return ""


def _batch_seqs(layout: "_core.TreeLayout", n_paths: int) -> list[list[int]]:
    return [list(range(n_paths))] + [list(s) for s in layout.node_seqs]


def _evaluate(backend: LlamaBackend, root: int, draft: Draft, n_past: int) -> tuple[np.ndarray, int, object]:
    """One llama_decode of [root] + draft; returns logits rows, the number of paths, the layout."""
    if len(draft) == 0:
        backend.decode([root], [n_past])
        return backend.logits_rows(), 1, None
    layout = _core.tree_layout(draft.parents)
    n_paths = layout.n_paths
    if n_paths > backend.n_seq_max:
        raise ValueError(
            f"the draft tree has {n_paths} leaves but the target context allows {backend.n_seq_max} "
            "sequences: create the Model with a larger n_seq_max"
        )
    for s in range(1, n_paths):
        backend.kv_copy(0, s)
    tokens = np.concatenate(([root], draft.tokens)).astype(np.int32)
    positions = n_past + np.concatenate(([0], np.asarray(layout.depth))).astype(np.int32)
    seqs = None if n_paths == 1 else _batch_seqs(layout, n_paths)
    backend.decode(tokens, positions, seqs, np.ones(len(tokens), dtype=np.int8))
    return backend.logits_rows(), n_paths, layout


def _commit_kv(backend: LlamaBackend, n_paths: int, path: int, keep_until: int) -> None:
    """Leave exactly the cells below position `keep_until` of the winning path, in sequence 0."""
    if n_paths == 1:
        backend.kv_remove(0, keep_until, -1)
        return
    backend.kv_keep(path)
    backend.kv_remove(path, keep_until, -1)
    if path != 0:
        backend.kv_copy(path, 0)
        backend.kv_remove(path)


def _depth_counts(layout: object, n: int) -> list[int]:
    if n == 0:
        return []
    depth = np.asarray(layout.depth)  # type: ignore[attr-defined]
    return np.bincount(depth, minlength=int(depth.max()) + 1)[1:].tolist()


def run(backend: LlamaBackend, cache: TargetCache, proposer: Proposer, req: Request) -> Iterator[str | Result]:
    """Generate for `req`, yielding text pieces as they are committed and finally the Result."""
    if not req.prompt:
        raise ValueError("the prompt is empty: give at least one token of text")
    if req.max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {req.max_tokens}")
    if len(req.prompt) >= backend.n_ctx:
        raise ContextOverflowError(
            f"the prompt has {len(req.prompt)} tokens but the context holds {backend.n_ctx}: "
            "use a larger n_ctx or a shorter prompt"
        )
    req.sampling.validate()
    stats = Stats(prompt_tokens=len(req.prompt))
    emitter = _Emitter(backend, req)
    if req.max_tokens == 0:
        yield Result("", [], "length", stats)
        return
    params = _sampling_params(req.sampling)
    rng = _core.Rng(_seed(req.sampling))

    t0 = time.perf_counter()
    if req.sampling.seed is not None and not req.sampling.greedy:
        # A reused prefix changes the batch shapes, hence the logits in their last bits,
        # hence which token a seeded draw picks: a seeded run always prefills afresh.
        cache.truncate(0)
    stats.cached_prompt_tokens = cache.prefill(req.prompt)
    root = _core.sample(backend.logits_rows()[-1], params, rng)
    t1 = time.perf_counter()
    stats.prefill_s = t1 - t0
    proposer.begin(list(req.prompt), req.sampling)
    history = list(req.prompt)
    try:
        piece = emitter.push(root)
        history.append(root)
        if piece:
            yield piece
        while emitter.finish is None:
            n_past = len(history) - 1
            room = backend.n_ctx - n_past - 1
            if room < 0:
                piece = emitter.close()
                if piece:
                    yield piece
                break
            budget = max(0, min(room, backend.max_batch - 1, req.max_tokens - len(emitter.tokens) - 1))
            td = time.perf_counter()
            draft = proposer.propose(history, budget) if budget > 0 else Draft.empty()
            if len(draft) > budget:
                raise ValueError(f"proposer {proposer.name!r} drafted {len(draft)} nodes, over its budget {budget}")
            te = time.perf_counter()
            rows, n_paths, layout = _evaluate(backend, root, draft, n_past)
            tv = time.perf_counter()
            res = _core.verify_tree(rows, draft.tokens, draft.parents, params, rng, draft.q)
            tc = time.perf_counter()
            stats.draft_s += te - td
            stats.target_s += tv - te
            stats.verify_s += tc - tv
            stats.target_forwards += 1
            accepted = [int(draft.tokens[i]) for i in res.accepted]
            _commit_kv(backend, n_paths, res.path, n_past + 1 + len(accepted))
            stats.record_draft(_depth_counts(layout, len(draft)), len(accepted))
            proposer.observe(draft, list(res.accepted), res.next_token)
            for tok in accepted + [res.next_token]:
                stats.decoded_tokens += 1
                piece = emitter.push(tok)
                history.append(tok)
                if piece:
                    yield piece
                if emitter.finish is not None:
                    break
            root = history[-1]
    finally:
        proposer.end()
        # The cache holds every committed token except the pending root.
        cache.tokens = history[:-1]
        cache.truncate(len(history) - 1)
    stats.new_tokens = len(emitter.tokens)
    stats.decode_s = time.perf_counter() - t1
    yield Result("".join(emitter.text), emitter.tokens, emitter.finish or "length", stats)
