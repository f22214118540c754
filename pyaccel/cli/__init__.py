"""The `pyaccel` command line: generate, chat, serve, models, ngram, bench, medusa.

The commands live in `commands`; this package's `main` is the console entry point, and it
imports them inside its own guard, so that a Ctrl-C while they load (most of a second on a
slow machine) exits as quietly as one during a command."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag: nothing slow is imported before main's guard
if TYPE_CHECKING:
    import argparse
    from typing import Sequence

__all__ = ["build_parser", "main"]

INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `pyaccel` command; its exit status. A Ctrl-C at any point, also while the
    commands' modules load and the arguments are parsed, exits quietly with status 130."""
    try:
        from .commands import main as run

        return run(argv)
    except KeyboardInterrupt:
        return INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (for tests and documentation tools)."""
    from .commands import build_parser as build

    return build()
