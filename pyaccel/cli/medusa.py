"""`pyaccel medusa train | info | eval`: Medusa heads for a model, made on this machine."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from ..methods.medusa.collect import MAX_SLOTS, CollectConfig
from ..methods.medusa.data import HOLD_OUT_EVERY, TrainPrompt
from ..methods.medusa.evaluate import HeadReport
from ..methods.medusa.heads import HeadWeights
from ..methods.medusa.options import OptionError, need, raise_problems
from ..methods.medusa.pipeline import RunConfig
from ..methods.medusa.train import TrainConfig

_RUN, _COLLECT, _TRAIN = RunConfig(), CollectConfig(), TrainConfig()
# The flag of each config field `medusa train` sets, to report a mistake as typed.
_FLAGS = {"n_heads": "--heads", "draft_vocab": "--draft-vocab", "lr": "--lr", "batch": "--batch",
          "minutes": "--train-minutes", "steps": "--steps", "slots": "--slots", "max_new_tokens": "--max-new-tokens",
          "collect_minutes": "--collect-minutes", "eval_minutes": "--eval-minutes", "threads": "--threads"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="medusa_cmd", required=True, metavar="COMMAND")
    train = sub.add_parser("train", help="collect the model's own answers and train heads on them (CPU, numpy)",
                           description="Generate the model's greedy answers to training prompts (Spec-Bench's "
                           "training split and pyaccel's code prompts, or --data), record its hidden states, and "
                           "train Medusa heads on them. Time-budgeted; --resume continues an interrupted run.")
    train.add_argument("-m", "--model", default=None, help="registry name or .gguf path (default: the registry default)")
    train.add_argument("-o", "--output", type=Path, default=None,
                       help="heads file to write (default: <cache>/medusa/<model>-<sha>.gguf, where decoding finds it)")
    train.add_argument("--data", action="append", default=[], metavar="FILE",
                       help="prompts of your own instead of Spec-Bench + code (JSON lines with an \"instruction\" "
                            "or \"prompt\" field, or text with prompts separated by blank lines); repeatable. "
                            f"Every {HOLD_OUT_EVERY}th prompt of a file is held out to measure the heads: give at "
                            f"least {HOLD_OUT_EVERY}")
    train.add_argument("--questions", type=Path, default=None, help="the Spec-Bench question file, if not in ../shared/data")
    train.add_argument("--heads", type=int, default=_TRAIN.n_heads, help="number of heads")
    train.add_argument("--draft-vocab", type=int, default=_TRAIN.draft_vocab,
                       help="tokens the heads can propose (the most frequent in the answers)")
    train.add_argument("--resume", action="store_true", help="continue an interrupted run (collection and training)")
    train.add_argument("--keep-data", action="store_true",
                       help="keep the answers collected by an earlier run (topping them up to the time budgets) "
                            "but train afresh, e.g. with other --heads or --draft-vocab")
    train.add_argument("--collect-minutes", type=float, default=_RUN.collect_minutes,
                       help="time for answering training prompts")
    train.add_argument("--eval-minutes", type=float, default=_RUN.eval_minutes,
                       help="time for answering held-out prompts (the accuracy written into the file)")
    train.add_argument("--train-minutes", type=float, default=_TRAIN.minutes, help="time for training")
    train.add_argument("--steps", type=int, default=None, help="train exactly this many steps (ignores --train-minutes)")
    train.add_argument("--lr", type=float, default=_TRAIN.lr)
    train.add_argument("--batch", type=int, default=_TRAIN.batch, help="rows per training step")
    train.add_argument("--no-prompt-rows", action="store_true", help="train on answer positions only")
    train.add_argument("--no-token-conditioning", action="store_true",
                       help="heads read the hidden state alone, not also the embedding of the token after it "
                            "(smaller files, ~15%% faster heads, lower accuracy)")
    train.add_argument("--slots", type=int, default=_COLLECT.slots, help=f"answers generated side by side (1-{MAX_SLOTS})")
    train.add_argument("--max-new-tokens", type=int, default=_COLLECT.max_new_tokens, help="answer tokens per prompt")
    train.add_argument("--threads", type=int, default=None)

    info = sub.add_parser("info", help="show a heads file's target, sizes and per-head accuracy")
    info.add_argument("file", type=Path)

    ev = sub.add_parser("eval", help="per-head accuracy on held-out answers and the tau of Medusa decoding")
    ev.add_argument("-m", "--model", default=None)
    ev.add_argument("--heads", type=Path, default=None, help="heads file (default: the model's default heads)")
    ev.add_argument("--questions", type=Path, default=None)
    ev.add_argument("--data", action="append", default=[], metavar="FILE")
    ev.add_argument("--collect-minutes", type=float, default=_RUN.eval_minutes,
                    help="time for answering held-out prompts when none were collected yet")
    ev.add_argument("--tau-prompts", type=int, default=1, help="held-out prompts per category for tau (0: skip)")
    ev.add_argument("--max-tokens", type=int, default=128, help="tokens per answer when measuring tau")
    ev.add_argument("--threads", type=int, default=None)


def command(args: argparse.Namespace) -> int:
    if args.medusa_cmd == "train":
        return _train(args)
    if args.medusa_cmd == "info":
        return _info(args)
    return _eval(args)


def _train(args: argparse.Namespace) -> int:
    from ..methods.medusa.pipeline import describe, train_command
    from ..signals import ending_signals_raise

    cfg = RunConfig(
        collect=CollectConfig(slots=args.slots, max_new_tokens=args.max_new_tokens),
        train=TrainConfig(n_heads=args.heads, draft_vocab=args.draft_vocab, lr=args.lr, batch=args.batch,
                          prompt_rows=not args.no_prompt_rows, minutes=args.train_minutes, steps=args.steps,
                          token_conditioned=not args.no_token_conditioning),
        collect_minutes=args.collect_minutes, eval_minutes=args.eval_minutes, threads=args.threads,
        resume=args.resume, keep_data=args.keep_data)
    t0 = time.monotonic()
    try:
        # SIGTERM / SIGHUP (a closed ssh session) stop a run as Ctrl-C does: what was
        # collected and trained is saved, and --resume continues from it.
        with ending_signals_raise(lambda signum: KeyboardInterrupt()):
            report = train_command(args.model, cfg, args.output, args.questions, args.data)
    except OptionError as exc:
        raise ValueError(exc.named(_FLAGS)) from None
    print(describe(report))
    print(f"total: {time.monotonic() - t0:.0f} s")
    return 0


def _info(args: argparse.Namespace) -> int:
    from ..methods.medusa.format import is_token_conditioned, read_meta

    meta, n_heads, draft_vocab = read_meta(args.file)
    print(f"file: {args.file} ({args.file.stat().st_size / 1e6:.1f} MB)")
    print(f"target: {meta.target_name} ({meta.architecture}, sha256 {meta.target_sha256})")
    print(f"n_embd: {meta.n_embd}  n_vocab: {meta.n_vocab}  heads: {n_heads}  draft vocabulary: {draft_vocab}")
    reads = "the hidden state and the next token's embedding" if is_token_conditioned(args.file) else "the hidden state"
    print(f"heads read: {reads}")
    print(f"trained on: {meta.train_tokens:,} positions")
    for k, row in enumerate(meta.rank_accuracy):
        print(f"head {k + 1}: top-1 {row[0]:.3f}  top-5 {sum(row[:5]):.3f}  (held-out)")
    if not meta.rank_accuracy:
        print("per-head accuracy: not measured")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ..methods.medusa import evaluate
    from ..methods.medusa.collect import open_model
    from ..methods.medusa.data import EVAL, DataStore, default_prompts, interleave
    from ..methods.medusa.format import check_target, default_heads_path, load_heads, model_sha256
    from ..methods.medusa.pipeline import collect_split, data_dir

    _check_eval_args(args)
    held_out = [p for p in interleave(default_prompts(args.questions, args.data)) if p.held_out]
    given = load_heads(args.heads) if args.heads is not None else None  # a bad file fails before the model loads
    collect_cfg = CollectConfig()
    model = open_model(args.model, collect_cfg, args.threads)
    try:
        path = args.heads if args.heads is not None else default_heads_path(model)
        heads = given if given is not None else load_heads(path)
        check_target(heads.meta, model)
        store = DataStore(data_dir(model), model_sha256(model), model.backend.n_embd)
        if store.rows(EVAL) == 0:
            collect_split(model, store, held_out, EVAL, args.collect_minutes, collect_cfg)
        report = evaluate.head_report(heads.weights, store.load(EVAL))
        _print_heads(report, heads.weights, evaluate.head_cost_ms(heads.weights), evaluate.target_token_ms(model))
    finally:
        model.close()
    if args.tau_prompts > 0:
        return _print_tau(args, path, held_out)
    return 0


def _check_eval_args(args: argparse.Namespace) -> None:
    """Mistakes in `medusa eval`'s numbers, reported before the model loads."""
    raise_problems([*need("--collect-minutes", args.collect_minutes >= 0, ">= 0", args.collect_minutes),
                    *need("--tau-prompts", args.tau_prompts >= 0, ">= 0 (0: skip tau)", args.tau_prompts),
                    *need("--max-tokens", args.max_tokens >= 1, ">= 1", args.max_tokens),
                    *need("--threads", args.threads is None or args.threads >= 0, ">= 0 (0: the default)",
                          args.threads)])


