"""The fault suite, kill -9: a process killed in the middle of saving a dynamic n-gram
cache, learnt decode costs or a model pull leaves the file whole, old or new.

Each saver (tests/fault_savers.py) runs in a child process that saves in a loop; the
test kills it with SIGKILL several times, at a random moment or the moment a save's
temporary file appears (a write in progress), and reads the file as the next run would:
it must be one of the versions the saver writes, never a torn mix. The
next save (or pull) removes what the killed one left beside it. A file damaged in a way
a kill cannot do (a crash of the machine, a full disk) is dropped with a warning."""

from __future__ import annotations

import hashlib
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import fault_savers
import fake_mirror
from pyaccel import _core, registry
from pyaccel.costs import CostSamples
from pyaccel.methods.ngram import NgramCacheDrafter
from pyaccel.types import SamplingConfig

pytestmark = pytest.mark.faults

SEED = 58
TRIALS = 6
# Kills at a random moment land this long after the saver's loop begins: over several saves.
KILL_AFTER_S = (0.1, 1.5)
READY_TIMEOUT_S = 60
# A kill at a write waits at most this long for a save's temporary file to appear.
WRITE_WAIT_S = 20
SAVERS = Path(fault_savers.__file__)


def _kill_mid_save(kind: str, folder: Path, final: Path, delay: float | None) -> tuple[bool, bool]:
    """Start the `kind` saver, let it save for `delay` seconds (None: until a temporary
    file of a save of `final` appears), kill it with SIGKILL. (Was it inside a save, did
    it leave a temporary file of its own?)"""
    env = {**os.environ, "PYACCEL_HOME": str(folder / "home")}
    proc = subprocess.Popen([sys.executable, str(SAVERS), kind, str(folder)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        assert line.strip() == b"ready", line + proc.stdout.read() if proc.poll() is not None else line
        if delay is None:
            _wait_for_a_write(final)
        else:
            time.sleep(delay)
        assert proc.poll() is None, proc.stdout.read().decode()  # it saves for ever: only the kill ends it
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        said = proc.stdout.read().split()
        own = re.compile(rf"[.-]{proc.pid}([.-]|$)")
        return bool(said) and said[-1] == b"saving", any(own.search(p.name) for p in _temps(final))
    finally:
        proc.kill()
        proc.wait()


def _wait_for_a_write(final: Path) -> None:
    deadline = time.monotonic() + WRITE_WAIT_S
    while not _temps(final):
        assert time.monotonic() < deadline, f"no save of {final} began in {WRITE_WAIT_S} s"
        time.sleep(0.0005)


def _temps(final: Path) -> list[Path]:
    """What a save of `final` writes before renaming it over `final`, left by a kill."""
    folder = final.parent
    return sorted(p for p in folder.iterdir() if p.name != final.name and
                  (p.name.startswith(f"{final.name}.") and not p.name.endswith(".lock")
                   or p.name.startswith(f".{final.name}.") or p.name.startswith("pyaccel-pull-"))) \
        if folder.is_dir() else []


def _ngram_version(path: Path) -> str:
    """Which version the dynamic cache file is: "k generations" (k counts of each n-gram
    in the prompt, checked against a cache made of k merges), else a failure."""
    saved = _core.NgramCache.load(path)  # raises on a torn file
    prompt = fault_savers.prompt_tokens()
    k = sum(saved.counts(prompt[:1]).values()) // sum(_context(prompt).counts(prompt[:1]).values())
    want = _core.NgramCache()
    for _ in range(k):
        want.merge(_context(prompt))
    ref = path.with_name("reference.ngc")
    want.save(str(ref))
    assert ref.read_bytes() == path.read_bytes(), f"the cache is no version the saver writes (k={k})"
    ref.unlink()
    return f"{k} generations"


def _context(prompt: list[int]) -> "_core.NgramCache":
    cache = _core.NgramCache()
    cache.update(np.asarray(prompt, dtype=np.int32), 0)
    return cache


def _versions_by_bytes(make: Callable[[Path, str], None], where: Path) -> dict[bytes, str]:
    """{file content: version} of what `make(path, version)` writes, made here."""
    where.mkdir()
    out = {}
    for version in fault_savers.VERSIONS:
        make(where / version, version)
        out[(where / version).read_bytes()] = version
    return out


def _trials(kind: str, final: Path, tmp_path: Path, version_of: Callable[[Path], str]) -> set[str]:
    """Kill the saver TRIALS times, every other time at a write; the versions found. Some
    kills must land inside a save, and some while it writes (a temporary file left)."""
    rng = random.Random(f"{SEED}-{kind}")
    found, in_save, mid_write = set(), 0, 0
    for trial in range(TRIALS):
        saving, writing = _kill_mid_save(kind, tmp_path, final, rng.uniform(*KILL_AFTER_S) if trial % 2 else None)
        in_save, mid_write = in_save + saving, mid_write + writing
        if final.exists():
            found.add(version_of(final))  # fails on a torn file
    print(f"\nfault suite, kill -9 ({kind}): {TRIALS} kills, {in_save} inside a save, {mid_write} of them while "
          f"it wrote; torn files: 0; versions found {sorted(found)}")
    assert found and in_save and mid_write
    return found


def test_a_killed_dynamic_ngram_cache_save_leaves_a_whole_cache(tmp_path: Path) -> None:
    final = tmp_path / fault_savers.NGRAM_FILE
    _trials("ngram", final, tmp_path, _ngram_version)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the next run finds nothing to warn of
        drafter = NgramCacheDrafter(dynamic_path=final, length=2)
        assert len(drafter.dynamic_cache) > 0
        drafter.begin([1, 2, 3, 1, 2, 3], SamplingConfig())
        drafter.end()
    assert _temps(final) == []  # the save removed what the killed ones left
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])  # what a kill cannot do
    with pytest.warns(UserWarning, match="dynamic n-gram cache .* is damaged .*truncated.* starts empty"):
        drafter = NgramCacheDrafter(dynamic_path=final, length=2)
        assert len(drafter.dynamic_cache) == 0
        drafter.begin([1, 2, 3, 1, 2, 3], SamplingConfig())
        drafter.end()
    assert len(_core.NgramCache.load(final)) > 0  # saved over with this generation's


