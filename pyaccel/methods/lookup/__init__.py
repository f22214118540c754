"""Prompt lookup: the proposer (`proposer`) and its copy follower with learnt edits (`rewrites`)."""

from __future__ import annotations

from .proposer import PromptLookup
from .rewrites import CopyFollower
from .tuning import LookupTuning

__all__ = ["CopyFollower", "LookupTuning", "PromptLookup"]
