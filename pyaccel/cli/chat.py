"""`pyaccel chat`: an interactive chat in the terminal.

Answers stream as tokens are accepted. The history stays in the model's KV cache: a new
turn re-renders the whole chat, and the Generator's prefix reuse prefills only what is
new. Ctrl-C stops an answer (the session goes on; a second Ctrl-C at the prompt exits),
Ctrl-D exits. Commands: /reset, /stats, /system [TEXT], /help, /exit; what they print
goes to stderr, so that stdout holds only the answers. A message that itself starts with
/ is sent by doubling the slash: //etc/hosts sends /etc/hosts.
"""

from __future__ import annotations

import argparse
import contextlib
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
import typing
from typing import Any, Iterator, TextIO, cast

from ..errors import PyaccelError
from ..generator import Generator
from ..model import Model
from ..types import CANCELLED, Result, Stats
from .args import (add_method_args, add_model_args, add_sampling_args, add_stop_arg, check_sampling_args,
                   make_method_from_args, open_model)

PROMPT = ">>> "
MORE = "... "
BLOCK = '"""'
# A message starting with this sends itself less its first character: "//etc/hosts" sends
# "/etc/hosts", where a single slash would be a command.
ESCAPE = "//"
# Lines that arrive within this many seconds of the previous one are a paste: one message.
PASTE_GAP_S = 0.05
# The history is trimmed (oldest turns first) so that at least this share of the context
# is left for the answer.
ANSWER_ROOM = 0.25
HELP = ('commands: /reset (forget the chat), /stats, /system [TEXT] (show or set the system prompt), '
        f'/exit; {ESCAPE}TEXT sends /TEXT as a message; {BLOCK} starts and ends a multi-line message; '
        'Ctrl-C stops an answer, Ctrl-D exits')


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    add_method_args(p)
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="most new tokens per answer (default: the answer runs to its end, up to the context)")
    add_sampling_args(p)
    add_stop_arg(p)


@dataclass
class Totals:
    """The session's answers summed, for /stats."""

    answers: int = 0
    stopped: int = 0
    new_tokens: int = 0
    decode_s: float = 0.0
    decoded_tokens: int = 0
    target_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0

    def add(self, s: Stats) -> None:
        self.answers += 1
        self.new_tokens += s.new_tokens
        self.decode_s += s.decode_s
        self.decoded_tokens += s.decoded_tokens
        self.target_forwards += s.target_forwards
        self.drafted += s.drafted
        self.accepted += s.accepted
        self.prompt_tokens += s.prompt_tokens
        self.cached_prompt_tokens += s.cached_prompt_tokens


