"""Machine and model fingerprints for bench results: enough to tell two measurements' set-ups apart."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Model

_CPUINFO = Path("/proc/cpuinfo")
# CPU features that decide which llama.cpp kernels run (x86 and Arm names as the kernel spells them).
KERNEL_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "sve", "i8mm")


def parse_cpuinfo(text: str) -> tuple[str | None, list[str]]:
    """The CPU's model name and the KERNEL_FLAGS it reports, from the text of /proc/cpuinfo."""
    name: str | None = None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "Hardware") and name is None:
            name = value.strip() or None
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return name, [f for f in KERNEL_FLAGS if f in flags]


def _cpu() -> tuple[str | None, list[str]]:
    try:
        name, flags = parse_cpuinfo(_CPUINFO.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        name, flags = None, []
    return name or platform.processor() or None, flags


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit(path: Path) -> str | None:
    """The commit of the checkout holding `path` (a "+dirty" suffix for local changes); None outside one."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], check=False, cwd=path, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return commit + ("+dirty" if dirty else "")


def machine_fingerprint() -> dict[str, Any]:
    """CPU, cores, OS, Python and the versions of llama-cpp-python and pyaccel (with its commit)."""
    name, flags = _cpu()
    return {
        "cpu": name, "cpu_flags": flags, "machine": platform.machine(),
        "cores": os.cpu_count(), "usable_cores": _usable_cores(),
        "os": platform.platform(), "python": platform.python_version(),
        "llama_cpp_python": _version("llama_cpp_python"), "pyaccel": _version("pyaccel"),
        "pyaccel_commit": git_commit(Path(__file__).resolve().parent),
    }


def model_fingerprint(model: "Model") -> dict[str, Any]:
    """The model file's name and size, with the registry's name, sha256 and licence when it is a registry model."""
    spec = model.registry_spec
    out: dict[str, Any] = {"file": model.path.name, "size": model.path.stat().st_size}
    if spec is not None:
        out.update(registry_name=spec.name, sha256=spec.sha256, license=spec.license, draft=spec.draft)
    return out


def machine_line(machine: dict[str, Any]) -> str:
    """One line for a report: CPU, flags, cores, OS, versions."""
    flags = ", ".join(machine.get("cpu_flags") or []) or "no flags read"
    commit = (machine.get("pyaccel_commit") or "unknown")[:12]
    dirty = " (local changes)" if str(machine.get("pyaccel_commit", "")).endswith("+dirty") else ""
    return (f"{machine.get('cpu') or 'unknown CPU'} ({flags}); {machine.get('usable_cores')} of "
            f"{machine.get('cores')} cores; {machine.get('os')}; llama-cpp-python {machine.get('llama_cpp_python')}; "
            f"pyaccel {machine.get('pyaccel')} at {commit}{dirty}")
