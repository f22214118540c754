"""The `pyaccel` command line: generate, models, ngram, bench."""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["build_parser", "main"]
