"""The OpenAI-compatible HTTP API over one Model: routes, authentication, limits, streaming.

    GET  /health                live, with the queue's load (no key needed)
    GET  /v1/models             the model ids served (one per method served)
    POST /v1/completions        text completion of a prompt
    POST /v1/chat/completions   the model's chat template over the messages

Every generation goes through the Scheduler (one at a time, in arrival order); a stream
is Server-Sent Events ending with `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, AsyncIterator, Mapping, TypeVar

import anyio
import uvicorn
from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..generator import Generator
from ..model import Model
from ..types import Result, SamplingConfig
from .errors import APIError, api_error_handler, from_generation, from_validation, http_error_handler, \
    internal_error_handler, invalid, shutting_down
from .cli import SERVE
from .scheduler import Job, QueueFullError, Scheduler, SchedulerClosedError, Work
from .schemas import ChatRequest, CompletionRequest, SamplingRequest, Shape, TokenLimit

# How often a non-streaming request checks whether its client is still there, and
# whether the server has begun to shut down.
DISCONNECT_POLL_S = 0.1
# Seconds between SSE keep-alive comments while a streamed request waits in the queue.
SSE_PING_S = 15
# On shutdown an open stream gets this long to send its error event and [DONE]; less than
# the server's graceful shutdown (ServeDefaults.shutdown_grace_s).
SSE_FAREWELL_S = 1.0

RequestT = TypeVar("RequestT", bound=SamplingRequest)


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_prompt_tokens: int
    max_tokens: int
    # uvicorn waits for a body as long as its client keeps the connection open: without a
    # bound, a client that stalls mid-body holds its connection and handler for ever.
    body_timeout_s: float = SERVE.body_timeout_s


class ShutdownFlag:
    """Raised by the server's signal handler when shutdown begins; read by open requests.
    A plain attribute, not a threading.Event: Event.set takes a lock, which a second
    signal arriving inside the first handler would wait on forever."""

    def __init__(self) -> None:
        self.begun = False


@dataclass(frozen=True)
class ServerState:
    """Everything the routes use: one Model, its Generators by model id, one Scheduler."""

    model: Model
    generators: Mapping[str, Generator]
    methods: Mapping[str, str]  # model id -> method label, as reported in timings
    scheduler: Scheduler
    limits: Limits
    api_key: str | None
    created: int
    # Web pages (origins) whose scripts may call the API from a browser (CORS); "*": any.
    allow_origins: tuple[str, ...] = ()
    stopping: ShutdownFlag = field(default_factory=ShutdownFlag)


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.pyaccel
    return state


def _authorize(request: Request, state: ServerState) -> None:
    if state.api_key is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), state.api_key.encode()):
        raise APIError(401, "missing or incorrect API key: send the server's key as 'Authorization: Bearer KEY'",
                       code="invalid_api_key")


async def _read_json(request: Request, limits: Limits) -> Any:
    body = bytearray()
    try:
        with anyio.fail_after(limits.body_timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.max_body_bytes:
                    raise APIError(413, f"the request body is larger than {limits.max_body_bytes} bytes",
                                   code="request_too_large")
    except TimeoutError:
        raise APIError(408, f"the request body did not arrive whole within {limits.body_timeout_s:g} s: send "
                            "every byte its Content-Length announces (over a slow link, start the server with a "
                            "larger --body-timeout)", code="request_timeout") from None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise invalid(f"the body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:  # json's parser recurses once per level of nesting
        raise invalid("the body is not valid JSON for this server: its arrays or objects nest too deeply",
                      code="invalid_json") from None


def _parse(kind: type[RequestT], data: Any) -> RequestT:
    if not isinstance(data, dict):
        raise invalid("the body must be a JSON object")
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def _generator(state: ServerState, model_id: str) -> Generator:
    if model_id not in state.generators:
        raise APIError(404, f"the model {model_id!r} does not exist here: choose one of "
                            f"{', '.join(state.generators)} (GET /v1/models)", param="model",
                       code="model_not_found")
    return state.generators[model_id]


SAMPLING_FIELDS = frozenset({"temperature", "top_k", "top_p", "min_p", "seed"})


def _token_limit(req: SamplingRequest, limits: Limits) -> TokenLimit:
    """The most new tokens the answer gets: what the request asks, capped at the server's
    limit (chat UIs ask for more than a server allows, and get the most it allows), or the
    limit itself when it asks none."""
    if req.max_tokens is None:
        return TokenLimit(limits.max_tokens, capped=False)
    return TokenLimit(min(req.max_tokens, limits.max_tokens), capped=req.max_tokens > limits.max_tokens)


def _options(req: SamplingRequest, limits: Limits) -> dict[str, Any]:
    """Keyword arguments of Generator.stream."""
    if "" in req.stops:
        raise invalid("stop holds an empty string, which would stop nothing: drop it", param="stop",
                      code="invalid_value")
    sampling = SamplingConfig(temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, min_p=req.min_p,
                              seed=req.seed)
    try:
        sampling.validate()
    except (TypeError, ValueError) as exc:  # its message starts with the field's name
        field_name = str(exc).split(" ", 1)[0]
        raise invalid(str(exc), param=field_name if field_name in SAMPLING_FIELDS else None) from None
    return dict(max_tokens=_token_limit(req, limits).max_tokens, temperature=req.temperature, top_k=req.top_k,
                top_p=req.top_p, min_p=req.min_p, seed=req.seed, stop=req.stops, cache_prompt=req.cache_prompt)


def _check_prompt(prompt: list[int], limits: Limits, param: str) -> None:
    if len(prompt) > limits.max_prompt_tokens:
        raise invalid(f"the prompt has {len(prompt)} tokens but this server takes at most "
                      f"{limits.max_prompt_tokens}: shorten it", param=param, code="context_length_exceeded")


def _submit(state: ServerState, work: Work) -> Job:
    job = Job(work)
    if state.stopping.begun:
        raise shutting_down(answered=False)
    try:
        state.scheduler.submit(job)
    except SchedulerClosedError:
        raise shutting_down(answered=False) from None
    except QueueFullError as exc:
        raise APIError(503, f"the server is busy: {exc}", type="server_error", code="queue_full") from None
    return job


async def _watch(request: Request, job: Job, stopping: ShutdownFlag) -> None:
    """Cancel `job` as soon as its (non-streaming) client disconnects; end it with a 503 as
    soon as the server begins to shut down, so that its client is answered before uvicorn's
    graceful shutdown runs out and cancels the request (a 500 and a traceback)."""
    while not job.cancelled:
        if stopping.begun:
            job.interrupt(shutting_down())
            return
        if await request.is_disconnected():
            job.cancel()
            return
        await asyncio.sleep(DISCONNECT_POLL_S)


async def _collect(request: Request, job: Job, stopping: ShutdownFlag) -> Result | None:
    """The job's Result; None when the client left first."""
    watcher = asyncio.create_task(_watch(request, job, stopping))
    try:
        result = None
        async for item in job.items():
            if isinstance(item, Result):
                result = item
        return result
    finally:
        watcher.cancel()


