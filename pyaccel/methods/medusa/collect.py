"""Self-distillation data: the target's own greedy answers with its hidden states, generated
for many prompts at once.

On a CPU one decode of 16 tokens costs far less than 16 decodes of one (docs/design.md,
"The reference curve"), so decoding 16 answers side by side yields more tokens per second
than one answer at a time, while prompt lookup speeds open-ended answers up very little.
Each answer is its own sequence in the unified KV cache:

    slot s      prefill  prompt_s at positions 0..P_s - 1 (seq s), chunks of n_batch
    every step  batch    [ last_0 | last_1 | ... ]   one token per active slot, at its
                         next position, seq = its slot: rows = hidden states + logits
    finished    (EOS / max_new_tokens / time up): its rows go to a shard, seq s is
                cleared and the slot takes the next prompt

Greedy picks inside a batch can differ from one-token decoding at near-ties (batch
numerics, docs/design.md, "Numerics and near-ties"); the answers are still the target's own.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import numpy.typing as npt

from ...progress import StatusLine
from .data import Collected, DataStore, TrainPrompt
from .options import Problem, need, raise_problems

if TYPE_CHECKING:
    from ...model import Model


# llama.cpp's most sequences in one context (llama_max_parallel_sequences()): a slot is a
# sequence. Checked here so that --slots fails before the model loads; the backend checks the
# real limit again when the context is made.
MAX_SLOTS = 256


@dataclass(frozen=True)
class CollectConfig:
    """How collection runs (see `pyaccel medusa train --help`)."""

    slots: int = 16  # answers decoded side by side (sequences of one batch)
    max_new_tokens: int = 256  # answer tokens per prompt
    max_prompt_tokens: int = 1536  # longer prompts are skipped
    prompt_rows: int = 256  # hidden rows kept from the end of each prompt
    n_ctx: int = 16384  # KV cells shared by all slots
    shard_rows: int = 4096  # rows per shard file (what an interruption can lose)
    # Prompts cost prefill time that yields no answer token: beyond slots // 4 active
    # answers, a new prompt waits while prefills took more than this share of the time.
    prefill_share: float = 0.35

    def problems(self) -> list[Problem]:
        """Every knob out of range (none: the config can collect)."""
        room = self.n_ctx - self.max_prompt_tokens  # an answer shares the KV cells with its prompt
        return [*need("slots", 1 <= self.slots <= MAX_SLOTS, f"in 1..{MAX_SLOTS}", self.slots),
                *need("max_new_tokens", self.max_new_tokens >= 2, ">= 2", self.max_new_tokens),
                *need("max_new_tokens", self.max_new_tokens <= room,
                      f"<= {room} (n_ctx {self.n_ctx} less max_prompt_tokens {self.max_prompt_tokens})",
                      self.max_new_tokens),
                *need("max_prompt_tokens", self.max_prompt_tokens >= 1, ">= 1", self.max_prompt_tokens),
                *need("prompt_rows", self.prompt_rows >= 0, ">= 0", self.prompt_rows),
                *need("shard_rows", self.shard_rows >= 1, ">= 1", self.shard_rows),
                *need("prefill_share", 0 < self.prefill_share <= 1, "in (0, 1]", self.prefill_share)]

    def validate(self) -> None:
        raise_problems(self.problems())


@dataclass
class CollectReport:
    answers: int = 0
    answer_rows: int = 0
    prompt_rows: int = 0
    skipped: int = 0
    seconds: float = 0.0
    steps: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.answer_rows / self.seconds if self.seconds else 0.0


@dataclass
class _Slot:
    prompt: TrainPrompt
    cells: int  # KV cells reserved: prompt + max_new_tokens
    pos: int  # position of `last`
    last: int  # the newest answer token, not yet evaluated
    n_new: int  # answer tokens emitted so far (last included)
    hidden: list[npt.NDArray[np.float16]] = field(default_factory=list)
    next: list[int] = field(default_factory=list)
    prompt_rows: int = 0

    def collected(self) -> Collected:
        return Collected(self.prompt.id, self.prompt.category, np.concatenate(self.hidden),
                         np.asarray(self.next, np.int32), self.prompt_rows)


def open_model(name: str, cfg: CollectConfig, n_threads: int | None = None, progress: bool = True) -> "Model":
    """The target as collection needs it: hidden states on, one sequence per slot."""
    from ...model import Model

    return Model(name, n_ctx=cfg.n_ctx, n_threads=n_threads, n_seq_max=cfg.slots, embeddings=True,
                 progress=progress)


def prompt_tokens(model: "Model", text: str) -> list[int]:
    """`text` as one user turn of the model's chat template; a model without a template
    (a base model) gets the text itself."""
    if model.backend.chat_template is None:
        return model.tokenize(text + "\n")
    return model.chat_prompt([{"role": "user", "content": text}])


class Collector:
    """Runs the batched greedy decoding of the module docstring over a prompt queue."""

    def __init__(self, model: "Model", store: DataStore, split: str, cfg: CollectConfig) -> None:
        cfg.validate()
        backend = model.backend
        if not backend.config.embeddings or backend.n_seq_max < cfg.slots or backend.n_ctx < cfg.n_ctx:
            raise ValueError(f"collection needs the Model opened with embeddings=True, n_seq_max >= {cfg.slots} "
                             f"and n_ctx >= {cfg.n_ctx}: open it with collect.open_model")
        self.model, self.backend, self.store, self.split, self.cfg = model, backend, store, split, cfg
        self.slots: list[_Slot | None] = [None] * cfg.slots
        self.pending: list[Collected] = []
        self.report = CollectReport()
        self._prefill_s = 0.0
        self._start = time.monotonic()

    def run(self, prompts: Sequence[TrainPrompt], deadline: float, status: StatusLine | None = None,
            budget_s: float | None = None) -> CollectReport:
        """Answer the prompts not yet done, until they run out or time.monotonic() passes
        `deadline` (answers in flight are then kept as they stand)."""
        done = self.store.done(self.split)
        queue = deque(p for p in prompts if p.id not in done)
        t0 = self._start = time.monotonic()
        self._prefill_s = 0.0
        with self.model.turn():
            self.model.cache.truncate(0)  # the slots own the whole KV cache meanwhile
            try:
                self._loop(queue, deadline, status, t0, budget_s)
            finally:
                self.backend.kv_clear()
                self.model.cache.truncate(0)
                self._flush(force=True)
        self.report.seconds += time.monotonic() - t0
        return self.report

    def _loop(self, queue: "deque[TrainPrompt]", deadline: float, status: StatusLine | None, t0: float,
              budget_s: float | None) -> None:
        while True:
            timed_out = time.monotonic() >= deadline
            if not timed_out:
                self._admit(queue, deadline)
            active = [i for i, s in enumerate(self.slots) if s is not None]
            if not active:
                return
            if timed_out:
                for i in active:
                    self._finish(i)
                return
            self._step(active)
            if status is not None:
                spent = time.monotonic() - t0
                r = self.report
                status.show(f"{self.split}: {r.answer_rows:,} answer tokens from {r.answers} answers "
                            f"({r.answer_rows / max(spent, 1e-9):.1f} tok/s), {len(queue)} prompts queued",
                            spent / budget_s if budget_s else None)

    def _used(self) -> int:
        return sum(s.cells for s in self.slots if s is not None)

    def _admit(self, queue: "deque[TrainPrompt]", deadline: float) -> None:
        for i, slot in enumerate(self.slots):
            if slot is not None:
                continue
            if time.monotonic() >= deadline or not self._may_prefill():
                return
            while queue:
                prompt = queue[0]
                tokens = prompt_tokens(self.model, prompt.text)
                if len(tokens) > self.cfg.max_prompt_tokens:
                    queue.popleft()
                    self.store.mark_skipped(self.split, [prompt.id])
                    self.report.skipped += 1
                    continue
                if self._used() + len(tokens) + self.cfg.max_new_tokens > self.cfg.n_ctx:
                    return  # wait until a slot frees its cells
                queue.popleft()
                t0 = time.monotonic()
                self.slots[i] = self._prefill(i, prompt, tokens)
                self._prefill_s += time.monotonic() - t0
                break

    def _may_prefill(self) -> bool:
        active = sum(s is not None for s in self.slots)
        if active < max(1, self.cfg.slots // 4):
            return True
        return self._prefill_s <= self.cfg.prefill_share * (time.monotonic() - self._start)

    def _prefill(self, seq: int, prompt: TrainPrompt, tokens: list[int]) -> _Slot:
        """Evaluate the prompt in sequence `seq`; keep the hidden rows of its last positions
        and the target's greedy pick at each (the last pick is the answer's first token)."""
        b = self.backend
        keep_from = max(0, len(tokens) - max(self.cfg.prompt_rows, 1))
        hidden: list[npt.NDArray[np.float16]] = []
        nxt: list[int] = []
        with b.hidden_states_off():  # the rows before keep_from are not kept: skip their outputs
            for lo in range(0, keep_from, b.max_batch):
                chunk = tokens[lo:min(lo + b.max_batch, keep_from)]
                b.decode(chunk, np.arange(lo, lo + len(chunk)), [[seq]] * len(chunk))
        for lo in range(keep_from, len(tokens), b.max_batch):
            chunk = tokens[lo:lo + b.max_batch]
            b.decode(chunk, np.arange(lo, lo + len(chunk)), [[seq]] * len(chunk))
            hidden.append(b.embeddings_rows().astype(np.float16))
            nxt += np.argmax(b.logits_rows(), axis=1).tolist()
        first_token = int(nxt[-1])
        self.report.answer_rows += 1
        slot = _Slot(prompt, len(tokens) + self.cfg.max_new_tokens, len(tokens), first_token, 1)
        if self.cfg.prompt_rows > 0:
            # The last prompt row is where answering starts: an answer row.
            slot.hidden, slot.next, slot.prompt_rows = hidden, nxt, len(nxt) - 1
            self.report.prompt_rows += len(nxt) - 1
        else:  # only the last prompt row: its pick is the answer's first token (an answer row)
            slot.hidden, slot.next = [hidden[-1][-1:]], [first_token]
        if b.is_eog(first_token):
            slot.n_new = self.cfg.max_new_tokens  # an empty answer: finished at the next step
        return slot

    def _step(self, active: list[int]) -> None:
        b = self.backend
        live: list[tuple[int, _Slot]] = []
        for i in active:
            s = self.slots[i]
            assert s is not None
            if s.n_new >= self.cfg.max_new_tokens or b.is_eog(s.last):
                self._finish(i)
            else:
                live.append((i, s))
        if not live:
            return
        b.decode([s.last for _, s in live], [s.pos for _, s in live], [[i] for i, _ in live])
        hidden = b.embeddings_rows().astype(np.float16)
        picks = np.argmax(b.logits_rows(), axis=1)
        self.report.steps += 1
        for row, (i, s) in enumerate(live):
            tok = int(picks[row])
            s.hidden.append(hidden[row:row + 1])
            s.next.append(tok)
            s.pos += 1
            s.last = tok
            s.n_new += 1
            self.report.answer_rows += 1

    def _finish(self, i: int) -> None:
        slot = self.slots[i]
        assert slot is not None
        self.backend.kv_remove(i)
        self.slots[i] = None
        self.pending.append(slot.collected())
        self.report.answers += 1
        self._flush(force=False)

    def _flush(self, force: bool) -> None:
        rows = sum(len(c.next) for c in self.pending)
        if self.pending and (force or rows >= self.cfg.shard_rows):
            self.store.write(self.split, self.pending)
            self.pending = []
