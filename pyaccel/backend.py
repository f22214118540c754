"""The llama.cpp backend: the only module of pyaccel that imports `llama_cpp`.

It wraps llama-cpp-python's low-level API: one model and one context per `LlamaBackend`,
decoding of batches in which every token has its own position, sequence ids and logits
flag, zero-copy logits rows, KV-cache operations, tokenization (also of a file's
vocabulary alone) and the GGUF chat template.

The batch is our own memory (numpy arrays that a `llama_batch` struct points into), so
filling it is a few vectorised numpy assignments rather than a Python loop per token:

    token  [n]            pos    [n]           logits [n] (int8 flags)
    n_seq  [n]            seq    [n, n_seq_max] (row i: the sequence ids of token i)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import numpy as np
import numpy.typing as npt


def _shorter_barrier_spins() -> None:
    """llama.cpp's CPU threads meet at an OpenMP barrier after every operation of a pass,
    and libgomp lets a waiting thread spin 300,000 times before it sleeps. When other
    programs keep the cores busy, the thread a barrier waits for is descheduled while the
    others spin out their time slices, and decoding slows far more than in proportion to the
    load. 100,000 spins more than doubled plain decoding's speed on a small CPU kept busy by
    other processes, at the same speed on an idle machine; far fewer spins did better busy
    but slowed idle decoding (the measurement: docs/guide.md, "CPU threads"). libgomp
    reads the setting once, when llama.cpp loads it, so it is made here, before the import,
    and only where the user has chosen no spin count or wait policy of their own."""
    if "llama_cpp" not in sys.modules and not {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"} & set(os.environ):
        os.environ["GOMP_SPINCOUNT"] = "100000"


_shorter_barrier_spins()

import llama_cpp  # noqa: E402  (after the spin count above)
from llama_cpp import _logger as llama_logger  # noqa: E402
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402

from . import _core, vocab, weights  # noqa: E402
from .errors import ContextOverflowError, ModelLoadError, PrefillCancelled  # noqa: E402

GGUF_MAGIC = b"GGUF"


# llama.cpp's log goes nowhere unless a Model asks for verbose=True. The sink is C: an
# exception raised in a Python ctypes callback is dropped, so a Ctrl-C that arrived while
# llama.cpp logged (it logs throughout a model load) was lost and the command ran on.
_QUIET_LOG = llama_cpp.llama_log_callback(_core.silent_log_callback())


def _set_llama_log(verbose: bool) -> None:
    """llama.cpp has one log callback per process: the last Model opened decides."""
    llama_logger.set_verbose(verbose)
    llama_cpp.llama_log_set(llama_logger.llama_log_callback if verbose else _QUIET_LOG, ctypes.c_void_p(0))


def default_threads() -> int:
    """All cores on small machines; half the logical cores (about the physical ones) on larger."""
    n = os.cpu_count() or 1
    return n if n <= 4 else max(1, n // 2)


@dataclass(frozen=True)
class ContextConfig:
    n_ctx: int = 4096
    n_threads: int | None = None
    n_gpu_layers: int = 0
    n_seq_max: int = 1
    n_batch: int = 512
    kv_unified: bool = True
    embeddings: bool = False
    # None lets llama.cpp decide (llama-cpp-python's Llama forces it off). Forcing it off
    # made plain decoding a little faster on a CPU, but batched and single-token logits then
    # diverge more, so greedy verification meets more near-ties (docs/design.md, "Numerics
    # and near-ties").
    flash_attn: bool | None = None
    # Let llama.cpp put weights in its AMX buffer type where it has one (its AMX matmul
    # faults on some CPUs that report AMX, so weights are kept out of it by default).
    amx: bool = False
    verbose: bool = False


@contextlib.contextmanager
def default_placement(placement: weights.Placement) -> Iterator[None]:
    """Meanwhile llama_model_default_params() carries `placement`: for llama-cpp-python's
    own `Llama`, which builds its model parameters from those defaults and takes no
    placement (the bench's comparison with it loads the weights where pyaccel does)."""
    module = llama_cpp.llama_cpp  # where llama-cpp-python's own modules look the function up
    make = module.llama_model_default_params

    def placed() -> llama_cpp.llama_model_params:
        mparams = make()
        _apply_placement(mparams, placement)
        return mparams

    module.llama_model_default_params = placed
    try:
        yield
    finally:
        module.llama_model_default_params = make


def _apply_placement(mparams: llama_cpp.llama_model_params, placement: weights.Placement) -> None:
    mparams.use_extra_bufts = placement.use_extra_bufts
    overrides = placement.overrides()
    if overrides is not None:
        mparams.tensor_buft_overrides = ctypes.addressof(overrides)


def ggml_library() -> ctypes.CDLL:
    """The libllama that llama-cpp-python loaded, for ggml's functions (buffer types, its
    GGUF reader): looked up through it, they are those of the very ggml it links (a user's
    LLAMA_CPP_LIB_PATH build included), not of another copy."""
    lib: ctypes.CDLL = llama_cpp.llama_cpp._lib
    return lib


class _Batch:
    """A llama_batch whose arrays are numpy buffers owned by this object."""

    def __init__(self, capacity: int, n_seq_max: int) -> None:
        self.capacity = capacity
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq = np.ones(capacity, dtype=np.int32)
        self.seq = np.zeros((capacity, n_seq_max), dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        row_ptrs = [self.seq[i].ctypes.data for i in range(capacity)]
        self._seq_ptrs = (ctypes.POINTER(ctypes.c_int32) * capacity)(
            *[ctypes.cast(p, ctypes.POINTER(ctypes.c_int32)) for p in row_ptrs]
        )
        self.struct = llama_cpp.llama_batch()
        self.struct.token = self.token.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self.struct.embd = None
        self.struct.pos = self.pos.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self.struct.n_seq_id = self.n_seq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        self.struct.seq_id = self._seq_ptrs
        self.struct.logits = self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))