def test_a_killed_learnt_costs_save_leaves_a_whole_file(tmp_path: Path) -> None:
    final = tmp_path / fault_savers.COSTS_FILE
    versions = _versions_by_bytes(fault_savers.save_costs, tmp_path / "reference")
    _trials("costs", final, tmp_path, lambda p: versions[p.read_bytes()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        samples = CostSamples.load(final)
        assert len(samples.cells) == len(fault_savers.cost_cells())
        samples.add("verify", 1, 0, 1e-3)
        samples.save()
    assert _temps(final) == []
    final.write_text(final.read_text()[:1000])
    with pytest.warns(UserWarning, match="dropping .*learnt decode costs .* damaged .* learnt again"):
        assert CostSamples.load(final).cells == {}


def test_a_killed_model_pull_leaves_the_old_model_or_the_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from pyaccel.cli import main

    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))
    mirrors = [fault_savers.mirror(tmp_path, v) for v in fault_savers.VERSIONS]
    payloads = {hashlib.sha256(fault_savers.payload(v)).hexdigest(): v for v in fault_savers.VERSIONS}
    final = tmp_path / "home" / "models" / "fake.gguf"
    with capsys.disabled():  # the trials' summary is for the suite's reader
        _trials("pull", final, tmp_path, lambda p: payloads[hashlib.sha256(p.read_bytes()).hexdigest()])
    # The last trial's kill may have missed a write, and each pull removes what dead ones
    # left: one more kill, at a write, leaves something for the next run to tell of.
    assert any(_kill_mid_save("pull", tmp_path, final, None)[1] for _ in range(5)), "no kill landed mid-write"
    spec, wheels = mirrors[0]
    fake_mirror.install(monkeypatch.setattr, spec, wheels)  # type: ignore[arg-type]
    capsys.readouterr()
    assert main(["models", "list"]) == 0
    assert "killed model pulls left" in capsys.readouterr().err  # the next run tells of them
    registry.pull("fake", progress=False, force=True)
    assert _temps(final) == [] and final.read_bytes() == fault_savers.payload("a")
    final.write_bytes(final.read_bytes()[:1000])
    assert registry.resolve_model("fake", progress=False).read_bytes() == fault_savers.payload("a")
    assert "it is damaged and is fetched again" in capsys.readouterr().err
