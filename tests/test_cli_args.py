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
    (("generate", "--chat", "  "), "the prompt is empty"),
    (("models",), "pyaccel models: error: the following arguments are required: COMMAND"),
])
def test_argument_errors_say_what_is_wrong_before_a_model_loads(args: tuple[str, ...], message: str) -> None:
    if args[0] == "generate":  # a model that does not exist: an error about it would mean it was looked up
        args = (args[0], "-m", "no-such-model", *args[1:])
    out = _pyaccel(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "unknown model" not in out.stderr  # the model was never looked up
