"""The target's output matrix and input embeddings, read straight from its GGUF file: only
the rows of a draft vocabulary are dequantised (with `gguf.quants`).

`gguf.GGUFReader` parses every metadata value into numpy views, which is slow for a
tokenizer of 150k-260k strings; heads need one tensor, so this walks the header with
`struct` and maps the tensor's rows from the file.

GGUF v2/v3 header: magic, version u32, n_tensors u64, n_kv u64; n_kv key/value pairs
(key: u64 length + bytes; value: u32 type + payload); n_tensors infos (name, n_dims u32,
dims u64 * n_dims (ne0 first), type u32, offset u64); data from the next multiple of
general.alignment (default 32), each tensor at data start + its offset.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .heads import F32

OUTPUT_TENSORS = ("output.weight", "token_embd.weight")  # tied embeddings: no output.weight
EMBEDDING_TENSOR = "token_embd.weight"
_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
# Payload bytes of the fixed-size GGUF value types (u8 i8 u16 i16 u32 i32 f32 bool . . u64 i64 f64).
_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_ALIGNMENT_KEY = "general.alignment"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # ne0 (the row length) first, as GGUF stores them
    ggml_type: int
    offset: int  # absolute file offset of the data


class _Cursor:
    def __init__(self, buf: memoryview) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.take("<Q")
        text = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return text

    def skip_value(self, vtype: int) -> int | None:
        """Skip one value; return it when it is an integer scalar (for general.alignment)."""
        if vtype == _STRING:
            n = self.take("<Q")
            self.pos += n
            return None
        if vtype == _ARRAY:
            sub, count = self.take("<I"), self.take("<Q")
            if sub in _SCALAR_SIZE:
                self.pos += _SCALAR_SIZE[sub] * count
            else:
                for _ in range(count):
                    self.skip_value(sub)
            return None
        size = _SCALAR_SIZE.get(vtype)
        if size is None:
            raise ValueError(f"unknown GGUF value type {vtype}")
        value = int.from_bytes(self.buf[self.pos:self.pos + size], "little") if vtype in (4, 10) else None
        self.pos += size
        return value


def tensor_infos(path: str | os.PathLike[str]) -> dict[str, TensorInfo]:
    """Every tensor of a GGUF file, by name, with the absolute offset of its data."""
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    cur = _Cursor(memoryview(mm.data))
    if bytes(cur.buf[:4]) != _MAGIC:
        raise ValueError(f"{path} is not a GGUF file")
    cur.pos = 4
    version = cur.take("<I")
    if version < 2:
        raise ValueError(f"{path} is GGUF version {version}; versions 2 and 3 are supported")
    n_tensors, n_kv = cur.take("<Q"), cur.take("<Q")
    alignment = 32
    for _ in range(n_kv):
        key = cur.string()
        value = cur.skip_value(cur.take("<I"))
        if key == _ALIGNMENT_KEY and value:
            alignment = value
    raw = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = tuple(cur.take("<Q") for _ in range(cur.take("<I")))
        raw.append((name, dims, cur.take("<I"), cur.take("<Q")))
    start = -(-cur.pos // alignment) * alignment
    return {name: TensorInfo(name, dims, gtype, start + off) for name, dims, gtype, off in raw}


def output_tensor(path: str | os.PathLike[str]) -> TensorInfo:
    infos = tensor_infos(path)
    name = next((n for n in OUTPUT_TENSORS if n in infos), None)
    if name is None:
        raise ValueError(f"{path} has neither {' nor '.join(OUTPUT_TENSORS)}: Medusa heads need the "
                         "model's output matrix")
    return infos[name]


def output_rows(model_path: str | os.PathLike[str], ids: npt.NDArray[np.int32]) -> F32:
    """Rows `ids` of the target's output matrix (its LM head, or the token embeddings when
    they are tied), dequantised to float32 [len(ids), d]."""
    return _rows(model_path, output_tensor(model_path), ids)


def embedding_rows(model_path: str | os.PathLike[str], ids: npt.NDArray[np.int32]) -> F32:
    """Rows `ids` of the target's input token embeddings, dequantised to float32 [len(ids), d]."""
    info = tensor_infos(model_path).get(EMBEDDING_TENSOR)
    if info is None:
        raise ValueError(f"{model_path} has no {EMBEDDING_TENSOR}: token-conditioned Medusa heads need the "
                         "model's input embeddings; train heads without it (TrainConfig(token_conditioned=False))")
    return _rows(model_path, info, ids)


def _rows(model_path: str | os.PathLike[str], info: TensorInfo, ids: npt.NDArray[np.int32]) -> F32:
    import gguf

    d, n_rows = info.dims[0], info.dims[1]
    qtype = gguf.GGMLQuantizationType(info.ggml_type)
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    row_bytes = d // block * type_size
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= n_rows):
        raise ValueError(f"draft-vocabulary ids must lie in 0..{n_rows - 1}")
    mm = np.memmap(Path(model_path), dtype=np.uint8, mode="r", offset=info.offset, shape=(n_rows, row_bytes))
    rows = gguf.quants.dequantize(np.asarray(mm[ids]), qtype)
    return np.ascontiguousarray(rows.reshape(len(ids), d), dtype=np.float32)