async def _interrupt_on(shutdown: anyio.Event, job: Job) -> None:
    await shutdown.wait()
    job.interrupt(shutting_down())


async def _events(job: Job, shape: Shape, shutdown: anyio.Event) -> AsyncIterator[dict[str, str]]:
    """SSE events of a streamed answer. A client that disconnects cancels this generator,
    and with it the job (see Job.items); a server that shuts down ends it with an error
    event and [DONE]."""
    if shape.chat:  # the role goes first, before the model is even free
        yield {"data": json.dumps(shape.chunk("", first=True))}
    watcher = asyncio.create_task(_interrupt_on(shutdown, job))
    try:
        async for item in job.items():
            if isinstance(item, Result):
                yield {"data": json.dumps(shape.last_chunk(item))}
                if shape.include_usage:
                    yield {"data": json.dumps(shape.usage_chunk(item))}
            else:
                yield {"data": json.dumps(shape.chunk(item))}
    except Exception as exc:  # the status is sent already: the error goes in the stream
        yield {"data": json.dumps(from_generation(exc).body())}
    finally:
        watcher.cancel()
    yield {"data": "[DONE]"}


async def _answer(request: Request, state: ServerState, req: SamplingRequest, prompt: list[int],
                  chat: bool) -> Response:
    _check_prompt(prompt, state.limits, "messages" if chat else "prompt")
    generator = _generator(state, req.model)
    job = _submit(state, Work(generator, prompt, _options(req, state.limits)))
    prefix = "chatcmpl" if chat else "cmpl"
    shape = Shape(chat, f"{prefix}-{uuid.uuid4().hex[:24]}", int(time.time()), req.model, state.methods[req.model],
                  _token_limit(req, state.limits),
                  include_usage=bool(req.stream and req.stream_options and req.stream_options.include_usage))
    if req.stream:
        # The background task also cancels a job whose client left before its stream began.
        shutdown = anyio.Event()
        return EventSourceResponse(_events(job, shape, shutdown), ping=SSE_PING_S, background=BackgroundTask(job.cancel),
                                   shutdown_event=shutdown, shutdown_grace_period=SSE_FAREWELL_S)
    try:
        result = await _collect(request, job, state.stopping)
    except Exception as exc:
        raise from_generation(exc) from None
    if result is None:  # nobody is listening any more
        return Response(status_code=204)
    return JSONResponse(shape.response(result))