def check_gguf_file(path: Path) -> None:
    """Fail early, with a clear message, on files llama.cpp would reject less politely."""
    if not path.is_file():
        raise ModelLoadError(f"{path} is not a file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path} is not a GGUF model file (it starts with {magic!r}, not b'GGUF'). "
            "Convert it with llama.cpp's convert_hf_to_gguf.py or use a registry model."
        )


V = TypeVar("V", bound="Vocabulary")


class Vocabulary:
    """A model's tokenizer: tokenization, token pieces and attributes, GGUF metadata.
    `LlamaBackend` has one with its weights and context; `VocabularyFile` reads one alone."""

    path: Path
    _model: object
    _vocab: object

    def _set_vocab(self, model: object) -> None:
        self._model = model
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        # Rendered pieces already asked for, plain and special (a dict read costs a fraction
        # of the llama.cpp call, which the proposers and the streaming make every step).
        self._pieces: tuple[dict[int, bytes], dict[int, bytes]] = ({}, {})
        self._control: dict[int, bool] = {}  # is_control's answers

    def close(self) -> None:
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None

    def __enter__(self: V) -> V:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._model is None:
            raise RuntimeError("this model has been closed; create a new one")

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        self._require_open()
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"the text holds {text[exc.start:exc.end]!r} at index {exc.start}, a lone surrogate "
                             "that UTF-8 cannot encode (bytes that were not UTF-8, read as text, show so): "
                             "pass valid Unicode text, or save the input as UTF-8") from None
        cap = len(data) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def token_bytes(self, token: int, special: bool = False) -> bytes:
        self._require_open()
        cache = self._pieces[special]
        piece = cache.get(token)
        if piece is None:
            piece = cache[token] = self._render(token, special)
        return piece

    def _render(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    def token_text(self, token: int) -> bytes:
        """The raw vocabulary entry (as llama.cpp compares vocabularies), not the rendered piece."""
        self._require_open()
        return llama_cpp.llama_vocab_get_text(self._vocab, token) or b""

    def is_control(self, token: int) -> bool:
        """Is `token` one that llama.cpp parses out of text only with parse_special=True?"""
        known = self._control.get(token)
        if known is None:
            self._require_open()
            mask = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
            known = self._control[token] = bool(llama_cpp.llama_vocab_get_attr(self._vocab, token) & mask)
        return known

    @functools.cached_property
    def vocab_fingerprint(self) -> int:
        """`vocab.fingerprint` of this model's vocabulary, computed once (a fraction of a second)."""
        self._require_open()
        return vocab.fingerprint(self)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        self._require_open()
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    @property
    def bos(self) -> int:
        self._require_open()
        return int(llama_cpp.llama_vocab_bos(self._vocab))

    @property
    def eos(self) -> int:
        self._require_open()
        return int(llama_cpp.llama_vocab_eos(self._vocab))

    @property
    def add_bos(self) -> bool:
        self._require_open()
        return bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))

    @property
    def add_eos(self) -> bool:
        self._require_open()
        return bool(llama_cpp.llama_vocab_get_add_eos(self._vocab))

    def metadata(self, key: str) -> str | None:
        self._require_open()
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")



