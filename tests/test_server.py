"""`pyaccel serve` as a real process on a free loopback port, driven with the official
`openai` client (no retries): answers, streams, errors, the queue, disconnects, keys."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

openai = pytest.importorskip("openai", reason="the test extra installs openai")
httpx = pytest.importorskip("httpx", reason="the test extra installs httpx")
pytest.importorskip("sse_starlette", reason="the test extra installs the server extra")

from serving import MODEL, N_CTX, health as _health, serve as _server, wait_for as _wait_for  # noqa: E402

UI_ORIGIN = "http://ui.example:5173"  # a web page allowed to call the server from a browser
KEY = "test-key-123"
# Long enough that a generation left running would be noticed: the context's end.
LONG = N_CTX - 64
# A request queued behind a cancelled generation finishes in about its own time; a
# cancellation that failed would leave hundreds of tokens to decode first.
PROMPT_AFTER_CANCEL_S = 20


@pytest.fixture(scope="module")
def server(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _server(tmp_path_factory.mktemp("serve") / "log.txt", "--method", "plain", "--api-key", KEY,
                 "--max-queue", "8", "--max-tokens", str(LONG), "--max-prompt-tokens", "512",
                 "--allow-origin", UI_ORIGIN) as (base, _):
        yield base


@pytest.fixture(scope="module")
def client(server: str) -> Any:
    return openai.OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0, timeout=120)


def _ask(client: Any, text: str, **kwargs: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}],
                                          **{"temperature": 0, **kwargs})


def test_models_and_health(server: str, client: Any) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]
    health = _health(server)  # no key needed
    assert health["status"] == "ok" and health["max_queue"] == 8


def test_a_browser_page_of_an_allowed_origin_may_call(server: str) -> None:
    """CORS: the preflight a browser sends before a page's cross-origin POST."""
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    ok = httpx.options(f"{server}/v1/chat/completions", headers={"Origin": UI_ORIGIN, **ask}, timeout=5)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == UI_ORIGIN
    other = httpx.options(f"{server}/v1/chat/completions", headers={"Origin": "http://elsewhere.example", **ask},
                          timeout=5)
    assert "access-control-allow-origin" not in other.headers


def test_chat_completion(client: Any) -> None:
    r = _ask(client, "Name three colours.", max_tokens=8)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8 and r.usage.total_tokens == r.usage.prompt_tokens + 8
    t = r.model_extra["timings"]
    assert t["method"] == "plain" and t["tau"] == pytest.approx(1.0) and t["tokens_per_s"] > 0
    assert {"prompt_s", "decode_s", "drafted", "accepted", "cached_prompt_tokens"} <= set(t)


def test_stream_equals_answer(client: Any) -> None:
    whole = _ask(client, "Describe a cat.", max_tokens=10)
    chunks = list(_ask(client, "Describe a cat.", max_tokens=10, stream=True))
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:])
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.usage is None for c in chunks)  # OpenAI sends usage only when asked
    assert chunks[-1].model_extra["timings"]["method"] == "plain"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content


def test_a_stream_sends_its_usage_last_when_asked(client: Any) -> None:
    """As OpenAI: stream_options.include_usage adds a chunk with no choices after the last one."""
    chunks = list(_ask(client, "Describe a dog.", max_tokens=6, stream=True, stream_options={"include_usage": True}))
    *answer, tail = chunks
    assert tail.choices == [] and tail.usage.completion_tokens == 6
    assert tail.usage.total_tokens == tail.usage.prompt_tokens + 6
    assert answer[-1].choices[0].finish_reason == "length" and all(c.usage is None for c in answer)


def test_completion(client: Any) -> None:
    r = client.completions.create(model=MODEL, prompt="def add(a, b):", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text and r.usage.completion_tokens == 8
    streamed = client.completions.create(model=MODEL, prompt="def add(a, b):", max_tokens=8, temperature=0,
                                         stream=True)
    assert "".join(c.choices[0].text for c in streamed) == r.choices[0].text
    cold = client.completions.create(model=MODEL, prompt="def add(a, b):", max_tokens=8, temperature=0,
                                     extra_body={"cache_prompt": False})  # as llama.cpp's server takes it
    assert cold.model_extra["timings"]["cached_prompt_tokens"] == 0


def test_errors(server: str, client: Any) -> None:
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "model_not_found"
    for bad in (dict(temperature=5), dict(max_tokens=0), dict(n=2), dict(top_p=0), dict(stop=["x", ""])):
        with pytest.raises(openai.BadRequestError) as e:
            _ask(client, "hi", **bad)
        assert e.value.body["param"] == next(iter(bad)), e.value.body
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=[])
    assert e.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as e:
        _ask(client, "word " * 600, max_tokens=2)
    assert e.value.body["code"] == "context_length_exceeded"
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    raw = httpx.post(f"{server}/v1/chat/completions", content=b"{not json", headers=headers)
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"
    raw = httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL}, headers=headers)
    assert raw.status_code == 400 and raw.json()["error"]["param"] == "messages"
    body = json.dumps({"model": MODEL, "prompt": "a\ud800b", "max_tokens": 2})  # a lone surrogate, escaped
    raw = httpx.post(f"{server}/v1/completions", content=body.encode(), headers=headers)
    assert raw.status_code == 400 and raw.json()["error"]["param"] == "prompt", raw.text
    assert httpx.get(f"{server}/v1/nowhere", headers=headers).json()["error"]["message"]


