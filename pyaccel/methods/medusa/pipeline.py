"""`pyaccel medusa train` from end to end: collect (held-out, then training answers), build
the draft vocabulary, train, measure on held-out answers, write the heads file.

Every phase has a time budget and resumes: collection skips prompts already answered and
counts the time already spent, training continues from its checkpoint. The default budgets
(2 + 16 minutes of collection, 9 of training) bound the whole run of a small target to
about half an hour, whatever the CPU.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TextIO

import numpy as np

from ...paths import check_file_path
from ...progress import StatusLine, clock
from .collect import CollectConfig, Collector, CollectReport, open_model
from .data import EVAL, HOLD_OUT_EVERY, TRAIN, DataStore, Dataset, TrainPrompt, default_prompts, interleave, labels
from .evaluate import RANK_TOPK, answer_rows, rank_accuracy
from .format import default_heads_path, medusa_dir, meta_for, model_label, model_sha256, save_heads
from .heads import F32, HeadWeights, MedusaHeads, rms_normalise
from .options import Problem, need, raise_problems
from .outmatrix import embedding_rows, output_rows
from .train import (
    TrainConfig,
    TrainData,
    TrainProgress,
    TrainState,
    check_checkpoint,
    choose_vocab,
    final_weights,
    load_checkpoint,
    to_draft,
    train_heads,
)

if TYPE_CHECKING:
    from ...model import Model

VALIDATION_EVERY = 10  # every 10th training sequence is kept out of training, for early stopping


@dataclass(frozen=True)
class RunConfig:
    """A whole `medusa train` run."""

    collect: CollectConfig = field(default_factory=CollectConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    collect_minutes: float = 16.0  # answers to training prompts
    eval_minutes: float = 2.0  # answers to held-out prompts (accuracy reported in the file)
    threads: int | None = None
    resume: bool = False  # continue collection and training where an interrupted run stopped
    keep_data: bool = False  # continue collection, but train afresh (other --heads, --draft-vocab, ...)

    def problems(self) -> list[Problem]:
        """Every option of the run out of range, collection's and training's included."""
        # A run that starts afresh has nothing collected: without time for both splits it
        # would fail only after minutes of work, for want of data.
        afresh = not (self.resume or self.keep_data)
        rule = "> 0 (a run without --resume or --keep-data collects afresh)" if afresh else ">= 0"

        def ok(minutes: float) -> bool:
            return minutes > 0 if afresh else minutes >= 0

        return [*self.collect.problems(), *self.train.problems(),
                *need("collect_minutes", ok(self.collect_minutes), rule, self.collect_minutes),
                *need("eval_minutes", ok(self.eval_minutes), rule, self.eval_minutes),
                *need("threads", self.threads is None or self.threads >= 0, ">= 0 (0: the default)", self.threads)]

    def validate(self) -> None:
        raise_problems(self.problems())


@dataclass
class RunReport:
    output: Path
    collect_s: dict[str, float] = field(default_factory=dict)
    collected: dict[str, CollectReport] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    train_s: float = 0.0
    steps: int = 0
    rank: tuple[tuple[float, ...], ...] = ()
    coverage: float = 0.0  # held-out head labels inside the draft vocabulary
    history: list[tuple[int, float, float]] = field(default_factory=list)


def data_dir(model: "Model") -> Path:
    """Where collection keeps a target's shards: <cache>/medusa/data/<name>-<sha256[:12]>."""
    return medusa_dir() / "data" / f"{model_label(model)}-{model_sha256(model)[:12]}"


def collect_split(model: "Model", store: DataStore, prompts: Sequence[TrainPrompt], split: str, minutes: float,
                  cfg: CollectConfig, stream: TextIO | None = None) -> CollectReport:
    """Answer `prompts` into `split` for what is left of `minutes` (time spent by earlier,
    interrupted runs counts)."""
    budget = max(minutes * 60.0 - store.seconds(split), 0.0)
    if budget <= 0 or not prompts:
        return CollectReport()
    status = StatusLine(f"collecting {split}", stream=stream)
    t0 = time.monotonic()
    try:
        report = Collector(model, store, split, cfg).run(prompts, t0 + budget, status, budget)
    finally:
        store.add_seconds(split, time.monotonic() - t0)
    status.close(f"{split}: {report.answer_rows:,} answer + {report.prompt_rows:,} prompt rows from "
                 f"{report.answers} answers ({report.tokens_per_s:.1f} answer tok/s)")
    return report


