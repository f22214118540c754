"""Replay a greedy proposer against recorded plain greedy outputs, without the model.

Under greedy decoding an n-gram proposer's outcome is fully determined by the plain
output: this replays `pyaccel bench --json` results (plain's tokens per prompt), runs the
proposer step by step, accepts the longest draft path that matches the output, and prices
each step with the measured cost curve at its context depth. Its simulated speedup and
the oracle bound use the same curves, so proposer changes can be compared in seconds
instead of a benchmark hour.

    python -m pyaccel.bench.replay bench-results/edit7.json [--option key=value ...] [--tuning key=value ...]

--option sets a PromptLookup argument (max_draft=32); --tuning a `LookupTuning` field
(stats_decay=0.99, min_seen=3). --method auto replays auto instead (--tuning: `AutoTuning`
fields); --curve FILE prices and plans on a given relative cost curve. The model (-m) is
the one the bench ran unless given; the prompts are read again from the bench's suites and
given to it as the bench gave them.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..cost_model import CostModel, conservative_fill
from ..defaults import N_CTX
from ..errors import PyaccelError
from ..methods import make_method
from ..methods.base import Proposer
from ..methods.auto.policy import AutoTuning
from ..methods.lookup import LookupTuning
from ..methods.spec import MethodSpec, parse_value
from ..methods.tuning import replace_fields
from ..model import Model
from ..registry import is_local_path
from ..types import Draft, SamplingConfig, StepOutcome
from .oracle import oracle_speedup
from .runner import prompt_tokens
from .runners import PLAIN
from .suites import load_suite

NO_ROWS = np.zeros((0, 0), dtype=np.float32)  # a replay has no logits to show the proposer


def accept_path(draft: Draft, future: Sequence[int]) -> list[int]:
    """Greedy verification: node indices of the longest root path equal to `future`."""
    path: list[int] = []
    parent = -1
    for tok in future:
        nxt = [i for i in range(len(draft)) if draft.parents[i] == parent and draft.tokens[i] == tok]
        if not nxt:
            break
        parent = nxt[0]
        path.append(parent)
    return path


def recorded_model(setup: dict[str, Any]) -> str:
    """The model a bench's `setup` ran: its file where that is still on this machine, else its
    registry name."""
    path = setup.get("path")
    if path and Path(path).is_file():
        return str(path)
    name = (setup.get("model_file") or {}).get("registry_name") or setup.get("model")
    if not name or is_local_path(name):
        raise ValueError(f"the model the bench ran ({path or name}) is not on this machine: pass -m MODEL "
                         "(the same model, or one with its tokenizer)")
    return str(name)


def _suite_texts(setup: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(suite, prompt id) -> the prompt's text, read again from the suites the bench ran."""
    texts = {}
    for suite in setup["suites"]:
        try:
            prompts = load_suite(suite, setup.get("prompts"), setup.get("questions"))
        except (ValueError, FileNotFoundError) as exc:
            raise ValueError(f"the bench's suite {suite!r} cannot be read again ({exc}): replay reads each "
                             "prompt's text from its suite (run it from the folder the bench ran in)") from None
        texts.update({(p.suite, p.id): p.text for p in prompts})
    return texts


def _check_tokens(record: dict[str, Any], prompt: list[int], plain: list[int], model: Model, ran: str) -> None:
    """The recorded tokens fit `model`'s vocabulary and its prompt tokens are the bench's (as
    many): else the replay would not be of the run recorded (or would crash in the core).
    `ran` names the model the bench ran."""
    where = f"prompt {record['suite']} {record['id']}"
    highest = max(plain, default=0)
    if highest >= model.n_vocab:
        raise ValueError(f"{where}: the bench's output holds token id {highest}, beyond {model.name}'s vocabulary "
                         f"of {model.n_vocab}: replay with the model the bench ran ({ran}: leave -m out)")
    recorded = record.get("prompt_tokens")
    if recorded is not None and recorded != len(prompt):
        raise ValueError(f"{where}: {model.name} makes {len(prompt)} tokens of it, the bench gave {recorded}: replay "
                         f"with the model the bench ran ({ran}: leave -m out) and the suite files it read")


def recorded_plain(data: dict[str, Any], model: Model) -> list[tuple[dict[str, Any], list[int], list[int]]]:
    """Per prompt of a `pyaccel bench --json` result (`data`): its record, its prompt tokens
    (the suite text as the bench gave it to `model`: `runner.prompt_tokens`) and plain
    decoding's output tokens (the first plain run). Each record carries the run's token limit
    (`max_tokens`, for `simulate`). Prompts whose answer ended at its first token are left
    out: there is no decode to replay (the bench leaves them out of its speeds too)."""
    texts = _suite_texts(data["setup"])
    limit = data["setup"]["max_tokens"]
    out = []
    for p in data["prompts"]:
        plain = next((r["tokens"] for r in p["runs"] if r["method"] == PLAIN), None)
        if (p["suite"], p["id"]) not in texts or plain is None:
            raise ValueError(f"prompt {p['suite']} {p['id']}: "
                             + ("no plain run recorded" if plain is None else "not in its suite any more"))
        if plain:
            prompt = prompt_tokens(model, texts[p["suite"], p["id"]])
            _check_tokens(p, prompt, plain, model, str(data["setup"].get("model")))
            out.append(({**p, "max_tokens": limit}, prompt, plain))
    return out


