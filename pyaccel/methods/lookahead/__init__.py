"""Lookahead decoding: the proposer (`proposer`), its candidate tree (`candidates`) and the
window sizes the cost model chooses among (`sizing`); the window and pool live in C++
(csrc/lookahead.h)."""

from __future__ import annotations

from .proposer import Lookahead
from .sizing import LookaheadTuning, WindowPlan, WindowSize, plan_window

__all__ = ["Lookahead", "LookaheadTuning", "WindowPlan", "WindowSize", "plan_window"]
