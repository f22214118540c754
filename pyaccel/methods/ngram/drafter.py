"""N-gram cache drafting: llama.cpp's lookup idea with persistent caches, sized by cost.

Three `_core.NgramCache` count tables vote on the next tokens (`_core.ngram_cache_draft`):

    context   this prompt + output, updated every step        lax thresholds
    dynamic   every earlier generation of this drafter,       strict thresholds
              optionally kept on disk between processes
    static    a corpus built offline (`pyaccel ngram build`)  votes with its n = static_n

The draft is a chain. Its length comes from the measured cost curve of the target
(`_core.chain_plan`) and per-position acceptance learnt by shadow drafting
(`pyaccel.methods.shadow`), so on a device where a weak guess costs a full slot the drafter stays
quiet until its drafts prove right.
"""

from __future__ import annotations

import os
import shlex
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np

from ... import _core
from ...cost_model import CostModel
from ...errors import CacheFileError, IncompatibleModelsError
from ...leftovers import remove_dead_temps
from ...paths import check_file_path, file_lock
from ...types import Draft, SamplingConfig
from ..candidate import Candidate
from ..base import Proposer
from ..shadow import ShadowScorer

if TYPE_CHECKING:
    from ...model import Model

PathLike = Union[str, "os.PathLike[str]"]

# The deepest shadow draft: the cache thresholds end most drafts well before this.
DEFAULT_MAX_DRAFT = 16
# ngram_cache_draft reads only this many trailing tokens (the widest n-gram a cache counts).
_DRAFT_CONTEXT = _core.NgramCache().n_max


def load_cache(path: PathLike) -> "_core.NgramCache":
    """A saved cache; ValueError naming the file when it is missing, a folder or damaged."""
    if Path(path).is_dir():
        raise ValueError(f"{os.fspath(path)!r} is a folder, not an n-gram cache file")
    return _core.NgramCache.load(os.fspath(path))


def check_cache_vocab(cache: "_core.NgramCache", vocab: int, path: PathLike | None, remedy: str) -> None:
    """IncompatibleModelsError (a ValueError) naming `path` when `cache` records another
    tokenizer than the fingerprint `vocab`; 0 on either side (unknown) passes."""
    if cache.vocab and vocab and cache.vocab != vocab:
        where = f"the n-gram cache file {os.fspath(path)!r}" if path is not None else "this n-gram cache"
        raise IncompatibleModelsError(
            f"{where} counts the token ids of another tokenizer (vocabulary fingerprint {cache.vocab:#010x}, "
            f"the model's {vocab:#010x}): it would draft nonsense for this model. {remedy}"
        )


def check_cache_path(path: PathLike) -> None:
    """Can a cache be saved at `path`? ValueError saying why not."""
    check_file_path(path, "n-gram cache", "cache.ngc")


def save_cache(cache: "_core.NgramCache", path: PathLike) -> None:
    """Write `cache` to `path` atomically, safe against another process saving the same file."""
    check_cache_path(path)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")  # the core writes tmp + ".tmp", renames it to tmp
    try:
        cache.save(os.fspath(tmp))
        os.replace(tmp, path)
    except (OSError, ValueError) as exc:
        raise CacheFileError(f"cannot save the n-gram cache to {os.fspath(path)!r} ({exc}): give a path in a "
                             "folder you can write") from None
    finally:
        tmp.unlink(missing_ok=True)


