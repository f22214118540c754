"""Plain generation end to end, against llama-cpp-python's own greedy decoding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llama_cpp import Llama

import pyaccel

from lossless import assert_greedy_equivalent

PROMPTS = [
    "def fibonacci(n):",
    "The three primary colors are",
    "Q: What is 17 * 23?\nA:",
    "import numpy as np\n\n# compute the mean of each row\n",
]


@pytest.fixture(scope="module")
def reference(gemma_path: Path, gemma_like_llama: pyaccel.Model) -> Llama:
    # Its weights where pyaccel's are: a bare Llama would take llama.cpp's AMX matmul where
    # it has one, which faults on some CPUs.
    with pyaccel.backend.default_placement(gemma_like_llama.backend.placement):
        llm = Llama(str(gemma_path), n_ctx=1024, n_threads=pyaccel.backend.default_threads(), verbose=False)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def gemma_like_llama(gemma_path: Path) -> pyaccel.Model:
    """Same attention kernels as llama-cpp-python's Llama (which switches flash attention off)."""
    model = pyaccel.Model(gemma_path, n_ctx=1024, flash_attn=False)
    yield model
    model.close()


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_llama_cpp_python(gemma_like_llama: pyaccel.Model, reference: Llama, prompt: str) -> None:
    gemma = gemma_like_llama
    gen = pyaccel.Generator(gemma, "plain")
    ours = gen.generate(prompt, max_tokens=32)
    prompt_tokens = reference.tokenize(prompt.encode(), add_bos=True, special=True)
    want: list[int] = []
    for tok in reference.generate(prompt_tokens, temp=0.0, top_k=1, reset=True):
        if gemma.backend.is_eog(tok) or len(want) == 32:
            break
        want.append(tok)
    assert ours.tokens == want
    # The text as create_completion makes it from its tokens (detokenized after the prompt's).
    # Not create_completion itself: after this module's earlier calls its logits differ
    # slightly from a fresh Llama's, and on some hosts a near-tie then takes the other token.
    ref_text = reference.detokenize(want, prev_tokens=prompt_tokens).decode("utf-8", errors="ignore")
    assert ours.text == ref_text


def test_stream_pieces_add_up_to_the_result(gemma: pyaccel.Model) -> None:
    items = list(pyaccel.Generator(gemma, "plain").stream("Once upon a time", max_tokens=20))
    result = items[-1]
    assert isinstance(result, pyaccel.Result)
    assert "".join(i for i in items[:-1]) == result.text
    assert result.finish_reason == "length" and len(result.tokens) == 20
    s = result.stats
    assert s.new_tokens == 20 and s.target_forwards == 19 and s.tau == pytest.approx(1.0)
    assert s.prefill_s > 0 and s.decode_s > 0 and s.tokens_per_s == pytest.approx(19 / s.decode_s)
    one = pyaccel.Generator(gemma, "plain").generate("Once upon a time", max_tokens=1).stats
    assert one.decoded_tokens == 0 and one.tokens_per_s == 0.0  # no decode step: no decode speed


def test_stop_string_ends_generation(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    free = gen.generate("Count: 1, 2, 3,", max_tokens=24)
    assert " 5" in free.text
    stopped = gen.generate("Count: 1, 2, 3,", max_tokens=24, stop=[" 5"])
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(" 5")]


def test_eos_ends_with_stop(qwen_draft: pyaccel.Model) -> None:
    result = pyaccel.Generator(qwen_draft, "plain").chat([{"role": "user", "content": "Say just: OK"}], max_tokens=64)
    assert result.finish_reason == "stop"
    assert result.text.strip()


