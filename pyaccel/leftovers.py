"""What an interrupted model pull leaves behind, and how a pull avoids leaving it; what
a process killed while saving a file leaves beside it.

A pull downloads into a folder `pyaccel-pull-<pid>-*` and assembles the model into
`.<file>.<pid>.partial` beside the cache's models; both go when the pull ends, however it
ends, except when the process is killed outright (SIGKILL, a power cut). The next pull
removes those of processes that no longer run; `pyaccel models list` tells of them.

Files saved atomically (an n-gram cache, decode costs) are written to `<name>.<pid>` or
`<name>.<pid>.tmp` and renamed over `<name>`: a reader sees the old file or the new one.
A process killed before the rename leaves its temporary file; the next save removes it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

PULL_DIR = "pyaccel-pull-"
PARTIAL = ".partial"
_OWNER = re.compile(rf"^(?:{re.escape(PULL_DIR)}(\d+)-.*|\..*\.(\d+){re.escape(PARTIAL)})$")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def leftovers(folder: Path) -> list[Path]:
    """Download folders and partial files in `folder` whose pulling process no longer runs."""
    out = []
    for entry in folder.iterdir() if folder.is_dir() else ():
        m = _OWNER.match(entry.name)
        if m is not None and not _running(int(m.group(1) or m.group(2))):
            out.append(entry)
    return out


def disk_usage(paths: list[Path]) -> int:
    """Bytes of the files in `paths` (folders walked)."""
    total = 0
    for path in paths:
        files = (f for f in path.rglob("*") if f.is_file()) if path.is_dir() else (path,)
        for f in files:
            try:
                total += f.stat().st_size
            except OSError:  # removed meanwhile
                pass
    return total


def remove_dead_temps(final: Path) -> None:
    """Remove the temporary files that processes killed while saving `final` left beside
    it (those of processes that still run are theirs to rename)."""
    owner = re.compile(rf"^{re.escape(final.name)}\.(\d+)(?:\.tmp)?$")
    for entry in final.parent.iterdir() if final.parent.is_dir() else ():
        m = owner.match(entry.name)
        if m is not None and entry.is_file() and not _running(int(m.group(1))):
            entry.unlink(missing_ok=True)


def remove_leftovers(folder: Path) -> None:
    """Remove `leftovers(folder)`."""
    for entry in leftovers(folder):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
