"""Medusa heads on disk: a GGUF file bound to its target model, and the target's output rows.

File layout (written with the `gguf` package; general.architecture = "pyaccel-medusa"):

    metadata  pyaccel-medusa.target.{name, sha256, architecture}, .n_embd, .n_vocab,
              .n_heads, .draft_vocab, .train_tokens, .rank_accuracy (K * topk floats,
              row-major) with .rank_topk, .format_version
    tensors   medusa.{k}.w [d, d] and medusa.{k}.b [d] for k = 0..K-1 (f32 or f16),
              medusa.vocab [V'] int32 (draft-vocabulary id -> full id),
              medusa.out [V', d] (the target's output rows of `vocab`, f16 or f32);
              token-conditioned heads (format 2) add medusa.{k}.u [d, d] and medusa.embd
              [V', d] (the normalised input embeddings of `vocab`, as `out`)

Heads read the target's own output matrix and embeddings, so the file carries the rows it
uses: decoding never opens the target GGUF a second time. Files without u (format 1) load
as heads of h alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ... import registry
from .heads import F32, HeadsMeta, HeadWeights, MedusaHeads

if TYPE_CHECKING:
    from gguf import GGUFReader

    from ...model import Model

ARCH = "pyaccel-medusa"
FORMAT_VERSION = 2
_HASH_BLOCK = 8 << 20
_HASH_CACHE_FILE = "sha256.json"
GGUF_MAGIC = b"GGUF"  # the first bytes of a GGUF file


def _key(name: str) -> str:
    return f"{ARCH}.{name}"


def _tensor_dtype(kind: str) -> type:
    if kind not in ("f32", "f16"):
        raise ValueError(f"tensor type must be 'f32' or 'f16', got {kind!r}")
    return np.float32 if kind == "f32" else np.float16


def save_heads(path: str | os.PathLike[str], heads: MedusaHeads, *, weight_type: str = "f32",
               out_type: str = "f16") -> Path:
    """Write `heads` to `path` (a .gguf file; folders are created). `weight_type` is the type
    of each head's w and b, `out_type` that of the output rows. Written to a temporary file
    and renamed, so an interrupted save leaves no half file."""
    import gguf

    wdt, odt = _tensor_dtype(weight_type), _tensor_dtype(out_type)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    hw, meta = heads.weights, heads.meta
    writer = gguf.GGUFWriter(tmp, ARCH)
    writer.add_uint32(_key("format_version"), FORMAT_VERSION)
    writer.add_string(_key("target.name"), meta.target_name)
    writer.add_string(_key("target.sha256"), meta.target_sha256)
    writer.add_string(_key("target.architecture"), meta.architecture)
    writer.add_uint32(_key("n_embd"), meta.n_embd)
    writer.add_uint32(_key("n_vocab"), meta.n_vocab)
    writer.add_uint32(_key("n_heads"), hw.n_heads)
    writer.add_uint32(_key("draft_vocab"), hw.draft_vocab)
    writer.add_uint64(_key("train_tokens"), meta.train_tokens)
    topk = len(meta.rank_accuracy[0]) if meta.rank_accuracy else 0
    writer.add_uint32(_key("rank_topk"), topk)
    if topk:
        writer.add_array(_key("rank_accuracy"), [float(x) for row in meta.rank_accuracy for x in row])
    for k in range(hw.n_heads):
        writer.add_tensor(f"medusa.{k}.w", np.ascontiguousarray(hw.w[k], dtype=wdt))
        writer.add_tensor(f"medusa.{k}.b", np.ascontiguousarray(hw.b[k], dtype=wdt))
        if hw.u is not None:
            writer.add_tensor(f"medusa.{k}.u", np.ascontiguousarray(hw.u[k], dtype=wdt))
    writer.add_tensor("medusa.vocab", np.ascontiguousarray(hw.vocab, dtype=np.int32))
    writer.add_tensor("medusa.out", np.ascontiguousarray(hw.out, dtype=odt))
    if hw.embd is not None:
        writer.add_tensor("medusa.embd", np.ascontiguousarray(hw.embd, dtype=odt))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _field(reader: "GGUFReader", name: str, path: Path) -> Any:
    field = reader.get_field(_key(name))
    if field is None:
        raise ValueError(f"{path} lacks the metadata key {_key(name)}: it is not a complete pyaccel Medusa "
                         "heads file; train it again with `pyaccel medusa train`")
    return field.contents()


def read_meta(path: str | os.PathLike[str]) -> tuple[HeadsMeta, int, int]:
    """The metadata of a heads file, its number of heads and its draft-vocabulary size
    (reads no tensor data)."""
    path = _existing(path)
    return _meta_of(_reader(path), path)


def is_token_conditioned(path: str | os.PathLike[str]) -> bool:
    """Do the heads of this file read the next token's embedding too (format 2)?"""
    return any(t.name == "medusa.embd" for t in _reader(_existing(path)).tensors)


