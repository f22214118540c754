"""pyaccel: faster local text generation on llama.cpp GGUF models.

Several tokens per forward pass of the target model (draft models, n-gram drafts, trees),
with output that stays the model's own.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType

TYPE_CHECKING = False  # typing's own flag, without importing typing (and re) on the way in
if TYPE_CHECKING:
    from typing import Any

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
    from .methods.draft import DraftModel, DraftTuning
    from .methods.lookahead import Lookahead, LookaheadTuning
    from .methods.lookup import LookupTuning, PromptLookup
    from .methods.medusa import Medusa, MedusaHeads, MedusaTuning
    from .methods.ngram import NgramCacheDrafter
    from .model import Model
    from .registry import cache_dir, load_registry, pull, resolve_model
    from .types import AuxTokens, Draft, Result, SamplingConfig, Stats, StepOutcome, StepTrace

# Where each public name lives: imported on first use (PEP 562), so `import pyaccel` and
# the command line start in milliseconds and a Ctrl-C while they start exits quietly.
_EXPORTS = MappingProxyType({
    "Auto": ".methods.auto.proposer",
    "AutoTuning": ".methods.auto.proposer",
    "AuxTokens": ".types",
    "ContextOverflowError": ".errors",
    "CostModel": ".cost_model",
    "Draft": ".types",
    "DraftModel": ".methods.draft",
    "DraftTuning": ".methods.draft",
    "Generator": ".generator",
    "IncompatibleModelsError": ".errors",
    "Lookahead": ".methods.lookahead",
    "LookaheadTuning": ".methods.lookahead",
    "LookupTuning": ".methods.lookup",
    "Medusa": ".methods.medusa",
    "MedusaHeads": ".methods.medusa",
    "MedusaTuning": ".methods.medusa",
    "Model": ".model",
    "ModelLoadError": ".errors",
    "ModelNotFoundError": ".errors",
    "ModelOutputError": ".errors",
    "NgramCacheDrafter": ".methods.ngram",
    "NoDraft": ".methods.base",
    "PromptLookup": ".methods.lookup",
    "Proposer": ".methods.base",
    "ProposerFailedWarning": ".errors",
    "PullError": ".errors",
    "PyaccelError": ".errors",
    "Result": ".types",
    "SamplingConfig": ".types",
    "Stats": ".types",
    "StepOutcome": ".types",
    "StepTrace": ".types",
    "cache_dir": ".registry",
    "load_registry": ".registry",
    "pull": ".registry",
    "resolve_model": ".registry",
})

__version__ = "0.1.0"

__all__ = [
    "Auto",
    "AutoTuning",
    "AuxTokens",
    "ContextOverflowError",
    "CostModel",
    "Draft",
    "DraftModel",
    "DraftTuning",
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
    "StepTrace",
    "cache_dir",
    "load_registry",
    "pull",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        return getattr(importlib.import_module(module, __name__), name)
    if name.startswith("__"):  # never import __main__ (it runs the CLI) for a dunder lookup
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:  # a submodule not imported yet: pyaccel.registry, pyaccel.methods, ...
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*_EXPORTS, "__version__"})