async def chat_completions(request: Request) -> Response:
    state = _state(request)
    _authorize(request, state)
    req = _parse(ChatRequest, await _read_json(request, state.limits))
    generator = _generator(state, req.model)
    try:
        prompt = generator.target.chat_prompt([m.model_dump() for m in req.messages])
    except ValueError as exc:
        raise invalid(str(exc), param="messages") from None
    return await _answer(request, state, req, prompt, chat=True)


async def completions(request: Request) -> Response:
    state = _state(request)
    _authorize(request, state)
    req = _parse(CompletionRequest, await _read_json(request, state.limits))
    generator = _generator(state, req.model)
    if isinstance(req.prompt, str) or isinstance(req.prompt[0], str):
        text = req.prompt if isinstance(req.prompt, str) else str(req.prompt[0])
        try:
            prompt = generator.target.tokenize(text)
        except ValueError as exc:
            raise invalid(str(exc), param="prompt") from None
    else:
        prompt = [int(t) for t in req.prompt]
        bad = [t for t in prompt if not 0 <= t < generator.target.n_vocab]
        if bad:
            raise invalid(f"prompt token {bad[0]} is outside the vocabulary", param="prompt")
    return await _answer(request, state, req, prompt, chat=False)


def _model_card(state: ServerState, model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": state.created, "owned_by": "pyaccel",
            "method": state.methods[model_id]}


async def models(request: Request) -> Response:
    state = _state(request)
    _authorize(request, state)
    return JSONResponse({"object": "list", "data": [_model_card(state, m) for m in state.generators]})


async def model(request: Request) -> Response:
    state = _state(request)
    _authorize(request, state)
    model_id = request.path_params["model_id"]
    _generator(state, model_id)
    return JSONResponse(_model_card(state, model_id))


async def health(request: Request) -> Response:
    state = _state(request)
    running, waiting = state.scheduler.load()
    return JSONResponse({"status": "ok", "models": list(state.generators), "running": running,
                         "waiting": waiting, "max_queue": state.scheduler.max_waiting})


def create_app(state: ServerState) -> Starlette:
    """The ASGI app; it starts the state's scheduler and stops it (cancelling every job) on shutdown."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.scheduler.start()
        try:
            yield
        finally:
            state.scheduler.close()

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    handlers = {APIError: api_error_handler, HTTPException: http_error_handler, Exception: internal_error_handler}
    middleware = []
    if state.allow_origins:  # browsers ask first (OPTIONS) whether a page of another origin may call
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(state.allow_origins), allow_methods=["*"],
                                     allow_headers=["*"]))
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan, middleware=middleware)
    app.state.pyaccel = state
    return app


class _Server(uvicorn.Server):
    """uvicorn's server, raising `stopping` the moment a signal starts its shutdown."""

    def __init__(self, config: uvicorn.Config, stopping: ShutdownFlag) -> None:
        super().__init__(config)
        self._stopping = stopping

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._stopping.begun = True
        super().handle_exit(sig, frame)


# uvicorn.run's exit status when the server could not start (it has logged why).
STARTUP_FAILURE = 3


def serve(state: ServerState, host: str, port: int, shutdown_grace_s: float) -> None:
    """Serve until Ctrl-C or SIGTERM (as uvicorn.run does, which re-raises SIGTERM once shut
    down), telling open requests when shutdown begins."""
    config = uvicorn.Config(create_app(state), host=host, port=port, log_level="warning",
                            timeout_graceful_shutdown=shutdown_grace_s)
    server = _Server(config, state.stopping)
    try:
        server.run()
    except KeyboardInterrupt:  # Ctrl-C, re-raised once the server has shut down
        pass
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
