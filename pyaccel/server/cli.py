"""The arguments and the command of `pyaccel serve` (registered by pyaccel.cli)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..cli.args import add_method_args, add_model_args, make_method_from_args, method_spec, open_model

API_KEY_ENV = "PYACCEL_API_KEY"


@dataclass(frozen=True)
class ServeDefaults:
    """Every default of the server, in one place."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_queue: int = 16  # requests waiting behind the running one; more get 503
    max_body_bytes: int = 8 << 20
    # A graceful shutdown waits this long for open streams before cancelling them.
    shutdown_grace_s: int = 2


SERVE = ServeDefaults()


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_method_args(p)
    p.add_argument("--also-method", action="append", default=[], type=method_spec, metavar="SPEC",
                   help="also serve method SPEC, as model id MODEL@SPEC (e.g. plain, to compare); repeatable")
    p.add_argument("--host", default=SERVE.host, help=f"address to listen on (default {SERVE.host}: this machine only)")
    p.add_argument("--port", type=int, default=SERVE.port, help=f"default {SERVE.port}")
    p.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                   help=f"require 'Authorization: Bearer KEY' on /v1 routes (default: ${API_KEY_ENV}, else none)")
    p.add_argument("--max-queue", type=int, default=SERVE.max_queue,
                   help=f"requests that may wait behind the running one; more are answered 503 (default {SERVE.max_queue})")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="most new tokens a request may ask for, and what it gets when it asks none "
                        "(default: up to the context)")
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="longest prompt accepted, in tokens (default: the context less one)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="let web pages of ORIGIN (e.g. http://localhost:5173, or '*' for any) call the API "
                        "from a browser (CORS); repeatable (default: none)")


class _Terminated(BaseException):
    """SIGTERM, raised once uvicorn has shut down gracefully (it re-raises the signal then)."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


@contextmanager
def _sigterm_after_shutdown_raises() -> Iterator[None]:
    """While inside, SIGTERM raises _Terminated instead of killing the process, so that
    the cleanup after uvicorn.run runs (uvicorn handles the signal itself while it serves,
    and re-raises it into the handler found before it started: this one)."""
    if (threading.current_thread() is not threading.main_thread()  # only the main thread sets handlers
            or signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)):  # a program's own handler stays
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def command(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .app import Limits, ServerState, create_app
    except ImportError as exc:
        print(f"pyaccel: error: pyaccel serve needs the server extra ({exc.name} is missing): "
              "pip install 'pyaccel[server]'", file=sys.stderr)
        return 2
    from ..generator import Generator
    from ..methods import make_method, needs_hidden_states
    from .scheduler import Scheduler

    for flag, value, least in (("--max-queue", args.max_queue, 0), ("--max-tokens", args.max_tokens, 1),
                               ("--max-prompt-tokens", args.max_prompt_tokens, 1)):
        if value is not None and value < least:
            raise ValueError(f"{flag} must be >= {least}, got {value}")
    model = open_model(args)
    n_ctx = model.n_ctx
    generators = {model.name: Generator(model, make_method_from_args(args))}
    methods = {model.name: args.method}
    for spec in args.also_method:
        heads = {"heads": args.heads} if needs_hidden_states(spec) else {}
        generators[f"{model.name}@{spec}"] = Generator(model, make_method(spec, **heads))
        methods[f"{model.name}@{spec}"] = spec
    limits = Limits(max_body_bytes=SERVE.max_body_bytes,
                    max_prompt_tokens=min(args.max_prompt_tokens or n_ctx - 1, n_ctx - 1),
                    max_tokens=min(args.max_tokens or n_ctx, n_ctx))
    state = ServerState(model=model, generators=generators, methods=methods, scheduler=Scheduler(args.max_queue),
                        limits=limits, api_key=args.api_key or None, created=int(time.time()),
                        allow_origins=tuple(args.allow_origin))
    if not _is_loopback(args.host) and state.api_key is None:
        print(f"pyaccel: warning: listening on {args.host} without --api-key: anyone who can reach it may use it",
              file=sys.stderr)
    print(f"pyaccel serve: http://{args.host}:{args.port}/v1  models: {', '.join(generators)}", file=sys.stderr)
    # Ctrl-C and SIGTERM both end with a graceful shutdown, this cleanup (the Model saves
    # its learnt decode costs) and status 0.
    try:
        with _sigterm_after_shutdown_raises():
            uvicorn.run(create_app(state), host=args.host, port=args.port, log_level="warning",
                        timeout_graceful_shutdown=SERVE.shutdown_grace_s)
    except _Terminated:
        pass
    finally:
        for generator in generators.values():
            generator.close()
        model.close()
    return 0
