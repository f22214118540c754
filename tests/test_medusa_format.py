"""Medusa heads files: GGUF round trip, the binding to the target, the output-matrix reader."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel.cli import main
from pyaccel.methods.medusa.format import (
    check_target,
    default_heads_path,
    file_sha256,
    load_heads,
    meta_for,
    read_meta,
    save_heads,
)
from pyaccel.methods.medusa.heads import HeadsMeta, HeadWeights, MedusaHeads
from pyaccel.methods.medusa.outmatrix import output_rows, tensor_infos


def _heads(k: int = 3, d: int = 16, v: int = 40, seed: int = 0, conditioned: bool = False) -> MedusaHeads:
    rng = np.random.default_rng(seed)
    weights = HeadWeights(rng.standard_normal((k, d, d)).astype(np.float32), rng.standard_normal((k, d)).astype(np.float32),
                          rng.standard_normal((v, d)).astype(np.float32),
                          rng.choice(1000, v, replace=False).astype(np.int32),
                          rng.standard_normal((k, d, d)).astype(np.float32) if conditioned else None,
                          rng.standard_normal((v, d)).astype(np.float32) if conditioned else None)
    rank = tuple(tuple(float(x) for x in rng.dirichlet(np.ones(6))[:5]) for _ in range(k))
    meta = HeadsMeta("some-model", "ab" * 32, "qwen2", d, 1000, rank, train_tokens=12345)
    return MedusaHeads(weights, meta)


def test_round_trip_is_exact_for_f32_parts(tmp_path: Path) -> None:
    heads = _heads()
    path = save_heads(tmp_path / "sub" / "h.gguf", heads)
    got = load_heads(path)
    w, g = heads.weights, got.weights
    assert got.weights.w.dtype == np.float32 and np.array_equal(g.w, w.w) and np.array_equal(g.b, w.b)
    assert g.vocab.dtype == np.int32 and np.array_equal(g.vocab, w.vocab)
    # The output rows are stored as float16: exactly their f16 rounding comes back.
    assert np.array_equal(g.out, w.out.astype(np.float16).astype(np.float32))
    m = got.meta
    assert (m.target_name, m.target_sha256, m.architecture, m.n_embd, m.n_vocab, m.train_tokens) == \
        ("some-model", "ab" * 32, "qwen2", 16, 1000, 12345)
    want_rank = np.float32(np.array(heads.meta.rank_accuracy))
    assert np.array_equal(np.float32(np.array(m.rank_accuracy)), want_rank)
    assert read_meta(path) == (m, 3, 40)
    assert not list(tmp_path.rglob("*.partial"))
    assert g.u is None and g.embd is None and not g.conditioned  # heads of h alone (format 1's tensors)


def test_round_trip_of_token_conditioned_heads(tmp_path: Path) -> None:
    heads = _heads(conditioned=True)
    got = load_heads(save_heads(tmp_path / "h.gguf", heads)).weights
    w = heads.weights
    assert got.conditioned and got.u is not None and np.array_equal(got.u, w.u)
    assert got.embd is not None and np.array_equal(got.embd, w.embd.astype(np.float16).astype(np.float32))
    h = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    token = int(w.vocab[3])
    np.testing.assert_allclose(got.logits(h[None], got.embed([token])), w.logits(h[None], w.embed([token])),
                               rtol=1e-2, atol=1e-2)


def test_a_file_with_part_of_the_conditioning_is_refused(tmp_path: Path) -> None:
    import gguf

    heads = _heads(k=2, conditioned=True)
    path = save_heads(tmp_path / "h.gguf", heads)
    reader = gguf.GGUFReader(path)
    writer = gguf.GGUFWriter(tmp_path / "cut.gguf", "pyaccel-medusa")
    for f in reader.fields.values():
        if not f.name.startswith(("GGUF.", "general.architecture")):
            writer.add_key_value(f.name, f.contents(), f.types[0], f.types[-1] if len(f.types) > 1 else None)
    for t in reader.tensors:
        if t.name != "medusa.embd":
            writer.add_tensor(t.name, np.asarray(t.data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="token-conditioning tensors .* damaged"):
        load_heads(tmp_path / "cut.gguf")


def test_f16_weights_and_f32_output_rows(tmp_path: Path) -> None:
    heads = _heads(k=2)
    got = load_heads(save_heads(tmp_path / "h.gguf", heads, weight_type="f16", out_type="f32"))
    assert np.array_equal(got.weights.w, heads.weights.w.astype(np.float16).astype(np.float32))
    assert np.array_equal(got.weights.out, heads.weights.out)
    with pytest.raises(ValueError, match="'f32' or 'f16'"):
        save_heads(tmp_path / "x.gguf", heads, weight_type="q8")


def test_other_files_are_refused_clearly(tmp_path: Path) -> None:
    import gguf

    with pytest.raises(FileNotFoundError, match="pyaccel medusa train"):
        load_heads(tmp_path / "missing.gguf")
    writer = gguf.GGUFWriter(tmp_path / "other.gguf", "llama")
    writer.add_tensor("t", np.zeros(4, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="not a Medusa heads file"):
        load_heads(tmp_path / "other.gguf")


def test_tensor_rows_read_like_gguf_reader(tmp_path: Path) -> None:
    """The header walker finds the same tensors as gguf.GGUFReader, past string arrays."""
    import gguf

    rng = np.random.default_rng(1)
    table = rng.standard_normal((50, 64)).astype(np.float32)
    writer = gguf.GGUFWriter(tmp_path / "m.gguf", "test")
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(300)])
    writer.add_array("some.floats", [0.5, 1.5])
    writer.add_uint32("some.count", 7)
    writer.add_tensor("blk.0.weight", np.ones((3, 5), np.float32))
    writer.add_tensor("token_embd.weight", table.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    infos = tensor_infos(tmp_path / "m.gguf")
    reader = gguf.GGUFReader(tmp_path / "m.gguf")
    for t in reader.tensors:
        assert infos[t.name].offset == t.data_offset and infos[t.name].dims == tuple(int(x) for x in t.shape)
    ids = np.array([7, 0, 49], np.int32)
    assert np.array_equal(output_rows(tmp_path / "m.gguf", ids), table.astype(np.float16).astype(np.float32)[ids])
    with pytest.raises(ValueError, match="0..49"):
        output_rows(tmp_path / "m.gguf", np.array([50], np.int32))


def test_file_hash_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))
    f = tmp_path / "blob.bin"
    f.write_bytes(b"x" * 1000)
    want = hashlib.sha256(b"x" * 1000).hexdigest()
    assert file_sha256(f) == want
    assert (tmp_path / "home" / "medusa" / "sha256.json").is_file()
    assert file_sha256(f) == want


def test_info_prints_target_and_accuracy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_heads(tmp_path / "h.gguf", _heads())
    assert main(["medusa", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "some-model" in out and "heads: 3" in out and "draft vocabulary: 40" in out
    assert "head 1: top-1" in out
    assert "heads read: the hidden state\n" in out
    path = save_heads(tmp_path / "c.gguf", _heads(conditioned=True))
    assert main(["medusa", "info", str(path)]) == 0
    assert "heads read: the hidden state and the next token's embedding" in capsys.readouterr().out


def test_heads_for_another_target_are_refused(gemma: pyaccel.Model) -> None:
    mine = meta_for(gemma)
    check_target(mine, gemma)  # the right target passes
    other = HeadsMeta("qwen2.5-coder-1.5b-instruct", "cc" * 32, "qwen2", 1536, 151936)
    with pytest.raises(ValueError) as err:
        check_target(other, gemma)
    text = str(err.value)
    assert "qwen2.5-coder-1.5b-instruct" in text and gemma.name in text and "n_embd" in text
    same_shape_other_file = HeadsMeta("a-finetune", "dd" * 32, mine.architecture, mine.n_embd, mine.n_vocab)
    with pytest.raises(ValueError, match="sha256"):
        check_target(same_shape_other_file, gemma)
    assert default_heads_path(gemma).name == f"gemma-3-270m-{mine.target_sha256[:12]}.gguf"


def test_output_rows_give_the_targets_logits(gemma_path: Path) -> None:
    """O h over the draft rows reproduces the model's own logits (up to quantised matmuls)."""
    with pyaccel.Model(gemma_path, n_ctx=128, embeddings=True, n_threads=1, progress=False) as model:
        prompt = model.tokenize("The capital of France is Paris. The capital of Italy is")
        model.backend.decode(prompt, np.arange(len(prompt)))
        logits, hidden = np.array(model.backend.logits_rows()), np.array(model.backend.embeddings_rows())
    ids = np.concatenate([np.arange(0, 3000), np.argmax(logits, axis=1)]).astype(np.int32)
    ids = np.unique(ids)
    mine = hidden @ output_rows(gemma_path, ids).T
    assert np.abs(mine - logits[:, ids]).max() < 0.5
    assert np.array_equal(ids[np.argmax(mine, axis=1)], np.argmax(logits, axis=1))


