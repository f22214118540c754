"""The fault suite, requests: `pyaccel serve` under a storm of generated bad requests.

Every request below carries at least one fault (a body that is not a JSON object, a
field of the wrong type, a number out of range, NaN, invalid UTF-8, a body too large or
one that never finishes, ...). Each must be answered with a 4xx OpenAI-style error, the
process must live through all of them, and a correct request afterwards must get the
answer it got before the storm."""

from __future__ import annotations

import json
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

httpx = pytest.importorskip("httpx", reason="the test extra installs httpx")
pytest.importorskip("sse_starlette", reason="the test extra installs the server extra")

from serving import MODEL, serve  # noqa: E402

pytestmark = pytest.mark.faults

SEED = 58
KEY = "fault-suite-key"
MAX_PROMPT_TOKENS = 512
# Short, so that the bodies that never finish are answered within the suite's time.
BODY_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 8 << 20  # ServeDefaults.max_body_bytes: the server's own limit
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
ERROR_FIELDS = {"message", "type", "param", "code"}


@dataclass(frozen=True)
class BadRequest:
    label: str  # the kind of fault, for the failure message and the counts
    path: str
    body: bytes
    headers: dict[str, str]
    method: str = "POST"


def _base(path: str, rng: random.Random) -> dict[str, Any]:
    """A correct request: every fault is made by changing one thing in one of these."""
    common: dict[str, Any] = {"model": MODEL, "max_tokens": rng.randint(1, 4), "stream": rng.random() < 0.3}
    if path == CHAT:
        return {**common, "messages": [{"role": "user", "content": rng.choice(["Say hi.", "Name a colour."])}]}
    return {**common, "prompt": rng.choice(["def f(x):", "Once upon a time"])}