@dataclass
class Session:
    model: Model
    gen: Generator
    method: str
    options: dict[str, Any]
    system: str | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)

    def chat(self, dropped: int = 0) -> list[dict[str, str]]:
        """The messages to answer: the system prompt, then the history less its `dropped`
        oldest turns (a question and its answer each)."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + self.messages[2 * dropped:]

    def prompt(self) -> tuple[list[int], int]:
        """Tokens of the chat so far, and how many of the oldest turns (a question and its
        answer each) they leave out to leave room for the answer. The history itself is
        trimmed only once the answer came (`drop`): a refused message costs no turns."""
        room = int(self.model.n_ctx * (1.0 - ANSWER_ROOM))
        dropped = 0
        tokens = self.model.chat_prompt(self.chat())
        while len(tokens) > room and len(self.messages) - 2 * dropped > 2:
            dropped += 1
            tokens = self.model.chat_prompt(self.chat(dropped))
        return tokens, dropped

    def drop(self, turns: int) -> None:
        del self.messages[: 2 * turns]


@contextlib.contextmanager
def _interrupt_flag() -> Iterator[threading.Event]:
    """Ctrl-C sets the flag instead of raising: an answer then ends between two tokens,
    never inside the decode loop."""
    flag = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: flag.set())
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _pending_input(tty: bool) -> bool:
    return tty and bool(select.select([sys.stdin], [], [], PASTE_GAP_S)[0])


def _read_block(first: str, tty: bool) -> str:
    """A message between two triple quotes; `first` is the line that opened it."""
    rest = first.strip()[len(BLOCK):]
    if rest.rstrip().endswith(BLOCK):
        return rest.rstrip()[: -len(BLOCK)]
    lines = [rest] if rest else []
    while True:
        try:
            line = input(MORE if tty else "")
        except EOFError:  # the input ended inside the block: it closes the block
            return "\n".join(lines).rstrip("\n")
        if line.rstrip().endswith(BLOCK):
            lines.append(line.rstrip()[: -len(BLOCK)])
            return "\n".join(lines).rstrip("\n")
        lines.append(line)


def read_message(tty: bool) -> str:
    """One message: a line, a pasted run of lines, or a triple-quoted block. Prompts are
    shown to a terminal only: piped in, stdout holds nothing but the answers."""
    line = input(PROMPT if tty else "")
    if line.strip().startswith(BLOCK):
        return _read_block(line, tty)
    lines = [line]
    while _pending_input(tty):
        lines.append(input(""))
    return "\n".join(lines)


def _stream_answer(session: Session, prompt: list[int], out: TextIO,
                   stop: threading.Event) -> tuple[str, Result | None]:
    """Print the answer as it comes; (its text, its Result, None when `stop` ended it)."""
    pieces: list[str] = []
    result = None
    # Generator.stream is a generator: closing it ends the generation cleanly.
    # `stop` also cancels the generation itself: a long prompt's evaluation ends at its next chunk
    stream = cast(typing.Generator[str | Result, None, None],
                  session.gen.stream(prompt, cancel=stop, **session.options))
    try:
        for item in stream:
            if isinstance(item, Result):
                result = None if item.finish_reason == CANCELLED else item
                break
            out.write(item)
            out.flush()
            pieces.append(item)
            if stop.is_set():
                break
    finally:
        stream.close()  # a stopped answer settles the cache here
    out.write("\n")
    return "".join(pieces), result


def _stats_line(session: Session, result: Result | None, text: str, elapsed: float) -> str:
    if result is None:
        n = len(session.model.tokenize(text, add_special=False)) if text else 0
        return f"[stopped: {n} tokens in {elapsed:.1f}s, method {session.method}]"
    s = result.stats
    return (f"[{s.new_tokens} tokens, {s.tokens_per_s:.1f} tok/s, tau {s.tau:.2f}, method {session.method}, "
            f"prompt {s.prompt_tokens} tokens ({s.cached_prompt_tokens} cached), finish: {result.finish_reason}]")


def answer(session: Session, text: str, out: TextIO, err: TextIO, stop: threading.Event) -> bool:
    """One turn: the user's `text`, the streamed answer, the stats line on `err`; True
    when `stop` (Ctrl-C) ended the answer."""
    session.messages.append({"role": "user", "content": text})
    try:
        prompt, dropped = session.prompt()
    except ValueError as exc:
        session.messages.pop()
        print(f"pyaccel: error: {exc}", file=err)
        return False
    t0 = time.perf_counter()
    try:
        reply, result = _stream_answer(session, prompt, out, stop)
    except (PyaccelError, ValueError) as exc:
        session.messages.pop()
        print(f"pyaccel: error: {exc}", file=err)
        return False
    if dropped:
        session.drop(dropped)
        print(f"[history trimmed: the {dropped} oldest turns no longer fit the context]", file=err)
    session.messages.append({"role": "assistant", "content": reply})
    if result is None:
        session.totals.stopped += 1
    else:
        session.totals.add(result.stats)
    print(_stats_line(session, result, reply, time.perf_counter() - t0), file=err, flush=True)
    return result is None


def stats_text(session: Session) -> str:
    t = session.totals
    speed = t.new_tokens / t.decode_s if t.decode_s > 0 else 0.0
    tau = t.decoded_tokens / t.target_forwards if t.target_forwards else 0.0
    rate = t.accepted / t.drafted if t.drafted else 0.0
    return (f"method {session.method}; {t.answers + t.stopped} answers ({t.stopped} stopped with Ctrl-C), "
            f"{t.new_tokens} tokens in the {t.answers} finished, "
            f"{speed:.1f} tok/s, tau {tau:.2f}, drafted {t.drafted}, accepted {t.accepted} ({rate:.0%}); "
            f"prompts {t.prompt_tokens} tokens, {t.cached_prompt_tokens} of them cached; "
            f"history {len(session.messages)} messages, {len(session.model.cache)} of {session.model.n_ctx} "
            "context tokens in use")


def command_line(session: Session, line: str, err: TextIO) -> bool:
    """Run a /command, its feedback on `err` (stderr: stdout is for answers); False when
    the session should end."""
    name, _, arg = line.strip().partition(" ")
    if name in ("/exit", "/quit"):
        return False
    if name == "/reset":
        session.messages.clear()
        session.gen.reset()  # nothing of the old chat stays in the context either
        print("[chat forgotten]", file=err)
    elif name == "/stats":
        print(stats_text(session), file=err)
    elif name == "/system":
        if arg.strip():
            session.system = arg.strip()
            print("[system prompt set]", file=err)
        else:
            print(session.system or "[no system prompt]", file=err)
    elif name == "/help":
        print(HELP, file=err)
    else:
        print(f"[unknown command {name}] {HELP}", file=err)
    return True


def loop(session: Session, out: TextIO, err: TextIO) -> None:
    """Read, answer, repeat; Ctrl-C twice in a row or Ctrl-D ends it."""
    tty = sys.stdin.isatty()
    armed = False  # the last thing the user did was a Ctrl-C
    while True:
        try:
            text = read_message(tty)
        except EOFError:
            if tty:  # the line after the prompt the user ended
                out.write("\n")
            return
        except KeyboardInterrupt:
            if armed:
                err.write("\n")
                return
            armed = True
            print("\n[Ctrl-C again to exit, or type a message]", file=err)
            continue
        armed = False
        if not text.strip():
            continue
        if text.startswith(ESCAPE):
            text = text[1:]
        elif text.startswith("/"):
            if not command_line(session, text, err):
                return
            continue
        # After an answer stopped with Ctrl-C, one more Ctrl-C at the prompt exits.
        with _interrupt_flag() as stop:
            armed = answer(session, text, out, err, stop)


def command(args: argparse.Namespace) -> int:
    # A process started with SIGINT ignored (from a script, a test runner, `cmd &`) would
    # otherwise ignore Ctrl-C at the prompt: an interactive chat always takes it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    check_sampling_args(args)
    model = open_model(args)
    gen = Generator(model, make_method_from_args(args))
    max_tokens = args.max_tokens if args.max_tokens is not None else model.n_ctx
    options = dict(max_tokens=max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   min_p=args.min_p, seed=args.seed, stop=args.stop)
    session = Session(model, gen, args.method, options, system=args.system)
    print(f"pyaccel chat: {model.name}, method {args.method}. /help for commands, Ctrl-D to exit.", file=sys.stderr)
    try:
        loop(session, sys.stdout, sys.stderr)
    finally:
        gen.close()
        model.close()
    return 0