def simulate(proposer: Proposer, prompt: list[int], output: list[int], rel: Callable[[int], Sequence[float]],
             max_batch: int = 64,
             on_step: Callable[[int, Draft, list[int], int], None] | None = None,
             max_tokens: int | None = None) -> dict[str, float]:
    """Speedup, steps, drafted nodes, cost (in single-token decodes) and tau of `proposer`
    reproducing `output`. `max_tokens` is the run's limit (None: the output's length). An
    output shorter than it ended with the model's end token, which the run did not know in
    advance: each step's budget is the run's (up to the limit, not the output's end), and
    the pass that gave the end token is a step too (whatever it drafted rejected), for plain
    decoding as well.
    `on_step(done, draft, path, depth)` sees each step: the output tokens committed before
    it, its draft, the draft nodes kept and the history's length at its root."""
    limit = len(output) if max_tokens is None else max_tokens
    if not output:
        raise ValueError("the output is empty: an answer that ended at its first token has no decode to replay")
    if limit < len(output):
        raise ValueError(f"max_tokens {limit} is below the output's {len(output)} tokens")
    last = len(output) + (len(output) < limit)  # the end token's pass is the last step
    proposer.begin(list(prompt), SamplingConfig())
    history = list(prompt) + [output[0]]
    done, cost, steps, drafted = 1, 0.0, 0, 0
    while done < last:
        budget = min(max_batch - 1, limit - done - 1)
        draft = proposer.propose(history, budget) if budget > 0 else Draft.empty()
        path = accept_path(draft, output[done:done + len(draft)])
        nxt = output[done + len(path)] if done + len(path) < len(output) else -1
        proposer.observe(StepOutcome(draft, path, nxt, len(history) - 1, NO_ROWS))
        if on_step is not None:
            on_step(done, draft, path, len(history))
        n = len(path) + 1
        history += output[done:done + n]
        done += n
        cost += rel(len(history))[len(draft)]
        steps += 1
        drafted += len(draft)
    proposer.end()
    passes = last - 1  # plain decoding's
    return {"speedup": passes / cost if cost else 1.0, "cost": cost, "tau": (len(output) - 1) / max(steps, 1),
            "drafted": drafted, "steps": steps}


def _pairs(items: Sequence[str], flag: str) -> dict[str, Any]:
    bad = [o for o in items if "=" not in o]
    if bad:
        raise ValueError(f"{flag} takes key=value, got {bad[0]!r}")
    return {k.strip(): parse_value(v.strip()) for k, v in (o.split("=", 1) for o in items)}


def _literal(value: Any) -> Any:
    """A --tuning value: a Python literal (lists become tuples: tuning fields are frozen), else as given."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return tuple(value) if isinstance(value, list) else value


def lookup_proposer(options: Sequence[str], tunings: Sequence[str]) -> Proposer:
    """PromptLookup with --option arguments and --tuning fields (an unknown name lists the known)."""
    tuning = replace_fields(LookupTuning(), "lookup tuning",
                            **{k: _literal(v) for k, v in _pairs(tunings, "--tuning").items()})
    return make_method(MethodSpec("lookup", "lookup", {**_pairs(options, "--option"), "tuning": tuning}))


def read_results(path: str) -> dict[str, Any]:
    """A `pyaccel bench --json` file, checked to be one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no results file {path}: give a file `pyaccel bench --json` wrote") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} cannot be read as JSON ({exc}): give a file `pyaccel bench --json` wrote") from None
    setup = data.get("setup") if isinstance(data, dict) else None
    if not isinstance(setup, dict) or not all(k in setup for k in ("suites", "max_tokens")) or "prompts" not in data:
        raise ValueError(f"{path} is not a `pyaccel bench --json` file (no setup with suites and max_tokens, "
                         "or no prompts)")
    return data


def replay(data: dict[str, Any], model: Model, proposer: Proposer) -> list[str]:
    """One line per prompt of `data` replayed (simulated speedup, tau, the oracle bound, the
    measured lookup speedup) and a line of medians."""
    recorded = recorded_plain(data, model)  # checked before the cost curve, which may be measured
    if not recorded:
        raise ValueError("no prompt of the results has a plain answer past its first token: nothing to replay")
    rel = model.costs.relative_at  # the curve at a context depth
    proposer.bind(model)  # the model's cost model and sequence limit
    lines, sims, ratios = [], [], []
    for p, prompt, plain in recorded:
        sim = simulate(proposer, prompt, plain, rel, max_tokens=p["max_tokens"])
        bound = oracle_speedup(prompt, plain, rel)
        measured = next((r["speedup"] for r in p["runs"] if r["method"] == "lookup"), None)
        sims.append(sim["speedup"])
        ratios.append(sim["speedup"] / bound)
        lines.append(f"{p['id']:34s} sim {sim['speedup']:.2f}x tau {sim['tau']:.2f} oracle {bound:.2f}x "
                     f"of-oracle {sim['speedup'] / bound:.2f} measured {_speedup(measured)} drafted {sim['drafted']}")
    lines.append(f"median sim {statistics.median(sims):.2f}x, median of oracle {statistics.median(ratios):.2f}")
    return lines