def _print_heads(report: HeadReport, weights: HeadWeights, cost_ms: float, token_ms: float) -> None:
    print(f"held-out answer positions: {report.rows:,}")
    for k in range(weights.n_heads):
        print(f"head {k + 1}: top-1 {report.top1[k]:.3f}  top-5 {report.top5[k]:.3f}")
    for cat, (rows, top1, top5) in report.by_category.items():
        heads = "  ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(top1, top5))
        print(f"  {cat:<16} {rows:>6} rows  top-1/top-5 per head: {heads}")
    print(f"head cost per decode step: {cost_ms:.2f} ms ({weights.n_heads} heads, draft vocabulary "
          f"{weights.draft_vocab}, top-10 each); one target token: {token_ms:.1f} ms")


def _print_tau(args: argparse.Namespace, path: Path, held_out: list[TrainPrompt]) -> int:
    from ..methods.medusa.evaluate import medusa_tau
    from ..model import Model

    per_cat: dict[str, list[TrainPrompt]] = {}
    for p in held_out:
        if len(per_cat.setdefault(p.category, [])) < args.tau_prompts:
            per_cat[p.category].append(p)
    chosen = [p for ps in per_cat.values() for p in ps]
    with Model(args.model, n_threads=args.threads, embeddings=True) as model:
        try:
            results = medusa_tau(model, path, chosen, args.max_tokens)
        except RuntimeError as exc:
            print(f"tau: not measured: {exc}", file=sys.stderr)
            return 1
    for r in results:
        print(f"tau {r.category:<16} {r.tau:.2f}  ({r.prompts} prompts, {r.new_tokens} tokens)")
    if results:
        print(f"tau median over categories: {statistics.median(r.tau for r in results):.2f}")
    return 0
