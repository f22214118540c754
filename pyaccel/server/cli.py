"""The arguments and the command of `pyaccel serve` (registered by pyaccel.cli)."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys
import time
from dataclasses import dataclass

from ..cli.args import add_method_args, add_model_args, make_method_from_args, method_spec, open_model
from ..signals import ending_signals_raise

API_KEY_ENV = "PYACCEL_API_KEY"


@dataclass(frozen=True)
class ServeDefaults:
    """Every default of the server, in one place."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_queue: int = 16  # requests waiting behind the running one; more get 503
    max_body_bytes: int = 8 << 20
    # A request body that has not arrived whole after this long is answered 408.
    body_timeout_s: float = 30.0
    # A graceful shutdown waits this long for open streams before cancelling them.
    shutdown_grace_s: int = 2


SERVE = ServeDefaults()


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_method_args(p)
    p.add_argument("--also-method", action="append", default=[], type=method_spec, metavar="SPEC",
                   help="also serve method SPEC, as model id MODEL@SPEC (e.g. plain, to compare); repeatable")
    p.add_argument("--host", default=SERVE.host, help=f"address to listen on (default {SERVE.host}: this machine only)")
    p.add_argument("--port", type=_port, default=SERVE.port, help=f"TCP port, 1-65535 (default {SERVE.port})")
    p.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                   help=f"require 'Authorization: Bearer KEY' on /v1 routes (default: ${API_KEY_ENV}, else none)")
    p.add_argument("--max-queue", type=int, default=SERVE.max_queue,
                   help=f"requests that may wait behind the running one; more are answered 503 (default {SERVE.max_queue})")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="most new tokens an answer gets: a request asking more is capped (timings say so), "
                        "one asking none gets this many (default: up to the context)")
    p.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="longest prompt accepted, in tokens (default: the context less one)")
    p.add_argument("--body-timeout", type=float, default=SERVE.body_timeout_s, metavar="SECONDS",
                   help="seconds a client may take to send its request body; slower ones are answered 408 "
                        f"(default {SERVE.body_timeout_s:g})")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="let web pages of ORIGIN (e.g. http://localhost:5173, or '*' for any) call the API "
                        "from a browser (CORS); repeatable (default: none)")


def _port(text: str) -> int:
    """--port: a TCP port number."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 1..65535, got {port}")
    return port


class _Terminated(BaseException):
    """SIGTERM, raised once uvicorn has shut down gracefully (it re-raises the signal then)."""


def _check_address_free(host: str, port: int) -> None:
    """ValueError saying what to do when `host`:`port` cannot be listened on (another server
    holds the port, or the host is no address of this machine)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ValueError(f"--host {host!r} is not a name or address this machine knows ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ValueError(f"port {port} on {host} is in use (another server?): stop it, or choose "
                                 "another with --port") from None
            raise ValueError(f"cannot listen on {host}:{port} ({exc.strerror}): choose another --host or "
                             "--port") from None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def command(args: argparse.Namespace) -> int:
    try:
        from .app import Limits, ServerState, serve
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
    if not args.body_timeout > 0:  # NaN too
        raise ValueError(f"--body-timeout must be > 0 seconds, got {args.body_timeout}")
    _check_address_free(args.host, args.port)  # before the model loads, not after
    model = open_model(args)
    n_ctx = model.n_ctx
    generators = {model.name: Generator(model, make_method_from_args(args))}
    methods = {model.name: args.method}
    for spec in args.also_method:
        heads = {"heads": args.heads} if needs_hidden_states(spec) else {}
        generators[f"{model.name}@{spec}"] = Generator(model, make_method(spec, **heads))
        methods[f"{model.name}@{spec}"] = spec
    limits = Limits(max_body_bytes=SERVE.max_body_bytes, body_timeout_s=args.body_timeout,
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
        # uvicorn handles SIGTERM while it serves and, once shut down, re-raises it into the
        # handler it found: this one, so the cleanup below runs.
        with ending_signals_raise(_Terminated, names=("SIGTERM",)):
            serve(state, args.host, args.port, SERVE.shutdown_grace_s)
    except _Terminated:
        pass
    finally:
        for generator in generators.values():
            generator.close()
        model.close()
    return 0
