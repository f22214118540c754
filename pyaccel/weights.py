"""Which CPU buffer type holds each weight of a model: llama.cpp's choice, less its AMX one.

llama.cpp puts each weight in the first CPU buffer type of its list that can run the
weight's operation: AMX (where the CPU and the build have it), then CPU_REPACK (weights
re-laid for the SIMD matmul kernels, which batched verification leans on), then plain CPU
memory. Its AMX matmul faults on some Sapphire-Rapids-class CPUs, so unless the user opts
in, a model whose llama.cpp offers AMX is loaded with the extra buffer types off and one
override per group of weights that CPU_REPACK runs: what llama.cpp would choose with AMX
taken out of its list. The question "does CPU_REPACK run this weight's matmul?" is put to
ggml itself, the way llama.cpp's loader puts it (a dummy operation, `supports_op`).

This module speaks to ggml's C API through the ctypes library handle the backend passes
in; it never imports llama_cpp.
"""

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

AMX = "AMX"
REPACK = "CPU_REPACK"
# ggml_backend_dev_type: GGML_BACKEND_DEVICE_TYPE_CPU.
_DEVICE_CPU = 0
# ggml_type of the activations a weight is multiplied with, and of expert ids.
_GGML_F32 = 0
_GGML_I32 = 26
# Rows of the dummy activation, as llama.cpp's loader uses for the same question.
_DUMMY_ROWS = 512
_LAYER = re.compile(r"blk\.(\d+)\.(.+)")


class _InitParams(ctypes.Structure):  # struct ggml_init_params
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class _GgufParams(ctypes.Structure):  # struct gguf_init_params
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.POINTER(ctypes.c_void_p))]


class TensorOverride(ctypes.Structure):  # struct llama_model_tensor_buft_override
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


# The head of struct ggml_tensor: `type` then `buffer`, then ne[4]. Checked on a tensor of
# known shape before any field is read or written (_layout_holds).
class _TensorHead(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4)]


