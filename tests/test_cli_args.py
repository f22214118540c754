"""The command line's argument errors, reported before any model is opened: no model needed
(every command here fails before it would load one)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _pyaccel(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyaccel", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "message"), [
    (("generate", "--temperature", "-1", "hi"), "temperature must be >= 0"),
    (("generate", "--top-p", "2", "hi"), "top_p must be in (0, 1]"),
    (("generate", "--max-tokens", "-5", "hi"), "--max-tokens must be >= 0"),
    (("generate", "--method", "plain", "--ngram-static", "x.ngc", "hi"),
     "--ngram-static does not apply to --method plain: it is for ngram or auto"),
    (("generate", "--method", "lookup", "--draft-model", "x", "hi"), "--draft-model does not apply to --method lookup"),
    (("generate", "--method", "lookup:max_draft=abc", "hi"), "max_draft must be an integer, got 'abc'"),
    (("generate", "--method", "lookup:max_draft", "hi"), "needs the form key=value"),
    (("generate", "--bogus", "hi"), "pyaccel generate: error: unrecognized arguments: --bogus"),
    (("generate", "--method", "lookup", "--draft-length", "0", "hi"), "--draft-length: must be >= 1, got 0"),
    (("generate", "--method", "lookup", "--draft-length", "x", "hi"), "expected a whole number, got 'x'"),
    (("generate", "--chat", "  "), "the prompt is empty"),
    (("models",), "pyaccel models: error: the following arguments are required: COMMAND"),
    (("serve", "--port", "99999"), "--port: must be in 1..65535, got 99999"),
    (("serve", "--port", "-5"), "--port: must be in 1..65535, got -5"),
])
def test_argument_errors_say_what_is_wrong_before_a_model_loads(args: tuple[str, ...], message: str) -> None:
    if args[0] == "generate":  # a model that does not exist: an error about it would mean it was looked up
        args = (args[0], "-m", "no-such-model", *args[1:])
    out = _pyaccel(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "unknown model" not in out.stderr  # the model was never looked up


# The `pyaccel` console script, with a Ctrl-C (a real SIGINT) the moment the module named by
# its first argument starts to load: while main() builds the parser, which loads each command's
# module, a while after the process starts.
CONSOLE_SCRIPT = """
import os, signal, sys

class CtrlCOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlCOnImport())
from pyaccel.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is a POSIX signal")
@pytest.mark.parametrize("module", ["numpy", "pyaccel._core", "llama_cpp", "pyaccel.bench.cli", "pyaccel.cli.medusa"])
def test_ctrl_c_while_the_commands_load_exits_130_without_a_traceback(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, module, "models", "list"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""  # interrupted before the command ran


def test_the_console_script_imports_nothing_slow_before_main_guards_it() -> None:
    """`import pyaccel` loads its names on first use: what the console script imports before
    main() runs takes milliseconds (the C++ core, numpy and llama.cpp load inside main)."""
    code = ("import sys; import pyaccel.cli; import pyaccel; "
            "print(sorted(m for m in ('numpy', 'llama_cpp', 'pyaccel._core') if m in sys.modules)); "
            "print(pyaccel.Model.__name__, pyaccel.registry.__name__, 'Generator' in dir(pyaccel))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["[]", "Model pyaccel.registry True"], done.stderr


def test_serve_on_a_port_in_use_says_so_before_the_model_loads() -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = _pyaccel("serve", "-m", "no-such-model", "--port", str(port))
    assert out.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in out.stderr and "--port" in out.stderr
    assert "unknown model" not in out.stderr  # the model was never looked up