def _speedup(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def read_curve(path: str) -> list[float]:
    """A relative cost curve from a JSON file: an object of batch size -> the cost of a decode
    of that many tokens relative to one (`{"1": 1.0, "2": 1.73, "4": 2.9, ...}`, e.g. a
    "relative behind 1024" column of docs/benchmarks.md). A size left out costs what
    `conservative_fill` gives it (as a learnt curve's do)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no curve file {path}: give a JSON object of size -> relative cost")
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} cannot be read as JSON ({exc}): give an object of size -> relative cost") from None
    table = raw.get("relative", raw) if isinstance(raw, dict) else None
    try:
        curve = {int(k): float(v) for k, v in table.items()}  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"{path}: give an object of batch size -> relative cost, e.g. "
                         '{"1": 1.0, "2": 1.73}') from None
    if curve.get(1) != 1.0 or len(curve) < 2 or min(curve) < 1:
        raise ValueError(f"{path}: sizes must be >= 1, size 1 must cost 1.0 and at least one more size is needed")
    return conservative_fill(curve)


def method_proposer(method: str, options: Sequence[str], tunings: Sequence[str]) -> Proposer:
    """Method `method` ("lookup" or "auto") with --option arguments and --tuning fields (of
    `LookupTuning` or `AutoTuning`, nested ones by their own names). auto replays without a
    draft model or Medusa heads unless --option says otherwise: a replay runs no model."""
    if method == "lookup":
        return lookup_proposer(options, tunings)
    if method != "auto":
        raise ValueError(f"replay runs lookup or auto, got {method!r}")
    tuning = replace_fields(AutoTuning(), "auto tuning",
                            **{k: _literal(v) for k, v in _pairs(tunings, "--tuning").items()})
    args = {"use_draft": False, "medusa": False, **_pairs(options, "--option"), "tuning": tuning}
    return make_method(MethodSpec("auto", "auto", args))


def priced(data: dict[str, Any], model: Model, proposer: Proposer) -> tuple[list[str], dict[str, float]]:
    """`replay`'s per-prompt speedups priced on `model.costs` in one line each, and their
    summary: the geometric mean, the lowest prompt and the total (plain passes over the
    replay's cost, all prompts together)."""
    recorded = recorded_plain(data, model)
    if not recorded:
        raise ValueError("no prompt of the results has a plain answer past its first token: nothing to replay")
    proposer.bind(model)
    lines, speedups, passes, cost = [], [], 0.0, 0.0
    for p, prompt, plain in recorded:
        sim = simulate(proposer, prompt, plain, model.costs.relative_at, max_tokens=p["max_tokens"])
        speedups.append(sim["speedup"])
        passes += sim["speedup"] * sim["cost"]
        cost += sim["cost"]
        lines.append(f"{p['id']:34s} sim {sim['speedup']:.4f}x tau {sim['tau']:.2f} drafted {sim['drafted']}")
    summary = {"geomean": float(np.exp(np.mean(np.log(speedups)))), "lowest": min(speedups),
               "total": passes / cost, "prompts": float(len(speedups))}
    lines.append(f"geometric mean {summary['geomean']:.4f}x, total {summary['total']:.4f}x, "
                 f"lowest {summary['lowest']:.4f}x ({len(speedups)} prompts)")
    return lines, summary


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyaccel.bench.replay", description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a pyaccel bench --json file with plain runs")
    ap.add_argument("-m", "--model", default=None,
                    help="registry name or .gguf path (default: the model the bench ran, its setup.model)")
    ap.add_argument("--option", action="append", default=[], help="PromptLookup argument key=value")
    ap.add_argument("--tuning", action="append", default=[], help="LookupTuning (or with --method auto, AutoTuning) field key=value")
    ap.add_argument("--method", choices=("lookup", "auto"), default=None,
                    help="the method replayed (default lookup); with it, --tuning names AutoTuning fields for auto, "
                         "and the output is each prompt's speedup and their geometric mean")
    ap.add_argument("--curve", default=None, metavar="FILE",
                    help="price and plan on this relative cost curve (JSON: size -> cost relative to one token) "
                         "instead of the model's measured one")
    args = ap.parse_args(argv)
    try:
        data = read_results(args.results)
        curve = read_curve(args.curve) if args.curve is not None else None
        summarised = args.method is not None or curve is not None
        proposer = method_proposer(args.method or "lookup", args.option, args.tuning)
        name = args.model if args.model is not None else recorded_model(data["setup"])
        with Model(name, n_ctx=data["setup"].get("n_ctx", N_CTX)) as model:
            if curve is not None:
                model.costs = CostModel.fixed(curve)
            for line in (priced(data, model, proposer)[0] if summarised else replay(data, model, proposer)):
                print(line)
    except (PyaccelError, ValueError, FileNotFoundError) as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