@dataclass
class Placement:
    """How a model's weights are placed: llama_model_params' `use_extra_bufts` and
    `tensor_buft_overrides`, and a line saying what was done (`LlamaBackend.placement`)."""

    use_extra_bufts: bool = True
    patterns: tuple[str, ...] = ()
    buft: int | None = None  # the buffer type every pattern points at
    summary: str = "llama.cpp's own placement"
    tag: str = ""  # in the names of files that depend on it (costs): "" for llama.cpp's own
    _array: ctypes.Array[TensorOverride] | None = field(default=None, repr=False)

    def overrides(self) -> "ctypes.Array[TensorOverride] | None":
        """The NULL-terminated override array (kept alive by this object), None if none."""
        if not self.patterns:
            return None
        if self._array is None:
            rows = [TensorOverride(p.encode(), self.buft) for p in self.patterns] + [TensorOverride(None, None)]
            self._array = (TensorOverride * len(rows))(*rows)
        return self._array


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the signatures of the ggml functions used here (idempotent)."""
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    sigs = {
        "ggml_backend_dev_by_type": ([ctypes.c_int], vp),
        "ggml_backend_dev_backend_reg": ([vp], vp),
        "ggml_backend_reg_get_proc_address": ([vp, ctypes.c_char_p], vp),
        "ggml_backend_buft_name": ([vp], ctypes.c_char_p),
        "ggml_backend_buft_alloc_buffer": ([vp, ctypes.c_size_t], vp),
        "ggml_backend_buffer_free": ([vp], None),
        "ggml_backend_dev_supports_op": ([vp, vp], ctypes.c_bool),
        "ggml_init": ([_InitParams], vp),
        "ggml_free": ([vp], None),
        "ggml_tensor_overhead": ([], ctypes.c_size_t),
        "ggml_new_tensor_3d": ([vp, ctypes.c_int, i64, i64, i64], vp),
        "ggml_mul_mat": ([vp, vp, vp], vp),
        "ggml_mul_mat_id": ([vp, vp, vp, vp], vp),
        "ggml_get_first_tensor": ([vp], vp),
        "ggml_get_next_tensor": ([vp, vp], vp),
        "ggml_get_name": ([vp], ctypes.c_char_p),
        "ggml_n_dims": ([vp], ctypes.c_int),
        "ggml_blck_size": ([ctypes.c_int], i64),
        "ggml_type_name": ([ctypes.c_int], ctypes.c_char_p),
        "gguf_init_from_file": ([ctypes.c_char_p, _GgufParams], vp),
        "gguf_free": ([vp], None),
        "gguf_get_n_tensors": ([vp], i64),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def cpu_extra_buffer_types(lib: ctypes.CDLL) -> dict[str, int]:
    """The CPU device's extra buffer types, by name, in llama.cpp's order of preference."""
    _bind(lib)
    dev = lib.ggml_backend_dev_by_type(_DEVICE_CPU)
    if not dev:
        return {}
    address = lib.ggml_backend_reg_get_proc_address(lib.ggml_backend_dev_backend_reg(dev),
                                                    b"ggml_backend_dev_get_extra_bufts")
    if not address:
        return {}
    get = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(address)
    found: dict[str, int] = {}
    array = get(dev)
    i = 0
    while array and array[i]:
        found[lib.ggml_backend_buft_name(array[i]).decode()] = int(array[i])
        i += 1
    return found


def _head(tensor: int) -> _TensorHead:
    return _TensorHead.from_address(tensor)


def _layout_holds(lib: ctypes.CDLL, ctx: int) -> bool:
    """Does ggml_tensor start as _TensorHead says? Tried on a fresh tensor of known shape."""
    probe = lib.ggml_new_tensor_3d(ctx, _GGML_F32, 3, 5, 7)
    head = _head(probe)
    return head.type == _GGML_F32 and not head.buffer and list(head.ne) == [3, 5, 7, 1]


def _candidates(lib: ctypes.CDLL, gguf_ctx: int) -> list[tuple[str, int]]:
    """(name, tensor) of the weights llama.cpp multiplies with: those of the repeating
    layers and the output matrix, of a type this ggml knows, in 2 (matmul) or 3
    (expert matmul) dimensions."""
    found = []
    t = lib.ggml_get_first_tensor(gguf_ctx)
    while t:
        name = lib.ggml_get_name(t).decode()
        kind = _head(t).type
        known = 0 <= kind and lib.ggml_type_name(kind) not in (None, b"NONE") and lib.ggml_blck_size(kind) > 0
        if known and (name.startswith("blk.") or name == "output.weight") and lib.ggml_n_dims(t) in (2, 3):
            found.append((name, t))
        t = lib.ggml_get_next_tensor(gguf_ctx, t)
    return found


def _runs_on(lib: ctypes.CDLL, dev: int, buft: int, weight: int, ctx: int) -> bool:
    """Does `buft` run the matmul of `weight` (placed there for the question only)?"""
    ne = _head(weight).ne
    if lib.ggml_n_dims(weight) == 2:
        x = lib.ggml_new_tensor_3d(ctx, _GGML_F32, ne[0], _DUMMY_ROWS, 1)
        op = lib.ggml_mul_mat(ctx, weight, x)
    else:
        x = lib.ggml_new_tensor_3d(ctx, _GGML_F32, ne[0], 1, _DUMMY_ROWS)
        ids = lib.ggml_new_tensor_3d(ctx, _GGML_I32, 1, _DUMMY_ROWS, 1)
        op = lib.ggml_mul_mat_id(ctx, weight, x, ids)
    dummy = lib.ggml_backend_buft_alloc_buffer(buft, 0)
    head = _head(weight)
    head.buffer = dummy
    try:
        return bool(lib.ggml_backend_dev_supports_op(dev, op))
    finally:
        head.buffer = None
        lib.ggml_backend_buffer_free(dummy)


def weights_on(lib: ctypes.CDLL, path: Path, buft: int) -> list[str] | None:
    """Names of the weights of the GGUF file at `path` whose matmul `buft` runs, or None
    where the question cannot be put safely (unreadable file, unexpected ggml layout)."""
    _bind(lib)
    dev = lib.ggml_backend_dev_by_type(_DEVICE_CPU)
    meta = ctypes.c_void_p()
    gguf = lib.gguf_init_from_file(os.fsencode(path), _GgufParams(True, ctypes.pointer(meta)))
    if not gguf or not meta.value:
        return None
    n = lib.gguf_get_n_tensors(gguf)
    # Room for the layout probe, then an activation, expert ids and the operation per weight.
    ctx = lib.ggml_init(_InitParams(lib.ggml_tensor_overhead() * (3 * n + 4), None, True))
    try:
        if not _layout_holds(lib, ctx):
            return None
        return [name for name, t in _candidates(lib, meta.value) if _runs_on(lib, dev, buft, t, ctx)]
    finally:
        lib.ggml_free(ctx)
        lib.ggml_free(meta.value)
        lib.gguf_free(gguf)


def patterns_for(names: list[str]) -> tuple[str, ...]:
    """Anchored regular expressions (ECMAScript, as llama.cpp reads them) that match exactly
    `names`: one per weight kind of the repeating layers, over its layer numbers (llama.cpp
    tries every pattern on every tensor, so hundreds of one-name patterns would slow loading)."""
    layers: dict[str, list[str]] = {}
    single = []
    for name in names:
        m = _LAYER.fullmatch(name)
        if m:
            layers.setdefault(m.group(2), []).append(m.group(1))
        else:
            single.append(name)
    out = [rf"^blk\.({'|'.join(nums)})\.{re.escape(rest)}$" for rest, nums in layers.items()]
    return tuple(out + [f"^{re.escape(name)}$" for name in single])


def choose(lib: ctypes.CDLL, path: Path, amx: bool, n_gpu_layers: int) -> Placement:
    """The placement of the model at `path`: llama.cpp's own where `amx` is asked for or its
    build has no AMX buffer type, else `without_amx`."""
    if amx or AMX not in cpu_extra_buffer_types(lib):
        return Placement()
    return without_amx(lib, path, n_gpu_layers)


def without_amx(lib: ctypes.CDLL, path: Path, n_gpu_layers: int) -> Placement:
    """llama.cpp's placement with every extra buffer type but CPU_REPACK taken out of its
    list (on a build without AMX: the same placement, reached by overrides)."""
    off = Placement(use_extra_bufts=False, summary="AMX kept out; every weight in plain CPU memory", tag="noextra")
    repack = cpu_extra_buffer_types(lib).get(REPACK)
    # Offloaded layers must keep their GPU buffers, which a CPU override would take from them.
    if repack is None or n_gpu_layers != 0:
        return off
    names = weights_on(lib, path, repack)
    if not names:
        return off
    return Placement(use_extra_bufts=False, patterns=patterns_for(names), buft=repack,
                     summary=f"AMX kept out; {len(names)} weights in {REPACK}, as llama.cpp places them without AMX",
                     tag="repack")