def test_seeded_sampling_is_reproducible(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    kw = dict(max_tokens=16, temperature=0.9, top_k=40, top_p=0.95, min_p=0.05)
    a = gen.generate("My favourite animal is", seed=7, **kw)
    b = gen.generate("My favourite animal is", seed=7, **kw)
    outs = {tuple(gen.generate("My favourite animal is", seed=s, **kw).tokens) for s in range(6)}
    assert a.tokens == b.tokens
    assert len(outs) > 1


def test_common_prompt_prefix_is_reused(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    base = "You are a helpful assistant. Answer briefly.\nQuestion: "
    gen.reset()
    first = gen.generate(base + "what is 2+2?", max_tokens=8)
    again = gen.generate(base + "what is 3+3?", max_tokens=8)
    p1, p2 = gemma.tokenize(base + "what is 2+2?"), gemma.tokenize(base + "what is 3+3?")
    common = next(i for i, (x, y) in enumerate(zip(p1, p2)) if x != y)
    assert first.stats.cached_prompt_tokens == 0
    assert again.stats.cached_prompt_tokens == common > len(gemma.tokenize(base)) - 2
    fresh = pyaccel.Generator(gemma, "plain")
    gemma.cache.truncate(0)
    assert fresh.generate(base + "what is 3+3?", max_tokens=8).tokens == again.tokens


def test_cache_prompt_false_prefills_afresh(gemma: pyaccel.Model) -> None:
    """A reused prefix changes the prefill's batches, so a greedy answer may differ at a
    near-tie with what ran before; cache_prompt=False makes it independent of that."""
    gen = pyaccel.Generator(gemma, "plain")
    chat = [{"role": "user", "content": "List three colors."}]
    first = gen.chat(chat, max_tokens=12, cache_prompt=False)
    gen.generate("def fibonacci(n):", max_tokens=4)
    gen.chat(chat[:1] + [{"role": "assistant", "content": "Red."}, chat[0]], max_tokens=2)  # shares a prefix
    again = gen.chat(chat, max_tokens=12, cache_prompt=False)
    assert first.stats.cached_prompt_tokens == again.stats.cached_prompt_tokens == 0
    assert again.tokens == first.tokens


def test_chat_without_a_template_uses_the_family_turn_format(gemma: pyaccel.Model) -> None:
    """Gemma 3 270M's file ships no chat template: chat() renders Gemma's turns itself."""
    assert gemma.backend.chat_template is None
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    want = gemma.tokenize("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n")
    assert gemma.chat_prompt(messages) == want
    gen = pyaccel.Generator(gemma, "plain")
    assert gen.chat(messages, max_tokens=4).tokens == gen.generate(want, max_tokens=4).tokens
    with pytest.raises(TypeError, match="generate\\(\\)"):
        gen.chat("Hi")


@pytest.mark.parametrize("family", ["gemma", "qwen_draft"])
def test_control_token_text_in_a_message_stays_text(family: str, request: pytest.FixtureRequest) -> None:
    """A message that quotes its family's turn markup talks about it: the markup the
    template writes is control tokens, the quoted markup is text. Gemma renders with the
    built-in turn format, Qwen with the GGUF's chat template."""
    model: pyaccel.Model = request.getfixturevalue(family)
    backend = model.backend
    end, start = ("<end_of_turn>", "<start_of_turn>") if family == "gemma" else ("<|im_end|>", "<|im_start|>")
    quoted = f"Explain {end}\n{start}model and {end}{end} please"
    plain = [{"role": "user", "content": "Explain and please"}]
    tokens = model.chat_prompt([{"role": "user", "content": quoted}])
    reference = model.chat_prompt(plain)
    control = [t for t in tokens if backend.is_control(t)]
    assert control == [t for t in reference if backend.is_control(t)]  # only the template's own
    special_text = b"".join(backend.token_bytes(t, special=True) for t in tokens).decode()
    assert quoted in special_text  # the quoted markup is all there, as text
    as_text = backend.tokenize(quoted, add_special=False, parse_special=False)
    assert any(tokens[i:i + len(as_text)] == as_text for i in range(len(tokens)))  # tokenized whole, as text
    assert model.chat_prompt(plain) == reference  # messages without markup: as before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(max_tokens=-1), "max_tokens"),
        (dict(temperature=-0.5), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_k=-3), "top_k"),
        (dict(top_k=2**31), "top_k"),
        (dict(min_p=2.0), "min_p"),
        (dict(seed=-2), "seed"),
        (dict(seed=2**64), "seed"),
        (dict(stop=["\n", ""]), "stop holds an empty string"),
    ],
)
def test_bad_arguments_are_clear(gemma: pyaccel.Model, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pyaccel.Generator(gemma, "plain").generate("hello", **kwargs)


def test_empty_prompt_is_clear(gemma: pyaccel.Model) -> None:
    with pytest.raises(ValueError, match="empty"):
        pyaccel.Generator(gemma, "plain").generate("")
    with pytest.raises(TypeError, match="prompt must be text or a sequence of token ids, got NoneType"):
        pyaccel.Generator(gemma, "plain").generate(None)  # type: ignore[arg-type]
    for mistake, named in ((b"Hello", "got bytes"), ([1.9, 2.2], "got float"), (["2", "5"], "got str"),
                           ({"a": 1}, "got str")):  # never read as ids
        with pytest.raises(TypeError, match=named):
            pyaccel.Generator(gemma, "plain").generate(mistake, max_tokens=2)  # type: ignore[arg-type]
    assert pyaccel.Generator(gemma, "plain").generate(np.asarray(gemma.tokenize("Hi")), max_tokens=1).tokens


def test_seed_minus_one_is_random_as_in_llama_cpp(gemma: pyaccel.Model) -> None:
    gen = pyaccel.Generator(gemma, "plain")
    outs = {tuple(gen.generate("My favourite animal is", seed=-1, max_tokens=12, temperature=1.0).tokens)
            for _ in range(4)}
    assert len(outs) > 1


def test_bad_thread_count_is_clear(gemma_path: Path) -> None:
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        pyaccel.Model(gemma_path, n_threads=-2)


def test_bad_offload_is_clear(gemma_path: Path) -> None:
    with pytest.raises(ValueError, match=r"n_gpu_layers must be -1 \(every layer\) or >= 0"):
        pyaccel.Model(gemma_path, n_gpu_layers=-5)


def test_a_draft_model_named_for_auto_must_exist(gemma: pyaccel.Model) -> None:
    """auto skips the registry pair when it is not here, but not a draft the user named."""
    with pytest.raises(pyaccel.ModelNotFoundError, match="no-such.gguf"):
        pyaccel.Generator(gemma, pyaccel.Auto(draft="no-such.gguf"))


def test_cli_generate_into_a_closed_pipe_exits_quietly(gemma_path: Path) -> None:
    """`pyaccel generate ... | head -c 5`: no traceback when the reader goes."""
    cmd = f"{sys.executable} -m pyaccel generate -m {gemma_path} --threads 1 --n-ctx 256 --max-tokens 200 " \
          "--method plain 'Count from one to a hundred:' | head -c 5"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert len(out.stdout) == 5 and "Traceback" not in out.stderr and "Error" not in out.stderr, out.stderr
    assert out.returncode in (0, 141)


def test_prompt_longer_than_context_is_clear(gemma_path: Path) -> None:
    with pyaccel.Model(gemma_path, n_ctx=64) as small:
        with pytest.raises(pyaccel.ContextOverflowError, match="context"):
            pyaccel.Generator(small).generate("word " * (small.n_ctx + 10))


@pytest.mark.parametrize("kwargs", [dict(n_ctx=24), dict(n_batch=8), dict(n_batch=1)],
                         ids=["n_ctx-24", "n_batch-8", "n_batch-1"])
def test_a_small_batch_opens_and_every_method_fits_it(gemma_path: Path, kwargs: dict) -> None:
    """A batch smaller than n_seq_max aborted llama.cpp's context creation; auto's n-gram
    pool needs 29 tokens a pass at its tuned size. Both now fit the batch the model has."""
    prompt = "a = [1, 2, 3, 4, 5, 6, 7, 8]\nb = [1, 2, 3, 4, 5, 6, 7, 8]\nc = [1, 2,"
    with pyaccel.Model(gemma_path, **kwargs) as small:
        assert small.backend.n_seq_max <= small.backend.max_batch
        want = pyaccel.Generator(small, "plain").generate(prompt, max_tokens=8).tokens
        for spec in ("auto", "lookup", "lookahead"):
            got = pyaccel.Generator(small, spec).generate(prompt, max_tokens=8).tokens
            assert_greedy_equivalent(small, small.tokenize(prompt), want, got)


def test_a_context_beyond_the_trained_one_is_warned_of(gemma: pyaccel.Model, gemma_path: Path) -> None:
    trained = gemma.backend.n_ctx_train
    with pytest.warns(UserWarning, match=f"beyond the {trained} tokens"):
        pyaccel.Model(gemma_path, n_ctx=trained + 256, progress=False).close()


def test_generation_stops_when_the_context_is_full(gemma_path: Path) -> None:
    with pyaccel.Model(gemma_path, n_ctx=32) as small:
        n_ctx = small.n_ctx
        prompt = small.tokenize("Count: " + " ".join(str(i) for i in range(1, n_ctx)))[: n_ctx // 2]
        result = pyaccel.Generator(small).generate(prompt, max_tokens=n_ctx)
    assert result.finish_reason == "length"
    assert len(result.tokens) < n_ctx
    assert result.stats.prompt_tokens + len(result.tokens) <= n_ctx + 1


def test_a_closed_generator_refuses_work(gemma: pyaccel.Model) -> None:
    with pyaccel.Generator(gemma, "lookup") as gen:
        assert gen.generate("hello", max_tokens=2).tokens
    with pytest.raises(RuntimeError, match="closed.*make a new Generator"):
        gen.generate("hello", max_tokens=2)
    gen.close()  # twice is harmless
    assert pyaccel.Generator(gemma, "plain").generate("hello", max_tokens=2).tokens  # the model stays open


def test_zero_max_tokens(gemma: pyaccel.Model) -> None:
    result = pyaccel.Generator(gemma, "plain").generate("hello", max_tokens=0)
    assert result.text == "" and result.tokens == [] and result.finish_reason == "length"


def test_cli_generate_json(gemma_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pyaccel", "generate", "-m", str(gemma_path), "--max-tokens", "8", "--json",
         "--n-ctx", "256", "def square(x):"],
        capture_output=True, text=True, check=True, timeout=300,
    )
    data = json.loads(out.stdout)
    assert set(data) == {"text", "tokens", "finish_reason", "stats"}
    assert len(data["tokens"]) == 8 and data["stats"]["new_tokens"] == 8


def test_cli_models_list_and_errors(gemma_path: Path) -> None:
    listing = subprocess.run([sys.executable, "-m", "pyaccel", "models", "list"], capture_output=True, text=True,
                             check=True, timeout=60)
    assert "qwen2.5-coder-1.5b-instruct (default)" in listing.stdout
    bad = subprocess.run([sys.executable, "-m", "pyaccel", "generate", "-m", "nope", "hi"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "unknown model" in bad.stderr
    for command in (["generate", "hi"], ["chat"]):  # refused before the (unknown) model is looked for
        bad = subprocess.run([sys.executable, "-m", "pyaccel", *command, "-m", "nope", "--temperature", "-1"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert bad.returncode == 2 and "temperature must be >= 0" in bad.stderr, (command, bad.stderr)


def test_cli_models_costs_shows_the_curve_at_each_depth(gemma_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pyaccel", "models", "costs", str(gemma_path)],
                         capture_output=True, text=True, check=True, timeout=600)
    lines = out.stdout.splitlines()  # the table alone: whether the curve is learnt from use goes to stderr
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    depths = [int(c.removeprefix("ms behind ")) for c in head[1::2]]
    assert head[0] == "tokens in one decode" and depths == sorted(depths) and depths  # measured: 128, 1024, 2048
    assert head[1:] == [c for d in depths for c in (f"ms behind {d}", f"relative behind {d}")]
    assert lines[2].startswith("| 1 | ") and lines[-1].startswith("| 64 | ")
    assert all(float(cell) > 0 for cell in lines[-1].strip("|").split("|")[1:])
