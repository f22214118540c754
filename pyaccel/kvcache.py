"""`TargetCache`: the one record of what sequence 0 of a model's KV cache holds.

Every Model owns exactly one, whichever role it plays (the target of a Generator or the
draft of another); its token list is written only here. It lets a prompt that shares a
prefix with the last one (multi-turn chat, repeated system prompts, a draft model
catching up with the target) skip what is already cached.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Protocol, Sequence

from .errors import PrefillCancelled

if TYPE_CHECKING:
    from .backend import LlamaBackend


class DecodeRecorder(Protocol):
    """Learns decode costs from use (`pyaccel.costs.CostSamples`): the wall time of each
    decode-loop step (every row's logits) and of each prefill (the last row's only)."""

    def on_decode(self, tokens: int, depth: int, seconds: float) -> None: ...
    def on_prefill(self, tokens: int, depth: int, seconds: float) -> None: ...
    def on_generation_end(self) -> None: ...


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class TargetCache:
    """Tokens in sequence 0 of one backend's KV cache, at positions 0..n - 1."""

    def __init__(self, backend: "LlamaBackend") -> None:
        self.backend = backend
        self._tokens: list[int] = []
        self.recorder: DecodeRecorder | None = None

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> tuple[int, ...]:
        return tuple(self._tokens)

    def common_prefix(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` are cached already."""
        return common_prefix(self._tokens, tokens)

    def prefill(self, prompt: Sequence[int], cancel: threading.Event | None = None) -> int:
        """Bring the cache to `prompt`; return how many prompt tokens were already there.
        The last prompt token is always evaluated, so `backend.logits_rows()[-1]` is its row.
        `cancel`, once set, raises PrefillCancelled before the next chunk; the cache then
        holds the prompt's common prefix with what it held before."""
        common = min(common_prefix(self._tokens, prompt), len(prompt) - 1)
        self.truncate(common)
        t0 = time.perf_counter()
        split = self.backend.config.embeddings and len(prompt) - common > 1
        try:
            if split:
                # With hidden states on, llama.cpp projects every row onto the vocabulary: only
                # the last token's rows are read, so the rest is evaluated without them.
                with self.backend.hidden_states_off():
                    self.backend.prefill(prompt[common:-1], start_pos=common, cancel=cancel)
                self.backend.prefill(prompt[-1:], start_pos=len(prompt) - 1, cancel=cancel)
            else:
                self.backend.prefill(prompt[common:], start_pos=common, cancel=cancel)
        except PrefillCancelled:
            self.truncate(common)  # the chunks evaluated so far are not recorded: drop them
            raise
        one_decode = not split and len(prompt) - common <= self.backend.max_batch
        if self.recorder is not None and one_decode:
            self.backend.logits_rows()  # waits for a GPU
            self.recorder.on_prefill(len(prompt) - common, common, time.perf_counter() - t0)
        self._tokens = list(prompt)
        return common

    def note_decode(self, tokens: int, seconds: float) -> None:
        """The decode loop evaluated `tokens` behind what is recorded, in `seconds`."""
        if self.recorder is not None:
            self.recorder.on_decode(tokens, len(self._tokens), seconds)

    def append(self, token: int) -> None:
        """Decode one token at the end of sequence 0 (its logits row is the backend's last)."""
        self.backend.decode([token], [len(self._tokens)])
        self._tokens.append(int(token))

    def record(self, tokens: Sequence[int]) -> None:
        """The decode loop has left `tokens` in sequence 0 right after what is recorded."""
        self._tokens.extend(int(t) for t in tokens)

    def truncate(self, n: int) -> None:
        """Keep the first n tokens: every cell at a position >= n goes, in every sequence."""
        self.backend.kv_remove(-1, n, -1)
        del self._tokens[n:]

    def settle(self, tokens: Sequence[int]) -> None:
        """After a generation (finished or interrupted mid-step): the cache holds `tokens`
        in sequence 0 and nothing else. Cells of other sequences (a draft tree's paths, an
        auxiliary window) are dropped; recorded tokens beyond `tokens` are truncated."""
        n = min(common_prefix(self._tokens, tokens), len(tokens))
        self.backend.kv_keep(0)
        self.truncate(n)
        if self.recorder is not None:
            self.recorder.on_generation_end()