def test_api_key(server: str) -> None:
    wrong = openai.OpenAI(base_url=f"{server}/v1", api_key="wrong-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        wrong.models.list()
    assert e.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        _ask(wrong, "hi", max_tokens=2)
    # The openai client insists on a key: no Authorization header at all, through httpx.
    missing = httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL, "messages": []})
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"


def test_concurrent_requests_in_order(server: str, client: Any) -> None:
    prompts = [f"{word} is a word. Say it." for word in
               ("Apple", "Bridge", "Cloud", "Desert", "Engine", "Forest", "Garden", "Harbor")]
    expected = [_ask(client, p, max_tokens=6).choices[0].message.content for p in prompts]
    done: list[int] = []
    answers: dict[int, str] = {}

    def one(i: int) -> None:
        answers[i] = _ask(client, prompts[i], max_tokens=6).choices[0].message.content
        done.append(i)

    # A stream holds the model while the eight arrive, one after the other.
    blocker = _ask(client, "Tell a long story.", max_tokens=LONG, stream=True)
    next(iter(blocker))
    _wait_for(server, "running", 1)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for i, t in enumerate(threads, 1):
        t.start()
        _wait_for(server, "waiting", i)
    blocker.close()
    for t in threads:
        t.join(120)
    assert done == list(range(len(prompts)))
    assert [answers[i] for i in range(len(prompts))] == expected


def test_disconnect_frees_the_model(server: str, client: Any) -> None:
    stream = _ask(client, "Tell a long story.", max_tokens=LONG, stream=True)
    pieces = 0
    for chunk in stream:
        pieces += bool(chunk.choices[0].delta.content)
        if pieces == 2:
            break
    stream.close()
    t0 = time.monotonic()
    assert _ask(client, "Say hi.", max_tokens=4).usage.completion_tokens == 4
    assert time.monotonic() - t0 < PROMPT_AFTER_CANCEL_S
    # A non-streaming client that gives up is noticed too.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server}/v1/chat/completions", timeout=2.0, headers={"Authorization": f"Bearer {KEY}"},
                   json={"model": MODEL, "messages": [{"role": "user", "content": "Another long story."}],
                         "max_tokens": LONG})
    t0 = time.monotonic()
    assert _ask(client, "Say bye.", max_tokens=4).usage.completion_tokens == 4
    assert time.monotonic() - t0 < PROMPT_AFTER_CANCEL_S
    assert _health(server)["running"] == 0


def test_full_queue_is_503(gemma_path: Path, tmp_path: Path) -> None:
    with _server(tmp_path / "log.txt", "--max-queue", "1") as (base, _):
        small = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
        running = _ask(small, "Tell a long story.", max_tokens=LONG, stream=True)
        next(iter(running))
        _wait_for(base, "running", 1)
        waiting: list[Any] = []
        t = threading.Thread(target=lambda: waiting.append(_ask(small, "Hi.", max_tokens=2)))
        t.start()
        _wait_for(base, "waiting", 1)
        with pytest.raises(openai.InternalServerError) as e:
            _ask(small, "Hi again.", max_tokens=2)
        assert e.value.status_code == 503 and e.value.body["code"] == "queue_full"
        running.close()  # frees the model for the waiting request
        t.join(60)
        assert waiting and waiting[0].usage.completion_tokens == 2