class NgramCacheDrafter(Proposer):
    """N-gram cache drafting (method "ngram") as a `Generator` method.

    static_path: a cache built from a corpus with `pyaccel ngram build` (same tokenizer).
    dynamic_path: where the dynamic cache lives; loaded at bind if it exists, saved after
      every generation. Without it the dynamic cache lasts as long as this object.
    A cache file records its tokenizer: bind raises IncompatibleModelsError (a ValueError)
    for one of another tokenizer than the target's; one that records none (saved by an
    older pyaccel) is used, and the dynamic one records the target's when saved again.
    max_draft: the deepest draft. length: a fixed draft length (no cost model).
    thresholds: evidence a cache needs before it drafts (default: `_core.NgramDraftThresholds()`).
    costs: a cost model to plan with instead of the target's measured one.
    """

    name = "ngram"

    def __init__(self, *, static_path: PathLike | None = None, dynamic_path: PathLike | None = None,
                 max_draft: int = DEFAULT_MAX_DRAFT, length: int | None = None,
                 thresholds: "_core.NgramDraftThresholds | None" = None, costs: CostModel | None = None) -> None:
        if max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {max_draft}")
        if length is not None and not 0 <= length <= max_draft:
            raise ValueError(f"length must be in 0..max_draft ({max_draft}), got {length}")
        self.static_path = Path(static_path) if static_path is not None else None
        self.dynamic_path = Path(dynamic_path) if dynamic_path is not None else None
        if self.dynamic_path is not None:  # saved after every generation: a bad path fails now
            check_cache_path(self.dynamic_path)
        self.max_draft = max_draft
        self.fixed_length = length
        self.thresholds = thresholds if thresholds is not None else _core.NgramDraftThresholds()
        # A bad threshold table fails here, not at the first step of a generation.
        _core.ngram_cache_draft([], _core.NgramCache(), _core.NgramCache(), None, 0, self.thresholds)
        self._costs = costs
        self._static: "_core.NgramCache | None" = None
        self._dynamic: "_core.NgramCache | None" = None
        self._context: "_core.NgramCache | None" = None
        self._counted = 0  # history tokens already in the context cache
        self._vocab = 0  # the target's vocabulary fingerprint; 0 until bind
        self._model_arg = "MODEL"  # how `pyaccel ngram build -m` names the target
        # How good cache drafts are depends on the caches and the model, which outlive one
        # generation: the acceptance learnt carries over too (decay lets it drift).
        self.acceptance = _core.AcceptanceStats(max_draft)
        self._shadows = ShadowScorer()

    # ---- set-up ---------------------------------------------------------------------------

    def bind(self, target: "Model") -> None:
        """Load the caches and check that they count the target's token ids, before any drafting."""
        self._vocab = target.backend.vocab_fingerprint
        self._model_arg = target.cli_arg
        if self._dynamic is not None:  # loaded before bind (the dynamic_cache property)
            self._dynamic = self._adopt_dynamic(self._dynamic)
        if self._static is not None:
            self._adopt_static(self._static)
        self._load_caches()
        if self.fixed_length is None and self._costs is None:
            self._costs = target.costs

    def _adopt_dynamic(self, cache: "_core.NgramCache") -> "_core.NgramCache":
        """`cache` as the dynamic cache: checked against the target's tokenizer and, once
        bound, stamped with it (an older file is saved back with it)."""
        path = self.dynamic_path
        remedy = (f"Give another dynamic cache path (--ngram-dynamic, dynamic_path=) for this model, or delete "
                  f"{os.fspath(path)!r}." if path is not None else "Use a new NgramCacheDrafter for this model.")
        check_cache_vocab(cache, self._vocab, path, remedy)
        if self._vocab:
            cache.vocab = self._vocab
        return cache

    def _adopt_static(self, cache: "_core.NgramCache") -> None:
        assert self.static_path is not None
        check_cache_vocab(cache, self._vocab, self.static_path,
                          f"Build the static cache again for this model: `pyaccel ngram build CORPUS... "
                          f"-m {self._model_arg} -o {shlex.quote(os.fspath(self.static_path))}`.")

    def _load_dynamic(self) -> "_core.NgramCache":
        """The dynamic cache file, or an empty cache where there is none. The file only holds
        what earlier generations learnt: a damaged one (cut short by a crash, overwritten)
        is dropped with a warning and saved over, not an error that stops the generation."""
        path = self.dynamic_path
        if path is None or not path.exists():
            return self._adopt_dynamic(_core.NgramCache())
        try:
            cache = load_cache(path)
        except ValueError as exc:
            # The core's message ends with how to rebuild a static cache: not this file's remedy.
            why = str(exc).partition(": rebuild it")[0]
            warnings.warn(f"pyaccel: the dynamic n-gram cache {os.fspath(path)!r} is damaged ({why}); it starts "
                          "empty and is saved over after this generation", stacklevel=2)
            cache = _core.NgramCache()
        return self._adopt_dynamic(cache)

    def _load_caches(self) -> None:
        if self._dynamic is None:
            self._dynamic = self._load_dynamic()
        if self._static is None and self.static_path is not None:
            static = load_cache(self.static_path)
            self._adopt_static(static)
            n = self.thresholds.static_n
            if not static.n_min <= n <= static.n_max:
                raise ValueError(
                    f"the static cache {self.static_path} counts n in {static.n_min}..{static.n_max} but "
                    f"the thresholds vote with static_n = {n}: rebuild it with --n-min <= {n} <= --n-max"
                )
            self._static = static

    @property
    def dynamic_cache(self) -> "_core.NgramCache":
        self._load_caches()
        assert self._dynamic is not None
        return self._dynamic

    @property
    def static_cache(self) -> "_core.NgramCache | None":
        self._load_caches()
        return self._static

    # ---- the Proposer protocol ------------------------------------------------------------

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        if self._costs is None and self.fixed_length is None:
            raise ValueError("NgramCacheDrafter needs a cost model: use it through a Generator, "
                             "pass costs=, or give a fixed length=")
        dynamic = self.dynamic_cache
        # Same n range as the dynamic cache, which it is merged into at the end.
        self._context = _core.NgramCache(dynamic.n_min, dynamic.n_max)
        self._context.update(np.asarray(prompt, dtype=np.int32), 0)
        self._counted = len(prompt)
        self._shadows.clear()

    def _full_draft(self, tokens: list[int]) -> np.ndarray:
        """The caches' draft at full depth, shadowed so its acceptance is learnt."""
        assert self._context is not None, "begin() was not called"
        self._count_new(tokens)
        self._shadows.settle(tokens)
        tail = np.asarray(tokens[-_DRAFT_CONTEXT:], dtype=np.int32)
        full = _core.ngram_cache_draft(tail, self._context, self.dynamic_cache, self._static,
                                       self.max_draft, self.thresholds)
        self._shadows.add(len(tokens), full, self.acceptance)
        return full

    def propose(self, tokens: list[int], budget: int) -> Draft:
        full = self._full_draft(tokens)
        return Draft.chain(full[: self._draft_len(len(full), budget, len(tokens))])

    def candidates(self, tokens: list[int], budget: int) -> list[Candidate]:
        """The caches' chain with P(position accepted) from the learnt per-position
        acceptance: the public candidates API (`pyaccel.methods.candidate`), in place
        of `propose`."""
        full = self._full_draft(tokens)[: max(0, budget)]
        if not len(full):
            return []
        return [Candidate.chain(full, np.cumprod(self.acceptance.alpha()[: len(full)]), self.name)]

    def _count_new(self, tokens: list[int]) -> None:
        """Count the tokens committed since the last step. The update only needs the n_max
        tokens before the first new one, so the history is not copied every step."""
        assert self._context is not None
        lo = max(0, self._counted - self._context.n_max)
        self._context.update(np.asarray(tokens[lo:], dtype=np.int32), self._counted - lo)
        self._counted = len(tokens)

    def _draft_len(self, available: int, budget: int, depth: int) -> int:
        limit = min(available, budget)
        if self.fixed_length is not None:
            return min(limit, self.fixed_length)
        if limit < 1:
            return 0
        assert self._costs is not None
        return self._costs.chain(self.acceptance.alpha(), depth, limit).best_len

    # Acceptance is learnt from the shadows, which cover every position: no observe().

    def end(self) -> None:
        """Fold this generation into the dynamic cache and persist it."""
        self._shadows.clear()
        if self._context is None:
            return
        context, self._context = self._context, None
        if self.dynamic_path is None:
            self.dynamic_cache.merge(context)
            return
        # Other processes may save the same file: under its lock, this generation is merged
        # into what the file holds now, not into what it held when this drafter loaded it
        # (a file of another tokenizer there by now raises instead).
        with file_lock(self.dynamic_path):
            if self.dynamic_path.exists():
                self._dynamic = self._load_dynamic()
            self.dynamic_cache.merge(context)
            save_cache(self.dynamic_cache, self.dynamic_path)