def training_rows(ds: Dataset, n_heads: int, use_prompt_rows: bool) -> tuple[Dataset, np.ndarray, Dataset, np.ndarray]:
    """(train rows, their labels, validation rows, their labels) in full ids [N, K]; every
    VALIDATION_EVERY-th sequence is validation (answer rows only), at least the last one."""
    lab = labels(ds, n_heads)[:, 1:]
    n_seqs = int(ds.seq.max(initial=-1)) + 1
    is_val = ds.seq % VALIDATION_EVERY == VALIDATION_EVERY - 1 if n_seqs >= VALIDATION_EVERY else ds.seq == n_seqs - 1
    train_rows = ~is_val & (use_prompt_rows | ~ds.prompt)
    val_rows = is_val & ~ds.prompt
    return ds.select(train_rows), lab[train_rows], ds.select(val_rows), lab[val_rows]


def _draft_tokens(full: np.ndarray, vocab: np.ndarray, n_vocab: int) -> np.ndarray:
    """Draft index of each token (-1 outside the draft vocabulary): what conditioned heads embed."""
    return np.maximum(to_draft(full, vocab, n_vocab), -1).astype(np.int64)


def _shuffled(hidden: np.ndarray, lab: np.ndarray, seed: int, token: np.ndarray) -> TrainData:
    """Validation rows in a fixed random order, so that a capped validation set spans all sequences."""
    order = np.random.default_rng(seed).permutation(len(lab))
    return TrainData(hidden[order], lab[order], token[order])


@dataclass(frozen=True)
class TrainInputs:
    """What training reads besides its state: the frozen output rows and embeddings of the
    draft vocabulary, and the training and validation rows in draft ids."""

    out: F32
    embd: F32 | None  # token-conditioned heads only
    train: TrainData
    val: TrainData


def prepare_training(model: "Model", store: DataStore, tc: TrainConfig,
                     checkpoint: Path | None = None) -> tuple[TrainState, TrainInputs]:
    """The state to train (from `checkpoint` when given and present, else fresh over the most
    frequent labels) and its inputs, from the collected training split."""
    n_vocab = model.n_vocab
    train_ds, train_lab, val_ds, val_lab = training_rows(store.load(TRAIN), tc.n_heads, tc.prompt_rows)
    if not len(train_ds) or not len(val_ds):
        raise ValueError(f"too little data to train on ({len(train_ds)} training rows, {len(val_ds)} validation "
                         "rows): collect longer (--collect-minutes) or give more prompts (--data)")
    if checkpoint is not None and checkpoint.is_file():
        state = load_checkpoint(checkpoint, tc)
    else:
        state = TrainState.fresh(tc.n_heads, model.backend.n_embd, choose_vocab(train_lab, tc.draft_vocab, n_vocab),
                                 tc.token_conditioned)
    embd = rms_normalise(embedding_rows(model.path, state.vocab)) if state.u is not None else None
    train = TrainData(train_ds.hidden, to_draft(train_lab, state.vocab, n_vocab),
                      _draft_tokens(train_ds.next, state.vocab, n_vocab))
    val = _shuffled(val_ds.hidden, to_draft(val_lab, state.vocab, n_vocab), tc.seed,
                    _draft_tokens(val_ds.next, state.vocab, n_vocab))
    return state, TrainInputs(output_rows(model.path, state.vocab), embd, train, val)


def held_out_rank(weights: HeadWeights, store: DataStore, topk: int = RANK_TOPK) -> tuple[np.ndarray, float]:
    """Rank accuracy [K, topk] of `weights` on the held-out answers, and the share of their
    labels inside the draft vocabulary."""
    eval_hidden, eval_lab, _, eval_next = answer_rows(store.load(EVAL), weights.n_heads)
    rank = rank_accuracy(weights, eval_hidden, eval_lab, topk, tokens=eval_next)
    return rank, float(np.isin(eval_lab[eval_lab >= 0], weights.vocab).mean())


def run_training(model: "Model", store: DataStore, cfg: RunConfig, output: Path, checkpoint: Path,
                 report: RunReport, stream: TextIO | None = None) -> MedusaHeads:
    """Vocabulary, output rows, training and held-out rank accuracy; writes the heads file."""
    tc = cfg.train
    state, inputs = prepare_training(model, store, tc, checkpoint if cfg.resume else None)
    out, embd, train, val = inputs.out, inputs.embd, inputs.train, inputs.val
    report.rows = {"train": len(train.labels), "validation": len(val.labels)}
    status = StatusLine("training", stream=stream)

    def show(p: TrainProgress) -> None:
        frac = p.seconds / p.budget_s if p.budget_s else p.step / max(p.planned, 1)
        val_note = f", held-out loss {p.val_loss:.3f}, head-1 top-1 {p.val_top1:.3f}" if p.val_loss is not None else ""
        status.show(f"step {p.step}, loss {p.loss:.3f}{val_note}", frac, force=p.val_loss is not None)

    t0 = time.monotonic()
    state = train_heads(state, tc, out, train, val, checkpoint, show, embd)
    report.train_s, report.steps, report.history = time.monotonic() - t0, state.step, list(state.history)
    status.close(f"{state.step} steps, best validation score {state.best_score:.3f}")
    weights = final_weights(state, out, embd)
    rank, report.coverage = held_out_rank(weights, store)
    report.rank = tuple(tuple(float(x) for x in row) for row in rank)
    meta = meta_for(model, report.rank, train_tokens=len(train.labels))
    heads = MedusaHeads(weights, meta)
    save_heads(output, heads)
    return heads