def test_a_stream_open_at_shutdown_ends_with_an_error_and_done(gemma_path: Path, tmp_path: Path) -> None:
    """SIGTERM while an answer streams: the client learns the answer was cut, and the
    stream still ends as a stream should."""
    with _server(tmp_path / "log.txt", "--method", "plain") as (base, proc):
        body = {"model": MODEL, "stream": True, "max_tokens": LONG,
                "messages": [{"role": "user", "content": "Tell a long story."}]}
        events = []
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line.removeprefix("data: "))
                if len(events) == 5:
                    proc.send_signal(signal.SIGTERM)
        assert events[-1] == "[DONE]"
        assert json.loads(events[-2])["error"]["code"] == "server_shutting_down"
        assert len(events) < LONG  # cut, not run to its end


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_request_open_at_shutdown_gets_a_clean_503(gemma_path: Path, tmp_path: Path, stop: int) -> None:
    """A server stopped while a non-streaming answer is generated, and another waits behind
    it: both clients get an OpenAI-style 503 saying why, and the log holds no traceback."""
    log = tmp_path / "log.txt"
    with _server(log, "--method", "plain") as (base, proc):
        body = {"model": MODEL, "max_tokens": LONG, "temperature": 0,
                "messages": [{"role": "user", "content": "Count from one to one thousand in words."}]}
        answers: list[Any] = []

        def ask() -> None:
            answers.append(httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60))

        threads = [threading.Thread(target=ask) for _ in range(2)]
        threads[0].start()
        _wait_for(base, "running", 1)
        threads[1].start()
        _wait_for(base, "waiting", 1)
        proc.send_signal(stop)
        for t in threads:
            t.join(60)
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text()
    assert [a.status_code for a in answers] == [503, 503], [a.text for a in answers]
    for a in answers:
        error = a.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "server_shutting_down")
        assert "retry" in error["message"]
    assert "Traceback" not in log.read_text()


def test_max_tokens_caps_a_larger_request(gemma_path: Path, tmp_path: Path) -> None:
    """Chat UIs ask for more tokens than a server allows: --max-tokens caps the request (the
    answer is the one a request for exactly the cap gets) and timings say so."""
    with _server(tmp_path / "log.txt", "--method", "plain", "--max-tokens", "6") as (base, _):
        small = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
        cold = {"extra_body": {"cache_prompt": False}}  # each answer made as the first one was
        capped = _ask(small, "Tell a long story.", max_tokens=100_000)
        assert (capped.usage.completion_tokens, capped.choices[0].finish_reason) == (6, "length")
        assert capped.model_extra["timings"]["max_tokens"] == 6
        assert capped.model_extra["timings"]["max_tokens_capped"] is True
        exact = _ask(small, "Tell a long story.", max_tokens=6, **cold)
        assert exact.choices[0].message.content == capped.choices[0].message.content
        assert exact.model_extra["timings"]["max_tokens_capped"] is False
        fewer = _ask(small, "Tell a long story.", max_tokens=3, **cold)
        assert fewer.usage.completion_tokens == 3 and fewer.model_extra["timings"]["max_tokens"] == 3
        last = list(_ask(small, "Tell a long story.", max_tokens=50, stream=True, **cold))[-1]
        assert last.model_extra["timings"]["max_tokens"] == 6
        assert last.model_extra["timings"]["max_tokens_capped"] is True
        for bad in (0, -3, "7", 2.5, True):
            raw = httpx.post(f"{base}/v1/chat/completions", timeout=30,
                             json={"model": MODEL, "max_tokens": bad, "messages": [{"role": "user", "content": "hi"}]})
            assert raw.status_code == 400 and raw.json()["error"]["param"] == "max_tokens", raw.text


def _learnt_samples(home: Path) -> int:
    files = list((home / "costs").glob("*.learnt.json"))
    assert len(files) == 1, files
    return sum(len(times) for *_, times in json.loads(files[0].read_text())["cells"])


def test_sigterm_closes_the_model_and_exits_0(gemma_path: Path, tmp_path: Path) -> None:
    """A server stopped with SIGTERM (systemd, docker stop, kill) runs its cleanup as
    Ctrl-C does: the Model saves the decode costs learnt since the last periodic save."""
    home = tmp_path / "home"
    with _server(tmp_path / "log.txt", model=str(gemma_path), env={"PYACCEL_HOME": str(home)}) as (base, proc):
        small = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
        model_id = small.models.list().data[0].id  # opened by path, the model is named by its file
        r = small.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "Count to ten."}],
                                          max_tokens=16, temperature=0)
        assert r.usage.completion_tokens > 0
        saved = _learnt_samples(home)  # by the calibration of the first request, just before it ran
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, (tmp_path / "log.txt").read_text()
    assert _learnt_samples(home) > saved  # the request's own decodes


# ---- model-free: the pieces under the routes ----------------------------------------------


