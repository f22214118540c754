"""pyaccel: faster local text generation on llama.cpp GGUF models.

Several tokens per forward pass of the target model (draft models, n-gram drafts, trees),
with output that stays the model's own.
"""

from __future__ import annotations

from .cost_model import CostModel
from .errors import (
    ContextOverflowError,
    IncompatibleModelsError,
    ModelLoadError,
    ModelNotFoundError,
    ModelOutputError,
    ProposerFailedWarning,
    PullError,
    PyaccelError,
)
from .generator import Generator
from .methods.auto.proposer import Auto, AutoTuning
from .methods.base import NoDraft, Proposer
from .methods.draft import DraftModel
from .methods.lookahead import Lookahead, LookaheadTuning
from .methods.lookup import LookupTuning, PromptLookup
from .methods.medusa import Medusa, MedusaHeads, MedusaTuning
from .methods.ngram import NgramCacheDrafter
from .model import Model
from .registry import cache_dir, load_registry, pull, resolve_model
from .types import AuxTokens, Draft, Result, SamplingConfig, Stats, StepOutcome

__version__ = "0.1.0"

__all__ = [
    "Auto",
    "AutoTuning",
    "AuxTokens",
    "ContextOverflowError",
    "CostModel",
    "Draft",
    "DraftModel",
    "Generator",
    "IncompatibleModelsError",
    "Lookahead",
    "LookaheadTuning",
    "LookupTuning",
    "Medusa",
    "MedusaHeads",
    "MedusaTuning",
    "Model",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelOutputError",
    "ProposerFailedWarning",
    "NgramCacheDrafter",
    "NoDraft",
    "PromptLookup",
    "Proposer",
    "PullError",
    "PyaccelError",
    "Result",
    "SamplingConfig",
    "Stats",
    "StepOutcome",
    "cache_dir",
    "load_registry",
    "pull",
    "resolve_model",
]