class VocabularyFile(Vocabulary):
    """The vocabulary of a GGUF file alone (no weights, no context: under a second to open),
    for checks such as whether a draft model shares a target's tokenizer."""

    def __init__(self, path: str | os.PathLike[str], verbose: bool = False) -> None:
        self.path = Path(path)
        self._model = None
        check_gguf_file(self.path)
        _set_llama_log(verbose)
        mparams = llama_cpp.llama_model_default_params()
        mparams.vocab_only = True
        llama_cpp.llama_backend_init()
        model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), mparams)
        if not model:
            raise ModelLoadError(f"llama.cpp could not read the vocabulary of {self.path}: the file may be "
                                 "truncated or corrupted (a registry model is fetched again by "
                                 "`pyaccel models pull NAME --force`)")
        self._set_vocab(model)


class LlamaBackend(Vocabulary):
    """One llama.cpp model and context. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike[str], config: ContextConfig = ContextConfig(),
                 placement: weights.Placement | None = None) -> None:
        """placement: where the weights go (default: `weights.choose` for this config)."""
        self.path = Path(path)
        self.config = config
        self._model = None
        self._ctx = None
        # Tests inject faults here: applied to every logits view before anyone reads it.
        self.logits_hook: Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]] | None = None
        self._formatter: Jinja2ChatFormatter | None = None  # compiled once, not every turn: compiling is slow
        check_gguf_file(self.path)
        _set_llama_log(config.verbose)
        llama_cpp.llama_backend_init()
        self.placement = placement or weights.choose(ggml_library(), self.path, config.amx, config.n_gpu_layers)
        if config.verbose and self.placement.tag:
            print(f"pyaccel: {self.placement.summary} (amx=True, or --amx, lets llama.cpp use AMX)", file=sys.stderr)
        self._load(config)

    # ---- life cycle -------------------------------------------------------------------

    def _load(self, config: ContextConfig) -> None:
        if config.n_threads is not None and (isinstance(config.n_threads, bool) or config.n_threads < 0):
            raise ValueError(f"n_threads must be >= 1 (0 or None: the default), got {config.n_threads}")
        if config.n_gpu_layers < -1:
            raise ValueError(f"n_gpu_layers must be -1 (every layer) or >= 0, got {config.n_gpu_layers}")
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = config.n_gpu_layers
        _apply_placement(mparams, self.placement)
        model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), mparams)
        if not model:
            raise ModelLoadError(
                f"llama.cpp could not load {self.path}: the file may be truncated, corrupted, or "
                "of an architecture this llama-cpp-python does not know (verbose=True, or --verbose, shows why; "
                "a registry model is fetched again by `pyaccel models pull NAME --force`)"
            )
        self._set_vocab(model)
        self.n_embd = int(llama_cpp.llama_model_n_embd(model))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        # llama.cpp aborts the process when a batch (n_batch, clamped to n_ctx) has room for
        # fewer tokens than there are sequences; a tree has no more paths than nodes anyway.
        n_seq_max = max(1, min(config.n_seq_max, config.n_batch, config.n_ctx))
        limit = int(llama_cpp.llama_max_parallel_sequences())
        if n_seq_max > limit:
            raise ValueError(f"n_seq_max={n_seq_max} exceeds llama.cpp's limit of {limit} sequences")
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = config.n_ctx
        cparams.n_batch = config.n_batch
        cparams.n_ubatch = config.n_batch
        cparams.n_seq_max = n_seq_max
        threads = config.n_threads or default_threads()
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.kv_unified = config.kv_unified
        cparams.embeddings = config.embeddings
        if config.flash_attn is not None:
            cparams.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if config.flash_attn
                                       else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        if config.embeddings:
            cparams.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_NONE
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            raise ModelLoadError(f"llama.cpp could not create a context of {config.n_ctx} tokens for {self.path}")
        self._ctx = ctx
        self._hidden_on = config.embeddings
        self._mem = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        self.n_seq_max = n_seq_max
        self.n_threads = threads
        # llama.cpp may clamp n_batch (e.g. to n_ctx); a larger batch would abort the process.
        self._batch = _Batch(int(llama_cpp.llama_n_batch(ctx)), n_seq_max)

    def close(self) -> None:
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        super().close()

    @property
    def closed(self) -> bool:
        return self._ctx is None

    def _require_open(self) -> None:
        if self._ctx is None:
            raise RuntimeError("this model has been closed; create a new one")

    # ---- decoding -----------------------------------------------------------------------

    @property
    def max_batch(self) -> int:
        return self._batch.capacity

    def decode(
        self,
        tokens: npt.ArrayLike,
        positions: npt.ArrayLike,
        seq_ids: Sequence[Sequence[int]] | None = None,
        logits: npt.ArrayLike | None = None,
    ) -> None:
        """Evaluate one batch of at most `max_batch` tokens.

        seq_ids: per token, the sequence ids it belongs to (default: all in sequence 0).
        logits: per token, 1 where its logits are wanted (default: the last token only;
          with embeddings=True every token). After the call, `logits_rows()` holds the
          wanted rows in batch order, and `embeddings_rows()` their hidden states.
        """
        self._require_open()
        b = self._batch
        tok = np.asarray(tokens, dtype=np.int32)
        n = tok.shape[0]
        if n == 0 or n > b.capacity:
            raise ValueError(f"a batch holds 1..{b.capacity} tokens, got {n}")
        b.token[:n] = tok
        b.pos[:n] = np.asarray(positions, dtype=np.int32)
        if seq_ids is None:
            b.n_seq[:n] = 1
            b.seq[:n, 0] = 0
        else:
            for i, ids in enumerate(seq_ids):
                b.n_seq[i] = len(ids)
                b.seq[i, : len(ids)] = ids
        if self._hidden_on:
            # llama.cpp outputs every token of a batch when embeddings are on (it overrides
            # the flags): say so, or the rows read back would be misnumbered.
            b.logits[:n] = 1
        elif logits is None:
            b.logits[:n] = 0
            b.logits[n - 1] = 1
        else:
            b.logits[:n] = np.asarray(logits, dtype=np.int8)
        self._n_out = int(np.count_nonzero(b.logits[:n]))
        b.struct.n_tokens = n
        rc = llama_cpp.llama_decode(self._ctx, b.struct)
        if rc == 1:
            raise ContextOverflowError(
                f"the KV cache is full (context of {self.n_ctx} tokens): use a larger n_ctx (--n-ctx) or a "
                "shorter prompt"
            )
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc}")

    @contextlib.contextmanager
    def hidden_states_off(self) -> Iterator[None]:
        """Decode without hidden states meanwhile (a context created with embeddings=True):
        only the flagged logits rows are computed, so a long prefix whose rows nobody reads
        skips the vocabulary projection of every token."""
        self._require_open()
        if not self.config.embeddings:
            yield
            return
        llama_cpp.llama_set_embeddings(self._ctx, False)
        self._hidden_on = False
        try:
            yield
        finally:
            llama_cpp.llama_set_embeddings(self._ctx, True)
            self._hidden_on = True

    def prefill(self, tokens: Sequence[int], start_pos: int, cancel: threading.Event | None = None) -> None:
        """Evaluate a long run of tokens in chunks of `max_batch`; the last token's logits are
        kept. `cancel`, once set, raises PrefillCancelled before the next chunk (the chunks
        evaluated stay in the cache, for the caller to remove)."""
        tok = np.asarray(tokens, dtype=np.int32)
        if start_pos + len(tok) > self.n_ctx:
            raise ContextOverflowError(
                f"{start_pos + len(tok)} tokens do not fit the context of {self.n_ctx}: "
                "use a larger n_ctx (--n-ctx) or a shorter prompt"
            )
        step = self.max_batch
        for lo in range(0, len(tok), step):
            if cancel is not None and cancel.is_set():
                raise PrefillCancelled()
            chunk = tok[lo : lo + step]
            pos = np.arange(start_pos + lo, start_pos + lo + len(chunk), dtype=np.int32)
            self.decode(chunk, pos)

    def logits_rows(self) -> npt.NDArray[np.float32]:
        """Zero-copy [n_outputs, n_vocab] view of the last decode's logits; valid until the next decode."""
        self._require_open()
        ptr = llama_cpp.llama_get_logits(self._ctx)
        rows = np.ctypeslib.as_array(ptr, shape=(self._n_out, self.n_vocab))
        return rows if self.logits_hook is None else self.logits_hook(rows)

    def embeddings_rows(self) -> npt.NDArray[np.float32]:
        """Zero-copy [n_outputs, n_embd] final hidden states (needs embeddings=True)."""
        self._require_open()
        if not self._hidden_on:
            raise RuntimeError("hidden states need the context created with embeddings=True "
                               "(and not inside hidden_states_off())")
        ptr = llama_cpp.llama_get_embeddings(self._ctx)
        return np.ctypeslib.as_array(ptr, shape=(self._n_out, self.n_embd))

    # ---- KV cache -------------------------------------------------------------------------

    def kv_remove(self, seq_id: int, p0: int = -1, p1: int = -1) -> None:
        """Drop cells of `seq_id` (-1: any) with positions in [p0, p1) (-1: open end)."""
        self._require_open()
        llama_cpp.llama_memory_seq_rm(self._mem, seq_id, p0, p1)

    def kv_copy(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Tag the cells of `src` in [p0, p1) as also belonging to `dst` (no data is copied)."""
        self._require_open()
        llama_cpp.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def kv_keep(self, seq_id: int) -> None:
        """Drop every cell that does not belong to `seq_id`."""
        self._require_open()
        llama_cpp.llama_memory_seq_keep(self._mem, seq_id)

    def kv_pos_max(self, seq_id: int = 0) -> int:
        """Largest position cached for `seq_id`, or -1 when it is empty."""
        self._require_open()
        return int(llama_cpp.llama_memory_seq_pos_max(self._mem, seq_id))

    def kv_clear(self) -> None:
        self._require_open()
        llama_cpp.llama_memory_clear(self._mem, True)

    # ---- chat ------------------------------------------------------------------------------

    @property
    def chat_template(self) -> str | None:
        """The chat template the GGUF file ships (its `tokenizer.chat_template`), None if none."""
        return self.metadata("tokenizer.chat_template") or None

    def chat_formatter(self) -> Jinja2ChatFormatter:
        """The model's chat template, compiled on first use (every chat turn and server
        request formats with it)."""
        if self._formatter is None:
            self._formatter = self._compile_formatter()
        return self._formatter

    def _compile_formatter(self) -> Jinja2ChatFormatter:
        template = self.chat_template
        if template is None:
            raise ValueError(
                f"{self.path.name} has no chat template in its metadata: use generate() with a raw prompt"
            )
        bos = self.token_bytes(self.bos, special=True).decode("utf-8", errors="replace") if self.bos >= 0 else ""
        eos = self.token_bytes(self.eos, special=True).decode("utf-8", errors="replace") if self.eos >= 0 else ""
        return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
