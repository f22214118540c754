"""Checks of the paths pyaccel writes, made before the work whose result they hold."""

from __future__ import annotations

import os
from pathlib import Path


def blocked_by_file(path: str | os.PathLike[str]) -> Path | None:
    """The nearest existing folder-to-be on the way to `path` that is a file, not a folder
    (creating `path`'s folders would fail there); None when there is none."""
    for parent in Path(path).parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def check_file_path(path: str | os.PathLike[str], what: str) -> None:
    """Can a file be written at `path`? ValueError naming `what` and the reason if not: a
    folder is there, or a file stands where one of its folders would be."""
    if Path(path).is_dir():
        raise ValueError(f"{os.fspath(path)!r} is a folder: give the {what} a file name in it")
    blocker = blocked_by_file(path)
    if blocker is not None:
        raise ValueError(f"cannot write the {what} at {os.fspath(path)!r}: {os.fspath(blocker)!r} is a file, "
                         "not a folder")
