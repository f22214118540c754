"""Medusa heads training: the numpy backward against finite differences, the split, the
labels, resuming from a checkpoint, and training on the real target's own answers."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel.cli import main
from pyaccel.methods.medusa import collect, pipeline
from pyaccel.methods.medusa import train as T
from pyaccel.methods.medusa.collect import CollectConfig, Collector, open_model, prompt_tokens
from pyaccel.methods.medusa.data import EVAL, TRAIN, DataStore, Dataset, default_prompts, file_prompts, held_out, \
    interleave, labels, shipped_prompts, specbench_prompts
from pyaccel.methods.medusa.evaluate import rank_accuracy
from pyaccel.methods.medusa.format import load_heads, model_sha256
from pyaccel.methods.medusa.heads import HeadWeights
from pyaccel.methods.medusa.outmatrix import output_rows

from lossless import assert_greedy_equivalent


def _loss(h: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray, y: np.ndarray,
          e: np.ndarray | None = None, u: np.ndarray | None = None) -> float:
    """Reference: the summed cross-entropy written directly from the definition (float64)."""
    pre = h @ w.T + b + (e @ u.T if u is not None else 0.0)
    z = h + pre / (1 + np.exp(-pre))
    logits = z @ out.T
    total = 0.0
    for row, label in zip(logits, y):
        if label >= 0:
            total += np.log(np.exp(row - row.max()).sum()) + row.max() - row[label]
    return total


def test_backward_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    n, d, v = 7, 6, 11
    h, w = rng.standard_normal((n, d)), rng.standard_normal((d, d)) * 0.5
    b, out = rng.standard_normal(d) * 0.5, rng.standard_normal((v, d))
    y = np.array([3, -1, 0, 10, -2, 5, 5])  # -1 / -2: left out of the loss
    loss, count, dw, db, du = T.head_loss_grad(h, w, b, out, y)
    assert count == 5 and loss == pytest.approx(_loss(h, w, b, out, y), rel=1e-9) and du is None
    eps = 1e-6
    for (i, j) in [(0, 0), (2, 5), (5, 1), (3, 3)]:
        wp, wm = w.copy(), w.copy()
        wp[i, j] += eps
        wm[i, j] -= eps
        fd = (_loss(h, wp, b, out, y) - _loss(h, wm, b, out, y)) / (2 * eps)
        assert dw[i, j] == pytest.approx(fd, rel=1e-4, abs=1e-6)
    for j in range(d):
        bp, bm = b.copy(), b.copy()
        bp[j] += eps
        bm[j] -= eps
        assert db[j] == pytest.approx((_loss(h, w, bp, out, y) - _loss(h, w, bm, out, y)) / (2 * eps), rel=1e-4, abs=1e-6)


def test_token_conditioned_backward_matches_finite_differences() -> None:
    rng = np.random.default_rng(5)
    n, d, v = 7, 6, 11
    h, e = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    w, u = rng.standard_normal((d, d)) * 0.5, rng.standard_normal((d, d)) * 0.5
    b, out = rng.standard_normal(d) * 0.5, rng.standard_normal((v, d))
    y = np.array([3, -1, 0, 10, -2, 5, 5])
    loss, count, dw, db, du = T.head_loss_grad(h, w, b, out, y, e, u)
    assert count == 5 and loss == pytest.approx(_loss(h, w, b, out, y, e, u), rel=1e-9)
    eps = 1e-6
    for (i, j) in [(0, 0), (2, 5), (5, 1), (3, 3)]:
        for grad, param in ((du, u), (dw, w)):
            plus, minus = param.copy(), param.copy()
            plus[i, j] += eps
            minus[i, j] -= eps
            args_p = (w, plus) if param is u else (plus, u)
            args_m = (w, minus) if param is u else (minus, u)
            fd = (_loss(h, args_p[0], b, out, y, e, args_p[1]) - _loss(h, args_m[0], b, out, y, e, args_m[1])) / (2 * eps)
            assert grad[i, j] == pytest.approx(fd, rel=1e-4, abs=1e-6)
    bp, bm = b.copy(), b.copy()
    bp[2] += eps
    bm[2] -= eps
    assert db[2] == pytest.approx((_loss(h, w, bp, out, y, e, u) - _loss(h, w, bm, out, y, e, u)) / (2 * eps), rel=1e-4)


def _conditioned(k: int, d: int, v: int, seed: int) -> HeadWeights:
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return HeadWeights(f(k, d, d), f(k, d), f(v, d), np.arange(100, 100 + v, dtype=np.int32), f(k, d, d), f(v, d))


def test_token_conditioned_heads_against_a_direct_reference() -> None:
    k, d, v = 3, 8, 30
    hw = _conditioned(k, d, v, 4)
    h = np.random.default_rng(9).standard_normal(d).astype(np.float32)
    for token, e in ((107, hw.embd[7].astype(np.float64)), (99, np.zeros(d)), (5000, np.zeros(d))):
        ids, probs = hw.top(h, 4, token)  # 99 and 5000 lie outside the draft vocabulary: e = 0
        for head in range(k):
            pre = hw.w[head].astype(np.float64) @ h + hw.u[head].astype(np.float64) @ e + hw.b[head]
            logits = hw.out.astype(np.float64) @ (h + pre / (1 + np.exp(-pre)))
            order = np.argsort(-logits)[:4]
            assert list(ids[head]) == list(100 + order)
            p = np.exp(logits - logits.max())
            np.testing.assert_allclose(probs[head], (p / p.sum())[order], rtol=1e-4)
    with pytest.raises(ValueError, match="need e"):
        hw.logits(h[None])
    with pytest.raises(ValueError, match="both u and embd"):
        HeadWeights(hw.w, hw.b, hw.out, hw.vocab, hw.u, None)


def test_features_and_top_against_a_direct_reference() -> None:
    rng = np.random.default_rng(3)
    k, d, v = 3, 8, 30
    hw = HeadWeights(rng.standard_normal((k, d, d)).astype(np.float32), rng.standard_normal((k, d)).astype(np.float32),
                     rng.standard_normal((v, d)).astype(np.float32), np.arange(100, 100 + v, dtype=np.int32))
    h = rng.standard_normal(d).astype(np.float32)
    for head in range(k):
        pre = hw.w[head].astype(np.float64) @ h + hw.b[head]
        logits = hw.out.astype(np.float64) @ (h + pre / (1 + np.exp(-pre)))
        np.testing.assert_allclose(hw.logits(h[None])[head, 0], logits, rtol=1e-4, atol=1e-4)
        ids, probs = hw.top(h, 4)
        order = np.argsort(-logits)[:4]
        assert list(ids[head]) == list(100 + order)
        p = np.exp(logits - logits.max())
        np.testing.assert_allclose(probs[head], (p / p.sum())[order], rtol=1e-4)


def test_rank_accuracy_against_sorting() -> None:
    rng = np.random.default_rng(1)
    k, d, v, n = 2, 5, 12, 60
    hw = HeadWeights(rng.standard_normal((k, d, d)).astype(np.float32), np.zeros((k, d), np.float32),
                     rng.standard_normal((v, d)).astype(np.float32), np.arange(0, 2 * v, 2, dtype=np.int32))
    h = rng.standard_normal((n, d)).astype(np.float32)
    lab = rng.integers(0, 2 * v, (n, k)).astype(np.int32)  # odd ids lie outside the draft vocabulary
    lab[:5, 1] = -1  # no label: left out
    got = rank_accuracy(hw, h, lab, topk=4, chunk=16)
    logits = hw.logits(h)
    for head in range(k):
        ranks = [list(hw.vocab[np.argsort(-logits[head, r])]).index(lab[r, head]) if lab[r, head] in hw.vocab else 99
                 for r in range(n) if lab[r, head] >= 0]
        want = [np.mean([x == i for x in ranks]) for i in range(4)]
        np.testing.assert_allclose(got[head], want)


def test_rank_accuracy_of_token_conditioned_heads_reads_each_rows_token() -> None:
    k, d, v, n = 2, 5, 12, 40
    hw = _conditioned(k, d, v, 2)
    rng = np.random.default_rng(3)
    h = rng.standard_normal((n, d)).astype(np.float32)
    tokens = rng.integers(95, 100 + v, n).astype(np.int32)  # some outside the draft vocabulary
    lab = rng.integers(100, 100 + v, (n, k)).astype(np.int32)
    got = rank_accuracy(hw, h, lab, topk=3, chunk=7, tokens=tokens)
    for head in range(k):
        ranks = [list(hw.top(h[r], v, int(tokens[r]))[0][head]).index(lab[r, head]) for r in range(n)]
        np.testing.assert_allclose(got[head], [np.mean([x == i for x in ranks]) for i in range(3)])
    with pytest.raises(ValueError, match="tokens"):
        rank_accuracy(hw, h, lab)


def test_labels_look_ahead_within_a_sequence() -> None:
    ds = Dataset(np.zeros((7, 2), np.float16), np.array([10, 11, 12, 13, 20, 21, 22], np.int32),
                 np.array([0, 0, 0, 0, 1, 1, 1]), np.zeros(7, bool), np.zeros(7, np.int32), ("c",))
    assert labels(ds, 2).tolist() == [[10, 11, 12], [11, 12, 13], [12, 13, -1], [13, -1, -1],
                                      [20, 21, 22], [21, 22, -1], [22, -1, -1]]


def test_vocabulary_and_draft_labels() -> None:
    lab = np.array([[5, 5, 3], [3, 5, -1], [9, 1, 1]], np.int32)  # counts: 5x3, 3x2, 1x2, 9x1
    vocab = T.choose_vocab(lab, 3, 20)
    assert vocab.tolist() == [5, 1, 3]
    assert T.choose_vocab(lab, 6, 20).tolist() == [5, 1, 3, 9, 0, 2]  # then the lowest unused ids
    assert T.to_draft(lab, vocab, 20).tolist() == [[0, 0, 2], [2, 0, T.MISSING], [T.OUTSIDE, 1, 1]]


def test_split_never_overlaps(tmp_path: Path) -> None:
    qs = tmp_path / "q.jsonl"
    rows = [{"question_id": i, "category": "ab"[i % 2], "turns": [f"question {i}"]} for i in range(40)]
    qs.write_text("\n".join(json.dumps(r) for r in rows))
    prompts = specbench_prompts(qs) + shipped_prompts()
    assert len({p.id for p in prompts}) == len(prompts)
    for cat in {p.category for p in prompts}:
        mine = [p for p in prompts if p.category == cat]
        assert [p.held_out for p in mine] == [held_out(i) for i in range(len(mine))]
        assert sum(p.held_out for p in mine) == len(mine) // 5
    assert {p.text for p in prompts if p.held_out}.isdisjoint({p.text for p in prompts if not p.held_out})
    # The order a run uses does not move a prompt across the split.
    again = interleave(specbench_prompts(qs))
    assert {p.id for p in again if p.held_out} == {p.id for p in prompts if p.held_out and p.id.startswith("specbench/")}
    text = tmp_path / "mine.txt"
    text.write_text("one\n\ntwo\n\nthree\n\nfour\n\nfive\n\nsix")
    assert [p.held_out for p in file_prompts(text)] == [False] * 4 + [True, False]


def test_missing_questions_say_what_to_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="--questions"):
        default_prompts(tmp_path / "nope.jsonl")


def test_a_bad_questions_file_is_named_not_searched_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--questions given: its own problem is reported, not "not in ../shared/data"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="nothere.jsonl") as missing:
        default_prompts(Path("nothere.jsonl"))
    assert "shared/data" not in str(missing.value)
    folder = tmp_path / "adir.jsonl"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match="adir.jsonl"):
        default_prompts(folder)
    wrong = tmp_path / "q.jsonl"
    wrong.write_text('{"category": "qa", "turns": ["one"]}\n{"prompt": "no category"}\n')
    with pytest.raises(ValueError, match=r"q\.jsonl line 2 is not a Spec-Bench question"):
        default_prompts(wrong)


@pytest.mark.parametrize("line", ["5", "[1, 2]", '"text"', "null"])
def test_data_lines_that_are_not_objects_are_named(tmp_path: Path, line: str) -> None:
    data = tmp_path / "mine.jsonl"
    data.write_text(f'{{"prompt": "one"}}\n\n{line}\n')
    with pytest.raises(ValueError, match=r"mine\.jsonl line 3 is a JSON \w+, not an object: write one object a line, with a \"prompt\""):
        file_prompts(data)


def test_unreadable_data_files_are_named(tmp_path: Path) -> None:
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"caf\xe9\n\nmore")
    with pytest.raises(ValueError, match=r"blob\.txt is not UTF-8 text"):
        file_prompts(binary)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=r"empty\.jsonl holds no prompts"):
        file_prompts(empty)


def _toy(seed: int, n: int = 300, d: int = 12, v: int = 20) -> tuple[np.ndarray, T.TrainData, T.TrainData]:
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((v, d)).astype(np.float32)
    h = rng.standard_normal((n, d)).astype(np.float32)
    y = (np.argmax(h @ rng.standard_normal((d, v)), axis=1)[:, None] + np.arange(3)) % v  # learnable labels
    token = rng.integers(-1, v, n)  # the token after each row (-1: outside the draft vocabulary)
    return out, T.TrainData(h[:240].astype(np.float16), y[:240].astype(np.int32), token[:240]), \
        T.TrainData(h[240:].astype(np.float16), y[240:].astype(np.int32), token[240:])


def _token_toy(seed: int, n: int = 400, d: int = 12, v: int = 20) -> tuple[np.ndarray, np.ndarray, T.TrainData,
                                                                          T.TrainData]:
    """Labels that depend on the token after h only: what h alone cannot predict."""
    rng = np.random.default_rng(seed)
    out, embd = rng.standard_normal((v, d)).astype(np.float32), rng.standard_normal((v, d)).astype(np.float32)
    h = rng.standard_normal((n, d)).astype(np.float16)
    token = rng.integers(0, v, n)
    y = ((token[:, None] * 7 + np.arange(3)) % v).astype(np.int32)
    return out, embd, T.TrainData(h[:320], y[:320], token[:320]), T.TrainData(h[320:], y[320:], token[320:])


@pytest.mark.parametrize("conditioned", [False, True])
def test_interrupted_training_resumes_to_the_same_weights(tmp_path: Path, conditioned: bool) -> None:
    out, tr, va = _toy(0)
    embd = np.random.default_rng(7).standard_normal(out.shape).astype(np.float32) if conditioned else None
    cfg = T.TrainConfig(n_heads=3, draft_vocab=20, steps=24, batch=32, lr=3e-2, validate_every=8, checkpoint_s=1e9,
                        token_conditioned=conditioned)
    fresh = lambda: T.TrainState.fresh(3, 12, np.arange(20, dtype=np.int32), conditioned)  # noqa: E731
    whole = T.train_heads(fresh(), cfg, out, tr, va, embd=embd)

    def stop_at_ten(p: T.TrainProgress) -> None:
        if p.step == 10:
            raise KeyboardInterrupt

    ckpt = tmp_path / "c.npz"
    with pytest.raises(KeyboardInterrupt):
        T.train_heads(fresh(), cfg, out, tr, va, ckpt, stop_at_ten, embd)
    saved = T.load_checkpoint(ckpt, cfg)
    assert saved.step == 10
    resumed = T.train_heads(saved, cfg, out, tr, va, ckpt, embd=embd)
    assert resumed.step == 24
    np.testing.assert_allclose(resumed.w, whole.w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(resumed.best_w, whole.best_w, rtol=1e-5, atol=1e-6)
    if conditioned:
        assert np.abs(whole.u).max() > 0
        np.testing.assert_allclose(resumed.u, whole.u, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(resumed.best_u, whole.best_u, rtol=1e-5, atol=1e-6)
    else:
        assert resumed.u is None and whole.u is None
    assert [s for s, _, _ in resumed.history] == [s for s, _, _ in whole.history]
    for other in (T.TrainConfig(n_heads=2, draft_vocab=20, token_conditioned=conditioned),
                  replace(cfg, draft_vocab=21), replace(cfg, token_conditioned=not conditioned)):
        with pytest.raises(ValueError, match="--resume"):
            T.load_checkpoint(ckpt, other)
        with pytest.raises(ValueError, match="--resume"):  # what --resume checks before collecting
            T.check_checkpoint(ckpt, other)
    T.check_checkpoint(ckpt, cfg)


def test_token_conditioning_learns_what_the_hidden_state_cannot_tell() -> None:
    out, embd, tr, va = _token_toy(2)
    accs = {}
    for conditioned in (False, True):
        cfg = T.TrainConfig(n_heads=3, draft_vocab=20, steps=150, batch=64, lr=3e-2, validate_every=1000,
                            token_conditioned=conditioned)
        state = T.train_heads(T.TrainState.fresh(3, 12, np.arange(20, dtype=np.int32), conditioned), cfg, out, tr, va,
                              embd=embd if conditioned else None)
        weights = T.final_weights(state, out, embd if conditioned else None)
        accs[conditioned] = rank_accuracy(weights, va.hidden, va.labels, 1, tokens=va.token)[:, 0]
    assert (accs[True] > 0.7).all() and (accs[False] < 0.2).all(), accs  # chance: 1 / 20


def test_training_lowers_the_toy_loss() -> None:
    out, tr, va = _toy(1)
    cfg = T.TrainConfig(n_heads=3, draft_vocab=20, steps=60, batch=32, lr=3e-2, validate_every=1000)
    state = T.TrainState.fresh(3, 12, np.arange(20, dtype=np.int32))
    before, _ = T.validation(state.w, state.b, out, va.hidden, va.labels, cfg.head_decay)
    state = T.train_heads(state, cfg, out, tr, va)
    after, acc = T.validation(state.w, state.b, out, va.hidden, va.labels, cfg.head_decay)
    assert after < 0.7 * before and acc[0] > 3 / 20  # chance: 1 / 20



def test_adam_decay_shrinks_only_when_asked() -> None:
    """Decoupled decay: with a zero gradient, decay 0 leaves the parameter as it was and decay d
    scales it by exactly 1 - lr d."""
    p = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    for decay, expected in ((0.0, p), (0.5, p * np.float32(1 - 0.1 * 0.5))):
        q, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
        T._adam(q, np.zeros_like(p), m, v, 1, 0.1, decay)
        np.testing.assert_array_equal(q, expected)


def test_weight_decay_shrinks_w_and_u_and_zero_changes_nothing() -> None:
    out, tr, va = _toy(4)
    embd = np.random.default_rng(5).standard_normal(out.shape).astype(np.float32)
    base = T.TrainConfig(n_heads=3, draft_vocab=20, steps=40, batch=32, lr=3e-2, validate_every=1000)
    states = {}
    for name, cfg in (("default", base), ("zero", replace(base, weight_decay=0.0)),
                      ("decayed", replace(base, weight_decay=5.0))):
        fresh = T.TrainState.fresh(3, 12, np.arange(20, dtype=np.int32), True)
        states[name] = T.train_heads(fresh, cfg, out, tr, va, embd=embd)
    for a in ("w", "b", "u"):
        np.testing.assert_array_equal(getattr(states["zero"], a), getattr(states["default"], a))
    for a in ("w", "u"):
        assert np.linalg.norm(getattr(states["decayed"], a)) < 0.9 * np.linalg.norm(getattr(states["default"], a))

GEMMA_PROMPTS = [
    "List the planets of the solar system in order.", "Write a Python function that adds two numbers.",
    "Explain what a hash table is.", "Count from one to twenty in words.", "Name five colours of the rainbow.",
    "Describe the water cycle.", "Write a haiku about autumn.", "What is the capital of Japan?",
    "Give three tips for learning to code.", "Explain photosynthesis in simple terms.",
]


def test_collection_matches_plain_greedy(gemma_path: Path, tmp_path: Path) -> None:
    """The collected answer is the target's own greedy answer (near-tie rule), and its rows
    are laid out as the labels expect."""
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS[:2]))
    cfg = CollectConfig(slots=2, max_new_tokens=24, max_prompt_tokens=256, n_ctx=1024, prompt_rows=4)
    with open_model(str(gemma_path), cfg, n_threads=1, progress=False) as model:
        store = DataStore(tmp_path / "store", model_sha256(model), model.backend.n_embd)
        prompts = file_prompts(data)
        Collector(model, store, TRAIN, cfg).run(prompts, deadline=float("inf"))
        ds = store.load(TRAIN)
        plain = pyaccel.Generator(model, "plain")
        for s, p in enumerate(prompts):
            rows = ds.seq == s
            assert ds.prompt[rows].sum() == 3  # prompt_rows - 1 prompt rows, then the answer rows
            answer = ds.next[rows][3:].tolist()
            tokens = prompt_tokens(model, p.text)
            want = plain.generate(tokens, max_tokens=24).tokens
            assert_greedy_equivalent(model, tokens, want, answer[:len(want)])
    assert store.done(TRAIN) == {p.id for p in prompts}


def test_training_lowers_held_out_loss_on_gemma(gemma_path: Path, tmp_path: Path) -> None:
    """A small slice: 8 training answers, 2 held-out answers; 40 steps lower the held-out loss."""
    cfg = CollectConfig(slots=5, max_new_tokens=48, n_ctx=2048, prompt_rows=1)
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS))
    prompts = file_prompts(data)
    with open_model(str(gemma_path), cfg, n_threads=2, progress=False) as model:
        store = DataStore(tmp_path / "store", model_sha256(model), model.backend.n_embd)
        for split in (TRAIN, EVAL):
            Collector(model, store, split, cfg).run([p for p in prompts if p.held_out == (split == EVAL)],
                                                    deadline=float("inf"))
        n_vocab = model.n_vocab
    train_ds, val_ds = store.load(TRAIN), store.load(EVAL)
    tc = T.TrainConfig(n_heads=2, draft_vocab=1024, steps=40, batch=64, lr=2e-3, validate_every=1000)
    lab_train, lab_val = labels(train_ds, 2)[:, 1:], labels(val_ds, 2)[:, 1:]
    state = T.TrainState.fresh(2, train_ds.hidden.shape[1], T.choose_vocab(lab_train, tc.draft_vocab, n_vocab))
    out = output_rows(gemma_path, state.vocab)
    tr = T.TrainData(train_ds.hidden, T.to_draft(lab_train, state.vocab, n_vocab))
    va = T.TrainData(val_ds.hidden, T.to_draft(lab_val, state.vocab, n_vocab))
    before, _ = T.validation(state.w, state.b, out, va.hidden, va.labels, tc.head_decay)
    state = T.train_heads(state, tc, out, tr, va)
    after, _ = T.validation(state.w, state.b, out, va.hidden, va.labels, tc.head_decay)
    assert after < before - 0.5, (before, after)


def test_cli_train_resume_info_and_eval(gemma_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The commands end to end on a tiny budget: train writes a heads file with held-out
    accuracy, --resume continues the training where it stopped, eval measures the heads
    and the tau of Medusa decoding with them."""
    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS))
    out = tmp_path / "h.gguf"
    args = ["medusa", "train", "-m", str(gemma_path), "--data", str(data), "-o", str(out), "--heads", "2",
            "--draft-vocab", "256", "--eval-minutes", "0.2", "--collect-minutes", "0.3", "--batch", "32",
            "--slots", "4", "--max-new-tokens", "16", "--threads", "2"]
    assert main(args + ["--steps", "4"]) == 0
    assert "4 steps" in capsys.readouterr().out
    heads = load_heads(out)
    assert heads.n_heads == 2 and heads.weights.draft_vocab == 256 and len(heads.meta.rank_accuracy) == 2
    assert heads.meta.train_tokens > 0 and heads.meta.target_name == gemma_path.name
    assert main(args + ["--steps", "6", "--resume"]) == 0
    assert "6 steps" in capsys.readouterr().out
    alone = tmp_path / "alone.gguf"
    assert main([str(alone) if a == str(out) else a for a in args]
                + ["--steps", "2", "--keep-data", "--no-token-conditioning"]) == 0
    capsys.readouterr()
    assert heads.weights.conditioned and not load_heads(alone).weights.conditioned
    assert main(["medusa", "eval", "-m", str(gemma_path), "--heads", str(out), "--data", str(data),
                 "--tau-prompts", "1", "--max-tokens", "12", "--threads", "2"]) == 0
    text = capsys.readouterr().out
    assert "held-out answer positions" in text and "one target token" in text and "tau median" in text


