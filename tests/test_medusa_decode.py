"""Medusa decoding on a real model with heads built here: the output stays the target's
(greedy, and the sampled distribution), typical acceptance keeps its thresholds, the
cost model keeps the heads off where they cannot pay, and misuse is a clear error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel import CostModel, Medusa, _core
from pyaccel.methods.medusa import HeadsMeta, HeadWeights, MedusaHeads, MedusaTuning
from pyaccel.methods.medusa.format import meta_for, save_heads
from pyaccel.types import StepOutcome

from conftest import TEST_N_CTX
from lossless import assert_greedy_equivalent, chi_square_pvalue, second_token_counts, target_distribution

PROMPTS = [
    "def is_palindrome(s: str) -> bool:\n    \"\"\"Return True if s reads the same backwards.\"\"\"\n",
    "The three primary colours are red, yellow and blue. The three primary colours of light are",
]
N_TOKENS = 20
# Trees of this many nodes keep a step cheap on a small CPU and still branch at every depth.
NODES = 16
# Heads carry measured rank accuracies; these stand in for them (static trees are built from them).
RANK_ACCURACY = ((0.5, 0.15, 0.08, 0.05), (0.3, 0.12, 0.07, 0.04), (0.2, 0.1, 0.05, 0.03))


@pytest.fixture(scope="module")
def hidden_model(gemma_path: Path) -> pyaccel.Model:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX, embeddings=True)
    yield model
    model.close()


def target_meta(model: pyaccel.Model, rank_accuracy: tuple = RANK_ACCURACY) -> HeadsMeta:
    return meta_for(model, rank_accuracy)


def hidden_norm(model: pyaccel.Model, prompt: list[int]) -> float:
    model.cache.truncate(0)
    model.backend.prefill(prompt, start_pos=0)
    norm = float(np.linalg.norm(model.backend.embeddings_rows()[-1]))
    model.cache.truncate(0)
    return norm


def make_heads(model: pyaccel.Model, vocab: list[int], seed: int = 0, n_heads: int = 3,
               meta: HeadsMeta | None = None) -> MedusaHeads:
    """Heads over a small draft vocabulary (the tokens a test's text uses), with random output
    rows scaled to logits of a few units and a small random residual block, so that their
    trees differ from step to step and their guesses are sometimes right."""
    rng = np.random.default_rng(seed)
    d = model.backend.n_embd
    norm = hidden_norm(model, model.tokenize(PROMPTS[0]))
    out = (rng.standard_normal((len(vocab), d)) * 2.0 / norm).astype(np.float32)
    weights = HeadWeights.untrained(n_heads, out, np.asarray(sorted(vocab), np.int32))
    weights.w[:] = rng.standard_normal(weights.w.shape).astype(np.float32) * (0.5 / np.sqrt(d))
    return MedusaHeads(weights, meta if meta is not None else target_meta(model))


def greedy_runs(model: pyaccel.Model) -> list[tuple[list[int], list[int]]]:
    """(prompt, plain greedy output) for each of PROMPTS: the reference of the decoding tests."""
    plain = pyaccel.Generator(model, "plain")
    runs = []
    for text in PROMPTS:
        prompt = model.tokenize(text)
        runs.append((prompt, plain.generate(prompt, max_tokens=N_TOKENS).tokens))
    return runs


def heads_for_runs(model: pyaccel.Model, runs: list[tuple[list[int], list[int]]]) -> MedusaHeads:
    """`make_heads` over the tokens the runs' prompts and outputs use."""
    return make_heads(model, sorted({t for prompt, out in runs for t in prompt + out}))


@pytest.fixture(scope="module")
def plain_runs(hidden_model: pyaccel.Model) -> list[tuple[list[int], list[int]]]:
    return greedy_runs(hidden_model)


@pytest.fixture(scope="module")
def text_heads(hidden_model: pyaccel.Model, plain_runs: list) -> MedusaHeads:
    return heads_for_runs(hidden_model, plain_runs)


class FirstHidden(Medusa):
    """Medusa that keeps the hidden state its first step's heads read."""

    def propose(self, tokens: list[int], budget: int) -> pyaccel.Draft:
        if not hasattr(self, "first_h"):
            self.first_h = np.array(self._h)
        return super().propose(tokens, budget)


@pytest.mark.parametrize("tree", ["static", "dynamic"])
def test_greedy_output_is_plain(hidden_model: pyaccel.Model, plain_runs: list, text_heads: MedusaHeads,
                                tree: str) -> None:
    gen = pyaccel.Generator(hidden_model, FirstHidden(text_heads, tree=tree, max_nodes=NODES, cost_model=False))
    for prompt, want in plain_runs:
        got = gen.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(hidden_model, prompt, want, got.tokens)
        assert got.stats.accepted <= got.stats.drafted
    counters = gen.method.counters
    assert counters["accepted"] > 0, counters
    assert counters["heads_runs"] == counters["verified_steps"] > 0
    assert counters["nodes_per_verified_step"] > 8  # trees, not chains


def test_the_first_step_reads_the_prompts_last_hidden_state(hidden_model: pyaccel.Model, plain_runs: list,
                                                           text_heads: MedusaHeads) -> None:
    prompt = plain_runs[0][0]
    method = FirstHidden(text_heads, max_nodes=NODES, cost_model=False)
    hidden_model.cache.truncate(0)  # the whole prompt in one batch, as the reference below
    pyaccel.Generator(hidden_model, method).generate(prompt, max_tokens=3)
    hidden_model.cache.truncate(0)
    backend = hidden_model.backend
    with backend.hidden_states_off():
        backend.prefill(prompt[:-1], start_pos=0)
    backend.decode(prompt[-1:], [len(prompt) - 1])  # the prompt's last token, as a prefill leaves it
    want = np.array(backend.embeddings_rows()[-1])
    hidden_model.cache.truncate(0)
    np.testing.assert_array_equal(method.first_h, want)


class SeenTokens(Medusa):
    """Medusa that records the token each run of its heads was given."""

    def _tree_at(self, heads: MedusaHeads, h: np.ndarray, token: int) -> tuple:
        self.seen = getattr(self, "seen", []) + [token]
        return super()._tree_at(heads, h, token)


def conditioned(heads: MedusaHeads, seed: int = 1) -> MedusaHeads:
    """`heads` with a random token-conditioning block (U and normalised embeddings)."""
    rng = np.random.default_rng(seed)
    w = heads.weights
    d, v = w.n_embd, w.draft_vocab
    u = (rng.standard_normal(w.w.shape) * (2.0 / np.sqrt(d))).astype(np.float32)
    embd = rng.standard_normal((v, d)).astype(np.float32)
    return MedusaHeads(HeadWeights(w.w, w.b, w.out, w.vocab, u, embd), heads.meta)


@pytest.mark.parametrize("tree", ["static", "dynamic"])
def test_token_conditioned_heads_read_the_last_committed_token(hidden_model: pyaccel.Model, plain_runs: list,
                                                               text_heads: MedusaHeads, tree: str) -> None:
    heads = conditioned(text_heads)
    method = SeenTokens(heads, tree=tree, max_nodes=NODES, cost_model=False)
    gen = pyaccel.Generator(hidden_model, method)
    for prompt, want in plain_runs:
        method.seen = []
        got = gen.generate(prompt, max_tokens=N_TOKENS)
        assert_greedy_equivalent(hidden_model, prompt, want, got.tokens)
        # Every run follows a committed token: the first the prefill's, the rest a step's last.
        assert method.seen[0] == got.tokens[0] and set(method.seen) <= set(got.tokens)
    assert method.counters["accepted"] > 0
    h = np.random.default_rng(2).standard_normal(heads.weights.n_embd).astype(np.float32)
    a, b = (heads.weights.top(h, 4, int(t))[0] for t in heads.weights.vocab[:2])
    assert not np.array_equal(a, b)  # the token changes the ranking


def test_cost_model_keeps_the_heads_off_where_they_cannot_pay(hidden_model: pyaccel.Model, plain_runs: list,
                                                             text_heads: MedusaHeads) -> None:
    prompt, want = plain_runs[1]
    steep = CostModel.fixed([float(b) for b in range(1, 65)])  # b tokens cost b: nothing can pay
    gen = pyaccel.Generator(hidden_model, Medusa(text_heads, costs=steep, heads_cost=0.01))
    got = gen.generate(prompt, max_tokens=N_TOKENS)
    assert gen.method.counters["heads_runs"] == 0
    assert got.tokens == want
    flat = CostModel.fixed([1.0 + 0.001 * b for b in range(64)])
    for tree in ("static", "dynamic"):
        gen = pyaccel.Generator(hidden_model, Medusa(text_heads, tree=tree, max_nodes=NODES, costs=flat,
                                                            heads_cost=0.01))
        got = gen.generate(prompt, max_tokens=N_TOKENS)
        assert gen.method.counters["verified_steps"] > N_TOKENS // 4
        assert_greedy_equivalent(hidden_model, prompt, want, got.tokens)
    costly = Medusa(text_heads, costs=flat, heads_cost=5.0)  # K + 1 tokens never repay 5 tokens of heads
    gen = pyaccel.Generator(hidden_model, costly)
    gen.generate(prompt, max_tokens=N_TOKENS)
    assert costly.counters["heads_runs"] == 0
    # A tree always accepted would pay, the estimated ones do not: the heads run only as probes.
    shallow = CostModel.fixed([1.0 + 0.9 * b for b in range(64)])
    probing = Medusa(text_heads, costs=shallow, heads_cost=0.01,
                     tuning=MedusaTuning(recheck_every=4, probe_backoff_max=4))
    got = pyaccel.Generator(hidden_model, probing).generate(prompt, max_tokens=N_TOKENS)
    assert probing.counters["heads_runs"] == probing.counters["probes"] >= 3
    assert_greedy_equivalent(hidden_model, prompt, want, got.tokens)
    # Probes that find nothing paying back off: intervals 4, 8, 16 (steps 4 and 12 of 19).
    backing_off = Medusa(text_heads, costs=shallow, heads_cost=0.01, tuning=MedusaTuning(recheck_every=4))
    pyaccel.Generator(hidden_model, backing_off).generate(prompt, max_tokens=N_TOKENS)
    assert backing_off.counters["heads_runs"] == backing_off.counters["probes"] == 2


def test_sampling_distribution_is_the_targets(hidden_model: pyaccel.Model) -> None:
    prompt = hidden_model.tokenize("import numpy as")
    first = int(np.argmax(target_distribution(hidden_model, prompt, temperature=1.0)))
    p = target_distribution(hidden_model, prompt + [first], temperature=1.0)
    # Untrained heads (every head the same) whose rows are aimed at the hidden state of the
    # prompt's last token: their ranking there is the target's own for the second token, so
    # drafts are accepted often and rejected often.
    likely = np.argsort(p)[::-1][:6]
    hidden_model.cache.truncate(0)
    hidden_model.cache.prefill(prompt)
    h = np.array(hidden_model.backend.embeddings_rows()[-1], dtype=np.float64)
    hidden_model.cache.truncate(0)
    order = np.argsort(likely)  # the draft vocabulary is sorted by id
    out = (np.linspace(4.0, -1.0, len(likely))[order, None] * h[None, :] / float(h @ h)).astype(np.float32)
    heads = MedusaHeads(HeadWeights.untrained(3, out, likely[order].astype(np.int32)), target_meta(hidden_model))
    gen = pyaccel.Generator(hidden_model, Medusa(heads, tree="dynamic", max_nodes=NODES, cost_model=False))
    counts = second_token_counts(gen, prompt, range(200), temperature=1.0)
    observed = counts[first]
    assert sum(observed.values()) > 100
    assert gen.method.counters["accepted"] > 40
    assert chi_square_pvalue(observed, p) > 1e-3


class TypicalCheck(Medusa):
    """Medusa that checks every verification against the typical rule, recomputed here."""

    def observe(self, outcome: StepOutcome) -> None:
        tp, draft = self.typical, outcome.draft
        logits = np.asarray(outcome.logits[: 1 + len(draft)], dtype=np.float64)

        def acceptable(node: int) -> bool:
            row = logits[1 + draft.parents[node]]
            p = np.exp(row - row.max())
            p /= p.sum()
            entropy = -float(np.sum(p[p > 0] * np.log(p[p > 0])))
            return p[draft.tokens[node]] > min(tp.epsilon, tp.delta * np.exp(-entropy))

        def deepest(parent: int) -> int:
            kids = [i for i in range(len(draft)) if draft.parents[i] == parent and acceptable(i)]
            return max((1 + deepest(i) for i in kids), default=0)

        for node in outcome.accepted:
            assert acceptable(node)
        assert len(outcome.accepted) == deepest(-1)
        super().observe(outcome)


def test_typical_acceptance_keeps_its_thresholds(hidden_model: pyaccel.Model, text_heads: MedusaHeads) -> None:
    tp = _core.TypicalParams(epsilon=0.2, delta=0.5)
    method = TypicalCheck(text_heads, tree="dynamic", max_nodes=NODES, cost_model=False, typical=tp)
    gen = pyaccel.Generator(hidden_model, method)
    gen.generate(PROMPTS[1], max_tokens=N_TOKENS, temperature=1.0, seed=0)
    assert method.counters["accepted"] > 0


def test_misuse_is_a_clear_error(gemma: pyaccel.Model, hidden_model: pyaccel.Model, text_heads: MedusaHeads,
                                 tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="embeddings=True"):
        pyaccel.Generator(gemma, Medusa(text_heads))
    with pytest.raises(ValueError, match="n_seq_max=64"):
        pyaccel.Generator(hidden_model, Medusa(text_heads, max_paths=64))
    with pytest.raises(ValueError, match="dynamic"):
        pyaccel.Generator(hidden_model, Medusa(MedusaHeads(text_heads.weights, target_meta(hidden_model, ())),
                                               tree="static"))
    qwen = pyaccel.load_registry().get("qwen2.5-coder-1.5b-instruct")
    other = replace(text_heads.meta, target_name=qwen.name, target_sha256=qwen.sha256, architecture="qwen2")
    path = save_heads(tmp_path / "qwen-heads.gguf", MedusaHeads(text_heads.weights, other))
    with pytest.raises(ValueError, match="trained for 'qwen2.5-coder-1.5b-instruct', not for the model"):
        pyaccel.Generator(hidden_model, f"medusa:heads={path}")
    with pytest.raises(FileNotFoundError, match=r"train heads for '.+' with `pyaccel medusa train -m \S+ -o \S*none\.gguf`"):
        pyaccel.Generator(hidden_model, Medusa(tmp_path / "none.gguf"))


def test_cli_generate_with_medusa_opens_the_model_with_hidden_states(
        gemma_path: Path, text_heads: MedusaHeads, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pyaccel.cli import main

    path = save_heads(tmp_path / "heads.gguf", text_heads)
    assert main(["generate", "-m", str(gemma_path), "--n-ctx", "256", "--method", "medusa:cost_model=false,max_nodes=8",
                 "--heads", str(path), "--max-tokens", "12", "--json", PROMPTS[1]]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["new_tokens"] == 12 and stats["drafted"] > 0
