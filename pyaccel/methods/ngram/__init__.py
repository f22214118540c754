"""N-gram cache drafting: the proposer (`drafter`) and the static-cache builder (`corpus`)."""

from __future__ import annotations

from .corpus import build_cache, corpus_files
from .drafter import NgramCacheDrafter, load_cache, save_cache

__all__ = ["NgramCacheDrafter", "build_cache", "corpus_files", "load_cache", "save_cache"]
