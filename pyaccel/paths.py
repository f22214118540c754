"""Checks of the paths pyaccel writes, made before the work whose result they hold, and a
lock for files several processes read, merge into and write."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def blocked_by_file(path: str | os.PathLike[str]) -> Path | None:
    """The nearest existing folder-to-be on the way to `path` that is a file, not a folder
    (creating `path`'s folders would fail there); None when there is none."""
    for parent in Path(path).parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def check_file_path(path: str | os.PathLike[str], label: str, example: str,
                    fix: str = "choose another path") -> None:
    """Can a file be written at `path`, it or its missing folders created? Checked before the
    work whose result it holds. ValueError starting "{label} {path}" if not: a folder is
    there (or the path ends in a separator; `example` is a file name to suggest in it), a
    file stands where one of its folders would be, or there is no permission to write it
    (`fix` says what to do)."""
    text, out = os.fspath(path), Path(path)
    if out.is_dir() or not out.name or text.endswith(("/", os.sep)):
        raise ValueError(f"{label} {text} is a folder: give a file in it (e.g. {out / example})")
    blocker = blocked_by_file(out)
    if blocker is not None:
        raise ValueError(f"{label} {text}: {os.fspath(blocker)} is a file, not a folder: {fix}")
    target = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not os.access(target, os.W_OK if target is out else os.W_OK | os.X_OK):
        raise ValueError(f"{label} {text}: no permission to write {target}: {fix}")


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Exclusive use of `path` among processes that take this lock too (a `.lock` file
    beside it, locked with flock): for a read-merge-write that must not lose another
    process's write. Where there is no flock (Windows), or the lock file cannot be made,
    it does not lock (the write stays atomic; a concurrent merge may then lose samples)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock = Path(f"{os.fspath(path)}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