def _existing(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no Medusa heads file at {path}: train one with `pyaccel medusa train -m MODEL`")
    return path


_RETRAIN = "pass the heads file `pyaccel medusa train` wrote, or train heads again with `pyaccel medusa train -m MODEL`"


def _reader(path: Path) -> "GGUFReader":
    """A GGUFReader of a heads file; ValueError naming the file when it is empty, not GGUF,
    unreadable or cut short (the reader's own errors say neither which file nor what to do)."""
    import gguf

    try:
        with open(path, "rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ValueError(f"cannot read the Medusa heads file {path} ({exc.strerror}): check its permissions") from None
    if not magic:
        raise ValueError(f"the Medusa heads file {path} is empty: {_RETRAIN}")
    if magic != GGUF_MAGIC:
        raise ValueError(f"{path} is not a Medusa heads file (not GGUF: it starts with {magic!r}): {_RETRAIN}")
    try:
        return gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OSError) as exc:
        raise ValueError(f"the Medusa heads file {path} is damaged or cut short ({exc}): {_RETRAIN}") from None


def _meta_of(reader: "GGUFReader", path: Path) -> tuple[HeadsMeta, int, int]:
    arch = reader.get_field("general.architecture")
    if arch is None or arch.contents() != ARCH:
        found = None if arch is None else arch.contents()
        raise ValueError(f"{path} is not a Medusa heads file (general.architecture is {found!r}, not {ARCH!r}): "
                         "pass the file `pyaccel medusa train` wrote")
    n_heads = int(_field(reader, "n_heads", path))
    topk = int(_field(reader, "rank_topk", path))
    flat = [float(x) for x in _field(reader, "rank_accuracy", path)] if topk else []
    if len(flat) != n_heads * topk:
        raise ValueError(f"{path}: rank_accuracy holds {len(flat)} values, expected {n_heads} heads x {topk}")
    rank = tuple(tuple(flat[k * topk:(k + 1) * topk]) for k in range(n_heads)) if topk else ()
    meta = HeadsMeta(
        target_name=str(_field(reader, "target.name", path)),
        target_sha256=str(_field(reader, "target.sha256", path)),
        architecture=str(_field(reader, "target.architecture", path)),
        n_embd=int(_field(reader, "n_embd", path)),
        n_vocab=int(_field(reader, "n_vocab", path)),
        rank_accuracy=rank,
        train_tokens=int(_field(reader, "train_tokens", path)),
    )
    return meta, n_heads, int(_field(reader, "draft_vocab", path))


def load_heads(path: str | os.PathLike[str]) -> MedusaHeads:
    """Read a heads file written by `save_heads`; tensors come back as float32 (vocab int32)."""
    path = _existing(path)
    reader = _reader(path)
    meta, n_heads, _ = _meta_of(reader, path)
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    missing = [n for n in ("medusa.vocab", "medusa.out", *(f"medusa.{k}.{p}" for k in range(n_heads) for p in "wb"))
               if n not in tensors]
    if missing:
        raise ValueError(f"{path} lacks the tensors {missing}: the file is damaged; train the heads again")
    w = np.stack([tensors[f"medusa.{k}.w"].astype(np.float32) for k in range(n_heads)])
    b = np.stack([tensors[f"medusa.{k}.b"].astype(np.float32) for k in range(n_heads)])
    u, embd = _conditioning(tensors, n_heads, path)
    weights = HeadWeights(w, b, tensors["medusa.out"].astype(np.float32),
                          tensors["medusa.vocab"].astype(np.int32), u, embd)
    if weights.n_embd != meta.n_embd:
        raise ValueError(f"{path}: heads of width {weights.n_embd} but metadata n_embd {meta.n_embd}: damaged file")
    return MedusaHeads(weights, meta)


def _conditioning(tensors: dict[str, npt.NDArray[Any]], n_heads: int, path: Path) -> tuple[F32 | None, F32 | None]:
    """(u [K, d, d], embd [V', d]) of token-conditioned heads; (None, None) for heads of h alone."""
    names = [f"medusa.{k}.u" for k in range(n_heads)] + ["medusa.embd"]
    present = [n for n in names if n in tensors]
    if not present:
        return None, None
    if len(present) != len(names):
        raise ValueError(f"{path} holds only {present} of the token-conditioning tensors {names}: the file is "
                         "damaged; train the heads again")
    u = np.stack([tensors[f"medusa.{k}.u"].astype(np.float32) for k in range(n_heads)])
    return u, tensors["medusa.embd"].astype(np.float32)


# ---- binding heads to a target --------------------------------------------------------------


def _hash_cache_path() -> Path:
    return registry.cache_dir() / "medusa" / _HASH_CACHE_FILE


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, remembered by (path, size, mtime) in the user cache so that a large
    model file is hashed once."""
    path = Path(path).resolve()
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache_file = _hash_cache_path()
    try:
        known: dict[str, str] = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    known[key] = digest.hexdigest()
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=0), encoding="utf-8")
    os.replace(tmp, cache_file)
    return known[key]


def model_sha256(model: "Model") -> str:
    """The sha256 of a Model's file: the registry's pinned hash for a registry model of the
    registered size, else the file's hash (computed once, then cached)."""
    return _sha256_of(model.path, model.registry_spec)


def _sha256_of(path: Path, spec: "registry.ModelSpec | None") -> str:
    if spec is not None and spec.size == path.stat().st_size and path.name == spec.file:
        return spec.sha256
    _check_model_file(path)
    return file_sha256(path)


def _check_model_file(path: Path) -> None:
    """Refuse a file that is no GGUF model before hashing it: its hash would be cached for
    nothing (`auto` looks for heads before the model loads), and a large file of another
    kind would be read in full first. The error is the one loading the model gives."""
    from ...backend import check_gguf_file

    check_gguf_file(path)


def model_architecture(model: "Model") -> str:
    return model.backend.metadata("general.architecture") or "unknown"


def meta_for(model: "Model", rank_accuracy: tuple[tuple[float, ...], ...] = (), train_tokens: int = 0) -> HeadsMeta:
    """The metadata that binds heads to `model`."""
    return HeadsMeta(target_name=model.name, target_sha256=model_sha256(model),
                     architecture=model_architecture(model), n_embd=model.backend.n_embd,
                     n_vocab=model.n_vocab, rank_accuracy=rank_accuracy, train_tokens=train_tokens)


def check_target(meta: HeadsMeta, model: "Model") -> None:
    """Raise ValueError, naming both models, unless heads with `meta` fit `model`: same
    architecture, hidden size and vocabulary, and the same file hash where the heads know it."""
    mine = meta_for(model)
    problems = []
    if meta.architecture != mine.architecture:
        problems.append(f"architecture {meta.architecture} vs {mine.architecture}")
    if meta.n_embd != mine.n_embd:
        problems.append(f"n_embd {meta.n_embd} vs {mine.n_embd}")
    if meta.n_vocab != mine.n_vocab:
        problems.append(f"n_vocab {meta.n_vocab} vs {mine.n_vocab}")
    if meta.target_sha256 and meta.target_sha256 != mine.target_sha256:
        problems.append(f"sha256 {meta.target_sha256[:12]}... vs {mine.target_sha256[:12]}...")
    if problems:
        raise ValueError(
            f"these Medusa heads were trained for {meta.target_name!r}, not for the model {model.name!r} "
            f"({'; '.join(problems)}): use heads trained for {model.name!r} "
            f"(`pyaccel medusa train -m {model.name}`) or run with the model {meta.target_name!r}")


def slug(name: str) -> str:
    stem = Path(name).stem if name.endswith(".gguf") else name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem) or "model"


def model_label(model: "Model") -> str:
    """A file-name-safe name for `model`: its registry name (also when opened by path), else
    its file stem."""
    return _label_of(model.name, model.registry_spec)


def _label_of(name: str, spec: "registry.ModelSpec | None") -> str:
    return slug(spec.name if spec is not None else name)


def medusa_dir() -> Path:
    """Where pyaccel keeps Medusa heads and their training data (`$PYACCEL_HOME/medusa`)."""
    return registry.cache_dir() / "medusa"


def default_heads_path(model: "Model") -> Path:
    """Where `pyaccel medusa train` writes heads for `model` unless told otherwise, and where
    decoding looks for them: <cache>/medusa/<name>-<sha256[:12]>.gguf."""
    return cached_heads_path(model.name, model.path)


def cached_heads_path(name: str, path: Path) -> Path:
    """`default_heads_path` of the model called `name` at `path` (no need to load it)."""
    spec = registry.spec_for(name, path)
    return medusa_dir() / f"{_label_of(name, spec)}-{_sha256_of(path, spec)[:12]}.gguf"