@pytest.mark.parametrize("content, problem", [
    (b"", "the Medusa heads file {path} is empty"),
    (b"hello, not gguf", "{path} is not a Medusa heads file (not GGUF: it starts with b'hell')"),
    (None, "the Medusa heads file {path} is damaged or cut short"),  # a real heads file, cut short
])
def test_bad_heads_files_are_named_with_what_to_do(tmp_path: Path, content: bytes | None, problem: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.gguf"
    if content is None:
        content = save_heads(tmp_path / "whole.gguf", _heads()).read_bytes()[:100]
    path.write_bytes(content)
    for read in (load_heads, read_meta):
        with pytest.raises(ValueError) as err:
            read(path)
        assert str(err.value).startswith(problem.format(path=path)) and "pyaccel medusa train" in str(err.value)
    assert main(["medusa", "info", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_other_files_than_models_are_never_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`auto` looks for cached heads before the model loads: a file that is no GGUF model is
    refused as loading refuses it, and leaves nothing in the hash cache."""
    from pyaccel.errors import ModelLoadError
    from pyaccel.methods.medusa.format import cached_heads_path

    monkeypatch.setenv("PYACCEL_HOME", str(tmp_path / "home"))
    cache = tmp_path / "home" / "medusa" / "sha256.json"
    for name, content in (("empty.gguf", b""), ("text.gguf", b"hello")):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ModelLoadError, match="not a GGUF model file"):
            cached_heads_path(name, path)
        assert main(["generate", "-m", str(path), "hi"]) == 2
        assert f"{path} is not a GGUF model file" in capsys.readouterr().err
        assert not cache.exists()
    fake = tmp_path / "fake.gguf"  # GGUF magic: hashed and remembered like a model
    fake.write_bytes(b"GGUF" + b"\0" * 60)
    assert cached_heads_path("fake.gguf", fake).name == f"fake-{hashlib.sha256(fake.read_bytes()).hexdigest()[:12]}.gguf"
    assert cache.is_file()
