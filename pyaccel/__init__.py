"""pyaccel: faster local text generation on llama.cpp GGUF models.

Several tokens per forward pass of the target model (draft models, n-gram drafts, trees),
with output that stays the model's own.
"""

from __future__ import annotations

from .api import Generator, Model
from .decode import NoDraft
from .draft import DraftModel
from .errors import (
    ContextOverflowError,
    IncompatibleModelsError,
    ModelLoadError,
    ModelNotFoundError,
    PullError,
    PyaccelError,
)
from .ngram import NgramCacheDrafter
from .lookup import PromptLookup
from .registry import cache_dir, load_registry, pull, resolve_model
from .types import Draft, Proposer, Result, SamplingConfig, Stats

__version__ = "0.1.0"

__all__ = [
    "ContextOverflowError",
    "DraftModel",
    "Draft",
    "Generator",
    "IncompatibleModelsError",
    "Model",
    "ModelLoadError",
    "ModelNotFoundError",
    "NgramCacheDrafter",
    "NoDraft",
    "PromptLookup",
    "Proposer",
    "PullError",
    "PyaccelError",
    "Result",
    "SamplingConfig",
    "Stats",
    "cache_dir",
    "load_registry",
    "pull",
    "resolve_model",
]
