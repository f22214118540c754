"""Exceptions raised by pyaccel. Every message says what the user can do about it."""

from __future__ import annotations


class PyaccelError(Exception):
    """Base class for pyaccel's own errors."""


class ModelNotFoundError(PyaccelError, FileNotFoundError):
    """A model name is unknown, or a model path does not exist."""


class ModelLoadError(PyaccelError, ValueError):
    """A file exists but llama.cpp cannot load it as a GGUF model."""


class PullError(PyaccelError, RuntimeError):
    """Fetching or verifying a registry model failed; no partial file is left behind."""


class IncompatibleModelsError(PyaccelError, ValueError):
    """Target and draft models do not share a vocabulary."""


class ContextOverflowError(PyaccelError, ValueError):
    """The prompt (plus what is asked to be generated) does not fit the context."""


class CacheFileError(PyaccelError, ValueError):
    """A file pyaccel keeps across runs (an n-gram cache) cannot be written where asked."""


class ModelOutputError(PyaccelError, ValueError):
    """The model produced something unusable (NaN or inf logits)."""


class PrefillCancelled(Exception):
    """A prompt's evaluation was cancelled (its `cancel` event set) between two chunks; the
    decode loop turns it into a Result with finish_reason "cancelled"."""


class ProposerFailedWarning(UserWarning):
    """A built-in method failed inside a generation (a bug in pyaccel): the generation went
    on with plain decoding, so its output is still the model's own."""