def _refuse_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make opening a model fail the test: these mistakes must be reported before any model
    loads, so before collection and before an earlier run's data is cleared."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was opened before the options were checked")

    monkeypatch.setattr(pipeline, "open_model", refuse)
    monkeypatch.setattr(collect, "open_model", refuse)


@pytest.mark.parametrize("flags, message", [
    (["--heads", "0"], "--heads must be >= 1, got 0"),
    (["--lr", "-1"], "--lr must be a number > 0, got -1.0"),
    (["--lr", "nan"], "--lr must be a number > 0, got nan"),
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--draft-vocab", "1"], "--draft-vocab must be >= 2, got 1"),
    (["--batch", "0"], "--batch must be >= 1, got 0"),
    (["--train-minutes", "0"], "--train-minutes must be > 0, got 0.0"),
    (["--collect-minutes", "0"], "--collect-minutes must be > 0"),
    (["--eval-minutes", "-1", "--keep-data"], "--eval-minutes must be >= 0, got -1.0"),
    (["--slots", "0"], "--slots must be in 1..256, got 0"),
    (["--max-new-tokens", "1"], "--max-new-tokens must be >= 2, got 1"),
    (["--max-new-tokens", "99999"], "--max-new-tokens must be <= 14848"),
    (["--threads", "-1"], "--threads must be >= 0"),
])
def test_train_names_the_flag_of_a_bad_option_before_any_work(
        flags: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))
    _refuse_models(monkeypatch)
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS))
    assert main(["medusa", "train", "--data", str(data), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Config(" not in err, err
    assert not (tmp_path / "home").exists()


def test_train_reports_every_bad_option_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _refuse_models(monkeypatch)
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS))
    assert main(["medusa", "train", "--data", str(data), "--heads", "0", "--batch", "0"]) == 2
    assert "--heads must be >= 1, got 0; --batch must be >= 1, got 0" in capsys.readouterr().err


def test_collection_budgets_may_be_zero_only_when_data_is_kept() -> None:
    assert pipeline.RunConfig(collect_minutes=0, keep_data=True).problems() == []
    assert pipeline.RunConfig(eval_minutes=0, resume=True).problems() == []
    assert [p.field for p in pipeline.RunConfig(collect_minutes=0, eval_minutes=0).problems()] == \
        ["collect_minutes", "eval_minutes"]
    with pytest.raises(ValueError, match="n_heads must be >= 1, got 0"):  # the library names fields
        T.TrainConfig(n_heads=0).validate()


@pytest.mark.parametrize("setup, args, message", [
    ("five.jsonl", ["--data", "{dir}/five.jsonl"], "five.jsonl line 1 is a JSON number, not an object"),
    ("", ["--questions", "{dir}/nothere.jsonl"], "no Spec-Bench question file at {dir}/nothere.jsonl"),
    ("few.txt", ["--data", "{dir}/few.txt"], "too few prompts (4)"),
    ("", ["--data", "{dir}/p.txt", "-o", "{dir}"], "-o {dir} is a folder"),
    ("", ["--data", "{dir}/p.txt", "-o", "{dir}/p.txt/h.gguf"], "{dir}/p.txt is a file, not a folder: pass another -o"),
])
def test_train_reports_bad_inputs_before_any_work(setup: str, args: list[str], message: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _refuse_models(monkeypatch)
    (tmp_path / "p.txt").write_text("\n\n".join(GEMMA_PROMPTS))
    (tmp_path / "five.jsonl").write_text("5\n")
    (tmp_path / "few.txt").write_text("\n\n".join(GEMMA_PROMPTS[:4]))
    assert main(["medusa", "train", *(a.format(dir=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err
    assert message.format(dir=tmp_path) in err and "Traceback" not in err, err


def test_eval_reports_bad_options_and_heads_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _refuse_models(monkeypatch)
    data = tmp_path / "p.txt"
    data.write_text("\n\n".join(GEMMA_PROMPTS))
    assert main(["medusa", "eval", "--data", str(data), "--max-tokens", "0"]) == 2
    assert "--max-tokens must be >= 1, got 0" in capsys.readouterr().err
    empty = tmp_path / "h.gguf"
    empty.touch()
    assert main(["medusa", "eval", "--data", str(data), "--heads", str(empty)]) == 2
    assert f"the Medusa heads file {empty} is empty" in capsys.readouterr().err


def test_slot_limit_is_llama_cpps() -> None:
    import llama_cpp

    assert collect.MAX_SLOTS == llama_cpp.llama_max_parallel_sequences()
