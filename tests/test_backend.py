"""The llama.cpp backend on real models: tokens, text, batches, sequences, cache, vocabularies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel.backend import ContextConfig, LlamaBackend
from pyaccel.vocab import Detokenizer, compare_vocabularies
# docs/design.md, "Numerics and near-ties": logits of the same position differ slightly with
# batch composition, so an argmax may only differ where the top two logits are this close.
from pyaccel.bench.equality import NEAR_TIE


def _top2_gap(row: np.ndarray) -> float:
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def test_tokenize_detokenize_round_trip(gemma: pyaccel.Model) -> None:
    text = "def add(a, b):\n    return a + b  # naïve ✓ 数字 🚀"
    tokens = gemma.tokenize(text, add_special=False)
    assert gemma.detokenize(tokens) == text


def test_incremental_detokenization_never_breaks_characters(gemma: pyaccel.Model) -> None:
    text = "emoji 🚀🧪 and 中文字符 and ünïcödé"
    tokens = gemma.tokenize(text, add_special=False)
    detok = Detokenizer(gemma.backend)
    pieces = [detok.push(t) for t in tokens] + [detok.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_a_character_cut_at_the_end_is_left_out(gemma: pyaccel.Model) -> None:
    """max_tokens may end an answer inside a character spelt in byte tokens: no U+FFFD."""
    tokens = gemma.tokenize("a\U0001d518", add_special=False)  # a rare letter: one byte per token
    cut = next(i for i in range(1, len(tokens)) if gemma.backend.token_bytes(tokens[i])[0] & 0xC0 == 0x80)
    detok = Detokenizer(gemma.backend)
    assert "".join(detok.push(t) for t in tokens[:cut]) + detok.flush() == "a"
    assert "".join(detok.push(t) for t in tokens) + detok.flush() == "a\U0001d518"  # and it starts afresh


def test_logits_rows_are_a_zero_copy_view(gemma: pyaccel.Model) -> None:
    b = gemma.backend
    gemma.cache.truncate(0)
    tokens = gemma.tokenize("The capital of France is")
    b.decode(tokens, np.arange(len(tokens)), logits=np.ones(len(tokens), dtype=np.int8))
    rows = b.logits_rows()
    assert rows.shape == (len(tokens), b.n_vocab)
    assert rows.dtype == np.float32 and not rows.flags.owndata
    assert b.kv_pos_max(0) == len(tokens) - 1
    b.kv_remove(0, 2, -1)
    assert b.kv_pos_max(0) == 1
    b.kv_clear()
    assert b.kv_pos_max(0) == -1


def test_two_branches_in_one_batch_match_each_branch_alone(gemma_path: Path) -> None:
    """Shared prefix carries both sequence ids; each branch then sees only its own tokens."""
    with LlamaBackend(gemma_path, ContextConfig(n_ctx=512, n_seq_max=2)) as b:
        prefix = b.tokenize("Here is a list of fruits: apple,")
        branch = [b.tokenize(" banana, cherry,", add_special=False), b.tokenize(" pear, plum, fig,", add_special=False)]
        alone = []
        for toks in branch:
            b.kv_clear()
            seq = prefix + toks
            b.decode(seq, np.arange(len(seq)), logits=np.ones(len(seq), dtype=np.int8))
            alone.append(b.logits_rows()[len(prefix) - 1 :].copy())
        b.kv_clear()
        tokens = prefix + branch[0] + branch[1]
        n0 = len(prefix)
        pos = list(range(n0)) + list(range(n0, n0 + len(branch[0]))) + list(range(n0, n0 + len(branch[1])))
        seqs = [[0, 1]] * n0 + [[0]] * len(branch[0]) + [[1]] * len(branch[1])
        b.decode(tokens, pos, seqs, np.ones(len(tokens), dtype=np.int8))
        rows = b.logits_rows()
        together = [
            np.vstack([rows[n0 - 1], rows[n0 : n0 + len(branch[0])]]),
            np.vstack([rows[n0 - 1], rows[n0 + len(branch[0]) :]]),
        ]
    for got, want in zip(together, alone):
        for g, w in zip(got, want):
            if int(np.argmax(g)) != int(np.argmax(w)):
                assert _top2_gap(w) < NEAR_TIE
        # Batch numerics move logits a little (docs/design.md); the distributions stay close.
        for g, w in zip(got, want):
            pg, pw = np.exp(g - g.max()), np.exp(w - w.max())
            assert 0.5 * np.abs(pg / pg.sum() - pw / pw.sum()).sum() < 0.05


def test_chat_template_comes_from_the_gguf(qwen_draft: pyaccel.Model) -> None:
    assert "<|im_start|>" in (qwen_draft.backend.chat_template or "")
    tokens = qwen_draft.chat_prompt([{"role": "user", "content": "hi"}])
    text = qwen_draft.backend.detokenize(tokens)
    assert tokens.count(qwen_draft.tokenize("<|im_start|>", add_special=False)[0]) >= 2
    assert "hi" in text


def test_vocabulary_check(qwen_path: Path, qwen_draft_path: Path, gemma_path: Path) -> None:
    cfg = ContextConfig(n_ctx=64)
    with LlamaBackend(qwen_path, cfg) as t, LlamaBackend(qwen_draft_path, cfg) as d, LlamaBackend(gemma_path, cfg) as g:
        assert compare_vocabularies(t, d).ok
        diff = compare_vocabularies(t, g)
        assert not diff.ok and diff.reason


def test_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(pyaccel.ModelNotFoundError, match="does not exist"):
        pyaccel.Model(tmp_path / "nope.gguf")


def test_non_gguf_file_is_clear(tmp_path: Path) -> None:
    f = tmp_path / "notes.gguf"
    f.write_text("just some text, not a model")
    with pytest.raises(pyaccel.ModelLoadError, match="not a GGUF model"):
        pyaccel.Model(f)


def test_truncated_gguf_is_clear(tmp_path: Path, gemma_path: Path) -> None:
    f = tmp_path / "truncated.gguf"
    with open(gemma_path, "rb") as src:
        f.write_bytes(src.read(3 << 20))
    with pytest.raises(pyaccel.ModelLoadError, match="could not load"):
        pyaccel.Model(f)


def test_unknown_model_name_is_clear() -> None:
    with pytest.raises(pyaccel.ModelNotFoundError, match="unknown model"):
        pyaccel.Model("not-a-registry-model")


def test_closed_model_refuses_work(gemma_path: Path) -> None:
    m = pyaccel.Model(gemma_path, n_ctx=64)
    m.close()
    m.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        m.tokenize("x")


def test_decode_costs_are_measured_at_depth_and_leave_the_cache_as_it_was(gemma: pyaccel.Model) -> None:
    from pyaccel.costs import cost_key, measure_decode_costs, measure_depth, sweep_depths

    gemma.cache.truncate(0)
    gemma.cache.prefill(gemma.tokenize("The cache holds this prompt."))
    before = gemma.backend.kv_pos_max(0)
    costs = measure_decode_costs(gemma.backend, max_batch=4, repeats=1, progress=False)
    assert len(costs.seconds) == 4 and all(s > 0 for s in costs.seconds)
    assert gemma.backend.kv_pos_max(0) == before  # the filler and the batches are gone
    assert measure_depth(gemma.backend) == min(1024, gemma.n_ctx // 2) == costs.depth
    assert costs.sweep_depths == sweep_depths(gemma.backend, 4)  # the shallow and deep sweeps
    assert costs.sweep_depths[0] < costs.depth < costs.sweep_depths[1]
    assert costs.sweep_sizes == [1, 2, 3, 4] and all(s > 0 for row in costs.sweep_seconds for s in row)
    assert costs.key == cost_key(gemma.backend, 4)
    assert costs.key.endswith(f"-d{measure_depth(gemma.backend)}-{costs.sweep_depths[0]}-{costs.sweep_depths[1]}")
    gemma.cache.truncate(0)


def test_single_token_ratios_fill_each_model_once_and_leave_both_caches(gemma: pyaccel.Model,
                                                                         gemma_path: Path) -> None:
    """The draft method's relative token cost: the same model against itself is ~1, and
    both caches end as they began (one holding a prompt, one empty)."""
    from pyaccel.costs import single_token_ratios

    gemma.cache.truncate(0)
    gemma.cache.prefill(gemma.tokenize("The cache holds this prompt."))
    before = gemma.backend.kv_pos_max(0)
    with pyaccel.Model(gemma_path, n_ctx=gemma.n_ctx, progress=False) as other:
        ratios = single_token_ratios(other.backend, gemma.backend, rounds=3, repeats=1, progress=False)
        assert other.backend.kv_pos_max(0) == -1
    assert gemma.backend.kv_pos_max(0) == before
    assert len(ratios) == 3 and all(0.3 < r < 3.0 for r in ratios)
    gemma.cache.truncate(0)


@pytest.mark.parametrize("given, expected", [({}, "100000"), ({"GOMP_SPINCOUNT": "5"}, "5"),
                                             ({"OMP_WAIT_POLICY": "active"}, None)])
def test_the_barrier_spin_is_shortened_unless_the_user_chose_one(given: dict[str, str], expected: str | None) -> None:
    # libgomp reads it when llama.cpp loads, so each case is a fresh interpreter.
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    code = "import os, pyaccel.backend; print(os.environ.get('GOMP_SPINCOUNT'))"
    out = subprocess.run([sys.executable, "-c", code], env={**env, **given}, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(expected)


def test_ctrl_c_while_llama_cpp_loads_a_model_is_not_lost(gemma_path: Path) -> None:
    """llama.cpp logs while it loads; an exception raised in a Python log callback is dropped
    by ctypes, so a Ctrl-C then was lost and the program ran on. The signal here arrives
    5 ms into the real load: it must raise once the load returns."""
    code = ("import signal, llama_cpp\n"
            "def ctrl_c(signum, frame):\n"
            "    raise KeyboardInterrupt\n"
            "signal.signal(signal.SIGALRM, ctrl_c)\n"
            "load = llama_cpp.llama_model_load_from_file\n"
            "def interrupted_load(*args):\n"
            "    signal.setitimer(signal.ITIMER_REAL, 0.005)  # inside the load, which takes far longer\n"
            "    return load(*args)\n"
            "llama_cpp.llama_model_load_from_file = interrupted_load\n"
            "import pyaccel\n"
            "try:\n"
            f"    pyaccel.Model({str(gemma_path)!r}, n_ctx=256)\n"
            "    print('ran on')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "interrupted", done.stdout + done.stderr
    assert "Exception ignored" not in done.stderr
