"""The fault suite, load: 8 clients x 25 mixed requests against one `pyaccel serve`.

Requests stream or not; some clients leave mid-stream, some give up on a request before
its answer. Every answer that finishes must equal the same request made alone (greedy),
the queue must never hold more than --max-queue (a full queue is refused at once, 503,
and the client retries), and the server's memory must come back to where it was."""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="the test extra installs httpx")
pytest.importorskip("sse_starlette", reason="the test extra installs the server extra")

from serving import MODEL, health, serve, wait_for  # noqa: E402

pytestmark = pytest.mark.faults

SEED = 58
CLIENTS, REQUESTS_EACH = 8, 25
MAX_QUEUE = 4  # fewer than the clients: the queue fills, and refuses
RSS_SLACK_MIB = 50
# A refusal of a full queue is answered at once, not after a wait.
REFUSAL_S = 5.0
CHAT_PROMPTS = ["Name a fruit.", "Say hello.", "Count to five.", "What is rain?", "Name a tree.", "Say goodbye."]
TEXT_PROMPTS = ["def add(a, b):", "The sky is", "import os\n", "Once upon a time"]
# How a request is made: answered whole, streamed to its end, left mid-stream (after two
# pieces), or given up on before its answer (a non-streaming client that times out).
WHOLE, STREAM, LEAVE, GIVE_UP = "whole", "stream", "leave", "give up"
MODES = [(WHOLE, 4), (STREAM, 3), (LEAVE, 2), (GIVE_UP, 2)]


@dataclass(frozen=True)
class Ask:
    chat: bool
    prompt: str
    max_tokens: int

    def body(self, stream: bool) -> dict[str, Any]:
        words = ({"messages": [{"role": "user", "content": self.prompt}]} if self.chat else {"prompt": self.prompt})
        return {"model": MODEL, "max_tokens": self.max_tokens, "temperature": 0, "stream": stream, **words}

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"


@dataclass
class Tally:
    """What the clients saw, added to under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: int = 0
    left: int = 0
    given_up: int = 0
    refused: int = 0
    slowest_refusal_s: float = 0.0
    wrong: list[str] = field(default_factory=list)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


def _asks() -> list[Ask]:
    return ([Ask(True, p, n) for p in CHAT_PROMPTS for n in (4, 8)] +
            [Ask(False, p, n) for p in TEXT_PROMPTS for n in (4, 8)])


def _plan(seed: int) -> list[list[tuple[Ask, str]]]:
    """Each client's requests, the same on every run."""
    rng = random.Random(seed)
    asks, modes = _asks(), [m for m, weight in MODES for _ in range(weight)]
    return [[(rng.choice(asks), rng.choice(modes)) for _ in range(REQUESTS_EACH)] for _ in range(CLIENTS)]


def _text(ask: Ask, choice: dict[str, Any]) -> str:
    return str(choice["message"]["content"] if ask.chat else choice["text"])


def _piece(ask: Ask, chunk: dict[str, Any]) -> tuple[str, str | None]:
    choice = chunk["choices"][0]
    return (choice["delta"].get("content") or "") if ask.chat else choice["text"], choice["finish_reason"]


def _refused(r: Any, sent: float, tally: Tally) -> bool:
    """Is `r` a full queue's refusal? Counted, and checked to be one."""
    if r.status_code != 503:
        return False
    r.read()
    assert r.json()["error"]["code"] == "queue_full", r.text
    with tally.lock:
        tally.refused += 1
        tally.slowest_refusal_s = max(tally.slowest_refusal_s, time.monotonic() - sent)
    return True


