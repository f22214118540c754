"""N-gram cache drafting: the proposer (`drafter`) and the static-cache builder (`corpus`)."""

from __future__ import annotations

from .corpus import build_cache, corpus_files
from .drafter import NgramCacheDrafter, check_cache_path, check_cache_vocab, load_cache, save_cache

__all__ = ["NgramCacheDrafter", "build_cache", "check_cache_path", "check_cache_vocab", "corpus_files", "load_cache",
           "save_cache"]
