"""`pyaccel serve` as a real process on a free loopback port, for the server tests and the
fault suite: start it, wait for /health, read its load, stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

MODEL = "gemma-3-270m"
N_CTX = 1024
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(log: Path, *extra: str, model: str = MODEL,
          env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(the base URL, the process) of a running `pyaccel serve` (with `env` added to ours)."""
    port = free_port()
    cmd = [sys.executable, "-m", "pyaccel", "serve", "-m", model, "--n-ctx", str(N_CTX), "--threads", "1",
           "--port", str(port), *extra]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"pyaccel serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"pyaccel serve did not answer /health in {START_TIMEOUT_S}s:\n{log.read_text()}")
            time.sleep(0.2)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def health(base: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{base}/health", timeout=5).json()
    return body


def wait_for(base: str, key: str, value: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while health(base)[key] != value:
        assert time.monotonic() < deadline, f"/health never showed {key}={value}: {health(base)}"
        time.sleep(0.02)