def _once(client: Any, ask: Ask, mode: str, want: tuple[str, str], tally: Tally, rng: random.Random) -> bool:
    """One try of one request; False when the queue was full (try again)."""
    sent = time.monotonic()
    if mode in (WHOLE, GIVE_UP):
        timeout = rng.uniform(0.05, 0.6) if mode == GIVE_UP else 120
        try:
            r = client.post(ask.path, json=ask.body(False), timeout=timeout)
        except httpx.TimeoutException:
            tally.add(given_up=1)
            return True
        if _refused(r, sent, tally):
            return False
        got = (_text(ask, r.json()["choices"][0]), r.json()["choices"][0]["finish_reason"])
    else:
        with client.stream("POST", ask.path, json=ask.body(True), timeout=120) as r:
            if _refused(r, sent, tally):
                return False
            pieces, finish = [], None
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line.removeprefix("data: "))
                assert "error" not in chunk, chunk
                piece, finish = _piece(ask, chunk) if chunk["choices"] else ("", finish)
                pieces.append(piece)
                if mode == LEAVE and sum(map(bool, pieces)) == 2:
                    tally.add(left=1)
                    return True  # leaving the block closes the connection mid-stream
        got = ("".join(pieces), finish)
    if got == want:
        tally.add(finished=1)
    else:
        with tally.lock:
            tally.wrong.append(f"{ask} {mode}: {got} != alone {want}")
    return True


def _client(base: str, plan: list[tuple[Ask, str]], want: dict[Ask, tuple[str, str]], tally: Tally,
            seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=base) as client:
        for ask, mode in plan:
            while not _once(client, ask, mode, want[ask], tally, rng):
                time.sleep(rng.uniform(0.15, 0.4))  # a full queue: back off, then try again


def _watch(base: str, stop: threading.Event, seen: list[tuple[int, int]]) -> None:
    while not stop.is_set():
        h = health(base)
        seen.append((h["running"], h["waiting"]))
        time.sleep(0.05)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _alone(base: str) -> dict[Ask, tuple[str, str]]:
    """Every request's answer made alone, one after another: the reference."""
    want = {}
    with httpx.Client(base_url=base, timeout=120) as client:
        for ask in _asks():
            r = client.post(ask.path, json=ask.body(False))
            assert r.status_code == 200, r.text
            want[ask] = (_text(ask, r.json()["choices"][0]), r.json()["choices"][0]["finish_reason"])
    return want


def _run_clients(base: str, plans: list[list[tuple[Ask, str]]], want: dict[Ask, tuple[str, str]],
                 tally: Tally) -> None:
    threads = [threading.Thread(target=_client, args=(base, plan, want, tally, SEED + c))
               for c, plan in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a client hung"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's RSS from /proc")
def test_eight_clients_of_mixed_requests_get_the_answers_each_gets_alone(gemma_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with serve(log, "--method", "plain", "--max-queue", str(MAX_QUEUE)) as (base, proc):
        want = _alone(base)
        # Warm-up: every way of asking once, so that the buffers every path allocates exist.
        _run_clients(base, [[(a, m) for a in _asks()[:2] for m, _ in MODES]] * 2, want, Tally())
        wait_for(base, "running", 0)
        before = _rss_mib(proc.pid)
        tally, stop = Tally(), threading.Event()
        seen: list[tuple[int, int]] = []  # (running, waiting) as /health showed them
        watcher = threading.Thread(target=_watch, args=(base, stop, seen))
        watcher.start()
        t0 = time.monotonic()
        try:
            _run_clients(base, _plan(SEED), want, tally)
        finally:
            stop.set()
            watcher.join()
        took = time.monotonic() - t0
        wait_for(base, "running", 0)
        wait_for(base, "waiting", 0)
        after = _rss_mib(proc.pid)
        again = _alone(base)
        assert proc.poll() is None, log.read_text()
    print(f"\nfault suite, load: {CLIENTS}x{REQUESTS_EACH} requests in {took:.0f} s: {tally.finished} answered "
          f"(each as alone), {tally.left} left mid-stream, {tally.given_up} given up, {tally.refused} refusals "
          f"of a full queue (slowest {tally.slowest_refusal_s:.2f} s), most waiting {max(w for _, w in seen)}; "
          f"RSS {before:.0f} -> {after:.0f} MiB")
    assert tally.wrong == []
    assert tally.finished + tally.left + tally.given_up == CLIENTS * REQUESTS_EACH  # no answer lost
    assert max(w for _, w in seen) <= MAX_QUEUE and max(r for r, _ in seen) <= 1
    assert tally.slowest_refusal_s < REFUSAL_S
    assert again == want
    assert abs(after - before) < RSS_SLACK_MIB
    assert "Traceback" not in log.read_text(), log.read_text()
