"""Where the weights go: llama.cpp's AMX buffer type kept out by default, its repacked CPU
kernels kept, and a model that decodes on every host, AMX ones included."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel import weights
from pyaccel.backend import ContextConfig, LlamaBackend, ggml_library

from lossless import NEAR_TIE, assert_greedy_equivalent

TOKENS = list(range(1000, 1016))


def _has_amx() -> bool:
    return weights.AMX in weights.cpu_extra_buffer_types(ggml_library())


# ---- patterns (no model) -----------------------------------------------------------------


def test_patterns_match_exactly_the_names_given() -> None:
    chosen = ["blk.0.attn_q.weight", "blk.1.attn_q.weight", "blk.12.ffn_down.weight", "output.weight",
              "blk.3.ffn_up_exps.weight"]
    others = ["blk.2.attn_q.weight", "blk.10.attn_q.weight", "blk.1.attn_q.weight.x", "xblk.1.attn_q.weight",
              "blk.1.ffn_down.weight", "blk.12.ffn_down_shexp.weight", "output_norm.weight", "token_embd.weight",
              "blk.0.attn_qXweight"]
    patterns = weights.patterns_for(chosen)
    assert len(patterns) == 4  # one per kind of weight, not one per weight
    for name in chosen:
        assert sum(bool(re.search(p, name)) for p in patterns) == 1, name
    for name in others:
        assert not any(re.search(p, name) for p in patterns), name


def test_override_array_is_null_terminated_and_holds_every_pattern() -> None:
    placement = weights.Placement(use_extra_bufts=False, patterns=("^a$", "^b$"), buft=1234)
    rows = placement.overrides()
    assert rows is not None and len(rows) == 3
    assert [r.pattern for r in rows[:2]] == [b"^a$", b"^b$"] and {r.buft for r in rows[:2]} == {1234}
    assert rows[2].pattern is None and rows[2].buft is None
    assert weights.Placement().overrides() is None


def test_the_cpu_offers_its_repacked_kernels() -> None:
    # Batched verification leans on them: a build without them would be a slower pyaccel.
    assert weights.REPACK in weights.cpu_extra_buffer_types(ggml_library())


# ---- placement of real models --------------------------------------------------------------


def _load(path: Path, placement: weights.Placement | None, capsys: pytest.CaptureFixture[str],
          ) -> tuple[str, np.ndarray]:
    capsys.readouterr()
    with LlamaBackend(path, ContextConfig(n_ctx=256, verbose=True), placement=placement) as b:
        b.decode(np.array(TOKENS), np.arange(len(TOKENS)), logits=np.ones(len(TOKENS)))
        rows = b.logits_rows().copy()
    log = capsys.readouterr().err
    sizes = re.findall(r"(\S+) model buffer size = +([\d.]+) MiB", log)
    return " ".join(f"{name}={size}" for name, size in sorted(sizes)), rows


@pytest.mark.parametrize("fixture", ["gemma_path", "qwen_path", "qwen_draft_path"])
def test_without_amx_is_llama_cpps_own_placement_less_amx(fixture: str, request: pytest.FixtureRequest,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The overrides put in CPU_REPACK exactly the weights llama.cpp would, with AMX out of
    its list: the same buffers as llama.cpp's own placement where the build has no AMX
    (and the same logits, bit for bit), and no AMX buffer where it has."""
    path: Path = request.getfixturevalue(fixture)
    guarded = weights.without_amx(ggml_library(), path, n_gpu_layers=0)
    assert guarded.patterns and not guarded.use_extra_bufts and guarded.tag == "repack"
    sizes, rows = _load(path, guarded, capsys)
    assert "CPU_REPACK=" in sizes and "AMX=" not in sizes
    if _has_amx():
        # The reference is llama.cpp's own choice once AMX is not offered to it: its extra
        # buffer types off leaves every weight plain, so only CPU_REPACK's share differs.
        # Other kernels, other rounding: top-1 agrees but at near-ties (the lossless rule).
        plain_sizes, plain_rows = _load(path, weights.Placement(use_extra_bufts=False), capsys)
        assert "CPU_REPACK=" not in plain_sizes
        for got, want in zip(rows, plain_rows):
            top2 = np.sort(want)[-2:]
            assert np.argmax(got) == np.argmax(want) or top2[1] - top2[0] < NEAR_TIE
    else:
        own_sizes, own_rows = _load(path, None, capsys)
        assert sizes == own_sizes
        assert np.array_equal(rows, own_rows)


def test_asking_for_amx_or_a_build_without_it_keeps_llama_cpps_placement(gemma_path: Path) -> None:
    lib = ggml_library()
    assert weights.choose(lib, gemma_path, amx=True, n_gpu_layers=0) == weights.Placement()
    chosen = weights.choose(lib, gemma_path, amx=False, n_gpu_layers=0)
    assert (chosen.tag == "repack") == _has_amx()
    # An offloaded model keeps its GPU buffers: no CPU override, only the extra types off.
    offloaded = weights.without_amx(lib, gemma_path, n_gpu_layers=-1)
    assert offloaded.patterns == () and not offloaded.use_extra_bufts


def test_a_file_ggml_cannot_read_gets_no_overrides(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    assert weights.weights_on(ggml_library(), bad, weights.cpu_extra_buffer_types(ggml_library())[weights.REPACK]) \
        is None


@pytest.mark.parametrize("method", ["plain", "lookup"])
def test_the_default_model_decodes_on_this_host(qwen_path: Path, method: str) -> None:
    """The README's first command on any CPU, AMX ones included: a default Model decodes,
    plainly and with a drafting method, and the weights are out of AMX where it exists."""
    with pyaccel.Model(qwen_path, n_ctx=512) as model:
        assert model.backend.placement.tag == ("repack" if _has_amx() else "")
        prompt = "def reverse(items):\n    return "
        plain = pyaccel.Generator(model, "plain").generate(prompt, max_tokens=24).tokens
        got = pyaccel.Generator(model, method).generate(prompt, max_tokens=24).tokens
        assert len(plain) == 24
        assert_greedy_equivalent(model, model.tokenize(prompt), plain, got)


def test_bench_placements_times_every_placement_against_the_default(gemma_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pyaccel.cli import main

    assert main(["bench", "-m", str(gemma_path), "--placements", "--rounds", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[2:]]
    names = {row[0] for row in rows}
    assert {"default:", "amx-out", "no-extra"} <= names and ("own" in names) != _has_amx()
    assert {row[1] for row in rows} == {"decode", "verify"} and len(rows) == 2 * len(names)
    for row in rows:
        ratio, (low, high) = float(row[2]), map(float, row[3].split("-"))
        assert 0 < low <= ratio <= high