def check_split(prompts: Sequence[TrainPrompt]) -> None:
    """Refuse prompts that leave one side of the split empty: training would fail for want of
    data only after minutes of collection."""
    if not any(p.held_out for p in prompts):
        raise ValueError(f"too few prompts ({len(prompts)}): every {HOLD_OUT_EVERY}th prompt of a category is "
                         "held out to measure the heads (the rest train them), so give at least "
                         f"{HOLD_OUT_EVERY} prompts in one category (one --data file)")


def check_model(tc: TrainConfig, model: "Model") -> None:
    """The options that depend on the model (checked once it is open, before collection)."""
    raise_problems(need("draft_vocab", tc.draft_vocab <= model.n_vocab,
                        f"<= {model.n_vocab} (the size of {model.name}'s vocabulary)", tc.draft_vocab))


def collect_both(model: "Model", store: DataStore, prompts: Sequence[TrainPrompt], cfg: RunConfig,
                 report: RunReport, stream: TextIO) -> None:
    """Held-out answers, then training answers, each for what is left of its time budget."""
    for split, minutes in ((EVAL, cfg.eval_minutes), (TRAIN, cfg.collect_minutes)):
        chosen = [p for p in prompts if p.held_out == (split == EVAL)]
        t0 = time.monotonic()
        report.collected[split] = collect_split(model, store, chosen, split, minutes, cfg.collect, stream)
        report.collect_s[split] = time.monotonic() - t0
        if split == EVAL and not store.rows(EVAL):
            raise ValueError("no held-out answer was collected, so the heads could not be measured: raise "
                             "--eval-minutes, or give prompts short enough for the model's context")


def train_command(model_name: str, cfg: RunConfig, output: Path | None, questions: Path | None,
                  data: Sequence[str], stream: TextIO | None = None) -> RunReport:
    """The whole run; returns what it measured (the heads are at `report.output`). Every
    option is checked before collection starts, and before an earlier run's data is cleared."""
    stream = stream if stream is not None else sys.stderr
    cfg.validate()
    prompts = interleave(default_prompts(questions, data))
    check_split(prompts)
    if output is not None:
        check_file_path(output, "-o", "heads.gguf", "pass another -o")
    model = open_model(model_name, cfg.collect, cfg.threads)
    try:
        check_model(cfg.train, model)
        output = output if output is not None else default_heads_path(model)
        checkpoint = output.with_name(output.name + ".ckpt.npz")
        if cfg.resume and checkpoint.is_file():
            check_checkpoint(checkpoint, cfg.train)
        store = DataStore(data_dir(model), model_sha256(model), model.backend.n_embd)
        if not cfg.resume:
            checkpoint.unlink(missing_ok=True)
            if not cfg.keep_data:
                store.clear()
        report = RunReport(output)
        collect_both(model, store, prompts, cfg, report, stream)
        model.backend.kv_clear()
        run_training(model, store, cfg, output, checkpoint, report, stream)
    finally:
        model.close()
    return report


def describe(report: RunReport) -> str:
    """A short summary of a run for the terminal."""
    lines = [f"heads: {report.output}"]
    for split, secs in report.collect_s.items():
        c = report.collected[split]
        lines.append(f"collect {split}: {clock(secs)}, {c.answer_rows:,} answer rows + {c.prompt_rows:,} prompt rows "
                     f"({c.answers} answers, {c.tokens_per_s:.1f} answer tok/s)")
    lines.append(f"train: {clock(report.train_s)}, {report.steps} steps on {report.rows.get('train', 0):,} rows")
    lines.append(f"held-out labels in the draft vocabulary: {report.coverage:.3f}")
    for k, row in enumerate(report.rank):
        lines.append(f"head {k + 1}: top-1 {row[0]:.3f}  top-5 {sum(row[:5]):.3f}")
    return "\n".join(lines)