def _headers(rng: random.Random) -> dict[str, str]:
    # The server reads any body as JSON: the content type a client claims does not matter.
    kind = rng.choice(["application/json", "text/plain", "application/octet-stream", None])
    return {"Authorization": f"Bearer {KEY}", **({"Content-Type": kind} if kind else {})}


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value of any shape."""
    kinds = ["int", "float", "str", "bool", "null"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 1, 2**31, -(2**63), 10**rng.randint(1, 300)])
    if kind == "float":
        return rng.choice([0.5, -1e-300, 1e308, float("nan"), float("inf"), -float("inf")])
    if kind == "str":
        return rng.choice(["", "x", "\u0000", "\ud800", "😀" * rng.randint(1, 50), "null"])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["a", "model", "messages", ""]): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


# Values that are wrong for a field whatever else the request holds: of another type, out
# of range, NaN or infinite, huge. json.dumps writes NaN and Infinity as JavaScript does,
# which Python's json (the server's) reads back.
NAN, INF = float("nan"), float("inf")
WRONG: dict[str, list[Any]] = {
    "model": [5, [], {}, True, "", "no-such-model", "x" * 5000],
    "max_tokens": ["8", True, 2.5, [], {}, 0, -1, -(10**30), INF, 1e30, NAN],
    "temperature": ["0", True, [], -0.5, -1e-300, 2.0000001, 1e308, NAN, INF, -INF, 10**400],
    "top_p": ["1", False, 0, 0.0, -0.1, 1.5, NAN, INF, 10**50],
    "top_k": ["5", 1.5, -1, -(2**70), 2**31, 2**200, NAN, True],
    "min_p": ["0", -0.01, 1.01, NAN, -INF, 1e300],
    "seed": ["1", 1.5, -2, -(10**40), 2**64, 2**300, NAN, INF],
    "stream": ["yes", 2, [], {}],
    "stream_options": ["on", 1, [], {"include_usage": "yes"}],
    "stop": [5, [1], ["a", 2], [""], ["a", "b", "c", "d", "e"], {"x": 1}, [[]]],
    "n": [2, 0, -1, 10**20, "1", 1.5],
    "presence_penalty": [0.5, -2, NAN, "0"],
    "frequency_penalty": [1, INF, []],
    "logit_bias": [{"1": 5}, "x"],
    "logprobs": [True, 5],
    "response_format": [{"type": "json_object"}, {"type": "json_schema"}, "json"],
    "cache_prompt": ["no", 0, []],
}
WRONG_CHAT: dict[str, list[Any]] = {
    "messages": [[], "hi", 5, {"role": "user", "content": "hi"}, [{"role": "bot", "content": "hi"}],
                 [{"content": "hi"}], [{"role": "user", "content": 5}],
                 [{"role": "user", "content": [{"type": "image"}]}],
                 [{"role": "user", "content": [{"type": "text", "text": 5}]}], [None], [[]]],
    "max_completion_tokens": [0, -5, "3", 1.5],
    "tools": [[{"type": "function"}]],
    "functions": [[{"name": "f"}]],
}
WRONG_COMPLETION: dict[str, list[Any]] = {
    "prompt": ["", [], [""], ["a", "b"], [-1], [10**9], [1.5], [1, "a"], None, 5, {"text": "x"}, [[1, 2]], "\ud800"],
    "echo": [True], "suffix": ["end"], "best_of": [2, 0],
}


def _wrong_field(path: str, rng: random.Random) -> BadRequest:
    fields = {**WRONG, **(WRONG_CHAT if path == CHAT else WRONG_COMPLETION)}
    name = rng.choice(sorted(fields))
    body = {**_base(path, rng), name: rng.choice(fields[name])}
    if name == "model" and body["model"] is None:
        del body["model"]
    return BadRequest(f"wrong {name}", path, json.dumps(body).encode(), _headers(rng))


def _missing_field(path: str, rng: random.Random) -> BadRequest:
    body = _base(path, rng)
    del body[rng.choice(["model", "messages" if path == CHAT else "prompt"])]
    return BadRequest("missing field", path, json.dumps(body).encode(), _headers(rng))


def _not_an_object(path: str, rng: random.Random) -> BadRequest:
    value = _json_value(rng)
    while isinstance(value, dict):
        value = _json_value(rng)
    return BadRequest("not an object", path, json.dumps(value).encode(), _headers(rng))


def _random_object(path: str, rng: random.Random) -> BadRequest:
    """An object of random fields: without "messages" / "prompt" it is never a request."""
    value = {rng.choice(["a", "model", "max_tokens", "", "\u0000"]): _json_value(rng) for _ in range(rng.randint(0, 4))}
    return BadRequest("random object", path, json.dumps(value).encode(), _headers(rng))


def _invalid_utf8(path: str, rng: random.Random) -> BadRequest:
    text = json.dumps(_base(path, rng)).encode()
    cut = text.index(b'"', text.index(b'"model"') + 8) + 1  # inside the model name's string
    junk = rng.choice([b"\xff", b"\xc3\x28", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
                       b"\xfe\xff"])
    return BadRequest("invalid UTF-8", path, text[:cut] + junk + text[cut:], _headers(rng))


def _not_json(path: str, rng: random.Random) -> BadRequest:
    text = json.dumps(_base(path, rng)).encode()
    body = rng.choice([text[: rng.randint(0, len(text) - 1)], bytes(rng.getrandbits(8) for _ in range(40)),
                       text.replace(b":", b"=", 1), b"{'model': 1}", text + b"}", b"", b"\x00" * 10])
    return BadRequest("not JSON", path, body, _headers(rng))


def _deep(path: str, rng: random.Random) -> BadRequest:
    n = rng.choice([10_000, 100_000, 1_000_000])
    nested = b"[" * n + b"]" * n
    body = nested if rng.random() < 0.5 else b'{"model": "' + MODEL.encode() + b'", "messages": ' + nested + b"}"
    return BadRequest("deeply nested", path, body, _headers(rng))


def _long_prompt(path: str, rng: random.Random) -> BadRequest:
    body = _base(path, rng)
    text = "word " * (MAX_PROMPT_TOKENS + rng.randint(10, 400))
    body.update({"messages": [{"role": "user", "content": text}]} if path == CHAT else {"prompt": text})
    return BadRequest("prompt too long", path, json.dumps(body).encode(), _headers(rng))


def _bad_key(path: str, rng: random.Random) -> BadRequest:
    headers = {"Content-Type": "application/json"}
    given = rng.choice([None, "Bearer wrong", "Basic " + KEY, "Bearer", KEY, "Bearer " + KEY + "x"])
    if given is not None:
        headers["Authorization"] = given
    return BadRequest("no or wrong key", path, json.dumps(_base(path, rng)).encode(), headers)


def _bad_route(path: str, rng: random.Random) -> BadRequest:
    where, verb = rng.choice([("/v1/nothing", "POST"), (path, "GET"), (path, "PUT"), ("/v1/chat", "POST"),
                              ("/v1/models/none", "GET"), ("/v1/completions/x", "POST")])
    return BadRequest("unknown route or verb", where, json.dumps(_base(path, rng)).encode(), _headers(rng), verb)


def _oversized(path: str, rng: random.Random) -> BadRequest:
    body = _base(path, rng)
    body["padding"] = "a" * (MAX_BODY_BYTES + rng.randint(1, 1 << 20))  # an unknown field: only its size matters
    return BadRequest("oversized", path, json.dumps(body).encode(), _headers(rng))


Maker = Callable[[str, random.Random], BadRequest]
# How often each kind of fault is drawn; oversized bodies are few (each is 8 MiB).
KINDS: list[tuple[Maker, int]] = [(_wrong_field, 120), (_missing_field, 8), (_not_an_object, 16), (_random_object, 12),
                                  (_invalid_utf8, 16), (_not_json, 16), (_deep, 6), (_long_prompt, 6), (_bad_key, 8),
                                  (_bad_route, 8), (_oversized, 3)]


def bad_requests(seed: int) -> Iterator[BadRequest]:
    """The storm, the same on every run."""
    rng = random.Random(seed)
    for make, count in KINDS:
        for _ in range(count):
            yield make(rng.choice([CHAT, COMPLETIONS]), rng)


def _check_error(status: int, body: bytes, what: BadRequest) -> None:
    assert 400 <= status < 500, f"{what.label}: {status} {body[:300]!r} for {what.body[:200]!r}"
    error = json.loads(body)["error"]
    assert set(error) == ERROR_FIELDS, f"{what.label}: {error}"
    assert isinstance(error["message"], str) and error["message"], f"{what.label}: {error}"
    assert isinstance(error["type"], str), f"{what.label}: {error}"
    assert all(error[k] is None or isinstance(error[k], str) for k in ("param", "code")), f"{what.label}: {error}"


def _slow_body(port: int, path: str) -> tuple[int, bytes]:
    """Send the headers and half a body, then nothing: the server's answer (status, body)."""
    body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT_S + 20) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:10])
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _content_length(answer):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def _content_length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