def test_request_validation_names_the_parameter() -> None:
    from pydantic import ValidationError

    from pyaccel.server.errors import from_validation
    from pyaccel.server.schemas import ChatRequest, CompletionRequest

    ok = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                     "max_completion_tokens": 5, "stop": "x", "user": "ignored"})
    assert ok.max_tokens == 5 and ok.stops == ["x"] and ok.temperature == 0.0
    for body, param in (({"model": "m", "messages": [], "n": 1}, "messages"),
                        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 3}, "n"),
                        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": 1.5}, "top_p"),
                        ({"model": "m", "messages": [{"role": "bot", "content": "hi"}]}, "messages.0.role")):
        with pytest.raises(ValidationError) as e:
            ChatRequest.model_validate(body)
        err = from_validation(e.value)
        assert (err.status, err.param) == (400, param)
    with pytest.raises(ValidationError):
        CompletionRequest.model_validate({"model": "m", "prompt": ["a", "b"]})
    hi = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for extra, param in (({"top_k": 2**31}, "top_k"), ({"frequency_penalty": 0.5}, "frequency_penalty"),
                         ({"presence_penalty": 1}, "presence_penalty"), ({"logit_bias": {"1": 5}}, "logit_bias"),
                         ({"response_format": {"type": "json_object"}}, "response_format"),
                         ({"functions": [{"name": "f"}]}, "functions"),
                         ({"max_tokens": "3"}, "max_tokens"), ({"max_tokens": True}, "max_tokens"),
                         ({"seed": 1.5}, "seed")):
        with pytest.raises(ValidationError) as e:
            ChatRequest.model_validate({**hi, **extra})
        assert from_validation(e.value).param == param, extra


def test_null_is_the_default_as_openai_allows() -> None:
    """Clients that send every field they know, unset ones as null, get the defaults."""
    from pyaccel.server.schemas import ChatRequest

    nulls = dict.fromkeys(("temperature", "top_p", "top_k", "min_p", "n", "stream", "presence_penalty",
                           "frequency_penalty", "logit_bias", "response_format", "seed", "stop", "max_tokens"))
    req = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **nulls})
    assert (req.temperature, req.top_p, req.top_k, req.n, req.stream, req.stops) == (0.0, 1.0, 0, 1, False, [])
    assert ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                       "response_format": {"type": "text"}}).response_format == {"type": "text"}


def test_a_failed_generation_is_the_servers_fault_unless_the_prompt_overflows() -> None:
    from pyaccel.errors import ContextOverflowError
    from pyaccel.server.errors import from_generation

    overflow = from_generation(ContextOverflowError("the prompt does not fit"))
    assert (overflow.status, overflow.body()["error"]["code"]) == (400, "context_length_exceeded")
    for exc in (ValueError("tree_flagged_products: ..."), TypeError("bad"), RuntimeError("decode failed")):
        err = from_generation(exc)
        assert err.status == 500 and err.body()["error"]["type"] == "server_error"
        assert type(exc).__name__ in err.body()["error"]["message"]


class _FakeGenerator:
    """Stands in for pyaccel.Generator: yields the prompt back, one piece per item."""

    def __init__(self) -> None:
        self.closed: list[list[int]] = []

    def stream(self, prompt: list[int], **options: Any) -> Iterator[Any]:
        assert isinstance(options.get("cancel"), threading.Event)  # a cancelled job stops its prompt's evaluation
        try:
            for tok in prompt:
                time.sleep(0.01)
                yield str(tok)
        finally:
            self.closed.append(prompt)


def test_scheduler_runs_in_order_and_refuses_when_full() -> None:
    import asyncio

    from pyaccel.server.scheduler import Job, QueueFullError, Scheduler, SchedulerClosedError, Work

    async def scenario() -> tuple[list[str], list[list[int]]]:
        gen = _FakeGenerator()
        scheduler = Scheduler(max_waiting=2)
        scheduler.start()
        jobs = [Job(Work(gen, [i] * 5)) for i in range(3)]  # type: ignore[arg-type]
        scheduler.submit(jobs[0])
        while scheduler.load() != (1, 0):  # the worker has taken it
            await asyncio.sleep(0.001)
        scheduler.submit(jobs[1])
        scheduler.submit(jobs[2])
        with pytest.raises(QueueFullError):
            scheduler.submit(Job(Work(gen, [9])))  # type: ignore[arg-type]
        jobs[1].cancel()  # its client left while it waited: it never runs
        texts = []
        for job in (jobs[0], jobs[2]):  # a loop: Python 3.10 has no async comprehension inside another
            texts.append("".join([p async for p in job.items()]))
        scheduler.close()
        with pytest.raises(SchedulerClosedError):  # a shutting-down server, not a full queue
            scheduler.submit(Job(Work(gen, [9])))  # type: ignore[arg-type]
        return texts, gen.closed

    texts, ran = asyncio.run(scenario())
    assert texts == ["00000", "22222"] and ran == [[0] * 5, [2] * 5]


def test_a_sampling_value_out_of_range_names_its_parameter() -> None:
    from pyaccel.server.app import Limits, _options
    from pyaccel.server.errors import APIError
    from pyaccel.server.schemas import ChatRequest

    req = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": -5})
    with pytest.raises(APIError) as e:
        _options(req, Limits(max_body_bytes=1000, max_prompt_tokens=10, max_tokens=10))
    assert (e.value.status, e.value.param) == (400, "seed")
