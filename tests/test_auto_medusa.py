"""Medusa heads as one of auto's proposers: their tree is merged with the free candidates
and verified where it pays, the output stays plain greedy decoding's, and auto (and the
CLI) find the heads `pyaccel medusa train` wrote for the target."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import pyaccel
from pyaccel import Auto, CostModel, Medusa
from pyaccel.cli import args as cli_args
from pyaccel.methods.medusa import MedusaHeads, format as heads_format
from pyaccel.methods.medusa.format import default_heads_path, save_heads

from conftest import TEST_N_CTX
from lossless import assert_greedy_equivalent
from test_medusa_decode import N_TOKENS, NODES, PROMPTS, greedy_runs, heads_for_runs

# Verification nearly free: every tree the heads offer pays.
FLAT = CostModel.fixed([1.0 + 0.001 * b for b in range(64)])


@pytest.fixture(scope="module")
def hidden_gemma(gemma_path: Path) -> pyaccel.Model:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX, embeddings=True)
    yield model
    model.close()


@pytest.fixture(scope="module")
def runs(hidden_gemma: pyaccel.Model) -> list[tuple[list[int], list[int]]]:
    return greedy_runs(hidden_gemma)


@pytest.fixture(scope="module")
def heads(hidden_gemma: pyaccel.Model, runs: list) -> MedusaHeads:
    return heads_for_runs(hidden_gemma, runs)


@pytest.mark.parametrize("tree", ["static", "dynamic"])
def test_heads_nodes_are_verified_and_the_output_is_plain(hidden_gemma: pyaccel.Model, runs: list,
                                                         heads: MedusaHeads, tree: str) -> None:
    medusa = Medusa(heads, tree=tree, max_nodes=NODES, costs=FLAT, heads_cost=0.01)
    gen = pyaccel.Generator(hidden_gemma, Auto(medusa=medusa, use_draft=False, costs=FLAT))
    accepted_by_medusa = 0
    for prompt, want in runs:
        got = gen.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(hidden_gemma, prompt, want, got.tokens)
        accepted_by_medusa += got.stats.accepted_by.get("medusa", 0)
    counters = gen.method.counters
    assert counters["drafted_medusa"] > N_TOKENS // 2, counters
    assert medusa.counters["heads_runs"] > 0
    assert accepted_by_medusa == counters.get("accepted_medusa", 0)


def test_auto_finds_the_cached_heads_only_with_hidden_states(hidden_gemma: pyaccel.Model, gemma: pyaccel.Model,
                                                              heads: MedusaHeads, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heads_format, "medusa_dir", lambda: tmp_path)
    without = Auto(use_draft=False)
    pyaccel.Generator(hidden_gemma, without)
    assert without.medusa is None  # no heads trained for this model yet
    save_heads(default_heads_path(hidden_gemma), heads)
    found = Auto(use_draft=False)
    pyaccel.Generator(hidden_gemma, found)
    assert found.medusa is not None and "medusa" in [sub.name for sub in found.subs]
    plain_ctx = Auto(use_draft=False)
    pyaccel.Generator(gemma, plain_ctx)  # no hidden states: the heads cannot run there
    assert plain_ctx.medusa is None
    never = Auto(use_draft=False, medusa=False)
    pyaccel.Generator(hidden_gemma, never)
    assert never.medusa is None
    with pytest.raises(ValueError, match="embeddings=True"):
        pyaccel.Generator(gemma, Auto(use_draft=False, medusa=default_heads_path(gemma)))


def test_cli_opens_the_model_with_hidden_states_when_auto_has_heads(
        gemma_path: Path, heads: MedusaHeads, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    from pyaccel.cli import main

    monkeypatch.setattr(heads_format, "medusa_dir", lambda: tmp_path)

    def wants(method: str, **extra: object) -> bool:
        return cli_args._wants_hidden_states(argparse.Namespace(model=str(gemma_path), method=method, **extra))

    assert not wants("auto")
    assert wants("auto", heads=str(tmp_path / "given.gguf"))
    assert wants("medusa")
    assert not wants("plain")
    with pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX, embeddings=True, progress=False) as model:
        save_heads(default_heads_path(model), heads)
    assert wants("auto") and not wants("auto:medusa=false") and not wants("lookup")
    assert main(["generate", "-m", str(gemma_path), "--n-ctx", "256", "--max-tokens", "8", "--json",
                 PROMPTS[1]]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["new_tokens"] == 8