def _reference(client: Any) -> list[str]:
    """The answers of two correct requests (fresh prefills: nothing else they could depend on)."""
    key = {"Authorization": f"Bearer {KEY}"}
    ask = {"role": "user", "content": "Name three fruits."}
    chat = client.post(CHAT, headers=key, json={"model": MODEL, "messages": [ask], "max_tokens": 12,
                                                "temperature": 0, "cache_prompt": False})
    text = client.post(COMPLETIONS, headers=key, json={"model": MODEL, "prompt": "def add(a, b):", "max_tokens": 12,
                                          "temperature": 0, "cache_prompt": False})
    assert chat.status_code == text.status_code == 200, (chat.text, text.text)
    return [chat.json()["choices"][0]["message"]["content"], text.json()["choices"][0]["text"]]


def test_every_bad_request_is_a_4xx_error_and_the_server_lives_on(gemma_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with serve(log, "--method", "plain", "--api-key", KEY, "--max-prompt-tokens", str(MAX_PROMPT_TOKENS),
               "--body-timeout", str(BODY_TIMEOUT_S)) as (base, proc):
        # No headers of the client's own: a request without a key must go without one.
        with httpx.Client(base_url=base, timeout=60) as client:
            before = _reference(client)
            total = 0
            for what in bad_requests(SEED):
                r = client.request(what.method, what.path, content=what.body, headers=what.headers)
                _check_error(r.status_code, r.content, what)
                total += 1
            t0 = time.monotonic()
            slow = [_slow_body(int(base.rsplit(":", 1)[1]), path) for path in (CHAT, COMPLETIONS)]
            waited = time.monotonic() - t0
            for status, body in slow:
                _check_error(status, body, BadRequest("body never finished", CHAT, b"", {}))
                assert status == 408 and json.loads(body)["error"]["code"] == "request_timeout"
            assert waited < 2 * (2 * BODY_TIMEOUT_S + 5)
            assert proc.poll() is None, log.read_text()
            after = _reference(client)
        total += len(slow)
        print(f"\nfault suite, requests: {total} bad requests, every one a 4xx error; "
              f"the answer after the storm equals the one before")
    assert total >= 200
    assert after == before
    assert "Traceback" not in log.read_text(), log.read_text()
