"""The `pyaccel bench` tools (summary, replay, passes, trace) on a results file a real bench
run of gemma-3-270m wrote (tests/data/bench_gemma.json: `pyaccel bench -m gemma-3-270m
--suite code --suite edit --prompts 1 --methods plain,lookup,plain: --max-tokens 48
--rounds 2 --oracle --json ...`), and the summary's statistics against independent ones."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pyaccel.bench.pooled import compare, geometric_mean, noise_floor, read_runs
from pyaccel.cli import main

RESULTS = Path(__file__).parent / "data" / "bench_gemma.json"
USAGE_ERROR = 2


def recorded() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def speedups(method: str) -> dict[str, list[float]]:
    """Prompt id -> the method's timed speedups, read from the file directly."""
    return {p["id"]: [r["speedup"] for r in p["runs"] if r["method"] == method and r["speedup"]]
            for p in recorded()["prompts"]}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["bench", *argv]) == 0
    return capsys.readouterr().out


def floor_row(out: str, method: str) -> list[str]:
    """The cells of `method`'s row in the floor table (the one with a geometric mean column)."""
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith(f"| {method} |")]
    return [c.strip() for c in next(r for r in rows if r[2].strip().endswith("x") and len(r) == 8)]


# ---- summary ------------------------------------------------------------------------------


def test_the_summary_reports_hand_computed_means_and_medians(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "summary", str(RESULTS))
    for method in ("plain", "lookup", "plain:"):
        every = [x for runs in speedups(method).values() for x in runs]
        row = floor_row(out, method)
        assert row[1] == str(len(every))
        assert row[2] == f"{math.exp(sum(map(math.log, every)) / len(every)):.3f}x"
        low, high = (float(x) for x in row[3].split("-"))
        assert low <= float(row[2][:-1]) <= high
    for p in recorded()["prompts"]:  # one prompt per suite: the suite's median is the prompt's
        median = statistics.median(speedups("lookup")[p["id"]])
        assert f"| {p['suite']} | lookup | 2 | {median:.3f}x | {p['id']} {median:.3f}x |" in out
    assert "suites at 0.97x or more: plain 2 of 2" in out
    assert "The noise floor: with the run-to-run spread of plain:'s runs" in out


def test_the_summary_compares_and_lists_prompts(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "summary", str(RESULTS), "--compare", "lookup,plain:", "--per-prompt", "lookup",
              "--prefix", "code-", "--bootstrap", "200")
    first, second = speedups("lookup")["code-01"], speedups("plain:")["code-01"]
    ratio = statistics.median(first) / statistics.median(second)
    assert f"code: lookup / plain: per prompt, geometric mean {ratio:.4f}" in out
    rows = [line for line in out.splitlines() if line.startswith("| code-01 |")]
    assert len(rows) == 1 and f"{statistics.median(first):.2f}x" in rows[0]
    assert "rename-" not in out.split("| prompt | speedups")[1]  # the prefix chose the code prompt alone


def test_two_files_pool_as_one_run_of_their_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "summary", str(RESULTS), str(RESULTS), "--void", "code:1")
    kept = [r for p in recorded()["prompts"] for r in p["runs"] if r["method"] == "lookup" and r["speedup"]
            and not (p["suite"] == "code" and r["round"] == 1)]
    assert floor_row(out, "lookup")[1] == str(2 * len(kept))
    assert "| code | lookup | 2 |" in out and "| edit | lookup | 4 |" in out


@pytest.mark.parametrize("argv, message", [
    (["--compare", "lookup"], "--compare takes two method labels"),
    (["--compare", "lookup,auto"], "--compare: no timed runs of 'auto'"),
    (["--per-prompt", "auto"], "--per-prompt: no timed runs of 'auto'"),
    (["--void", "code"], "--void takes SUITE:ROUND"),
])
def test_summary_mistakes_say_what_to_give(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "summary", str(RESULTS), *argv]) == USAGE_ERROR
    assert message in capsys.readouterr().err


def test_a_file_that_is_not_a_bench_result_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text("[]", encoding="utf-8")
    assert main(["bench", "summary", str(tmp_path / "x.json")]) == USAGE_ERROR
    assert "is not a `pyaccel bench --json` file" in capsys.readouterr().err


def test_the_geometric_means_interval_is_scipys_percentile_bootstrap() -> None:
    values = np.random.default_rng(7).lognormal(0.0, 0.05, 60)
    iv = geometric_mean(values, draws=20000)
    assert iv.value == pytest.approx(stats.gmean(values), rel=1e-12)
    ref = stats.bootstrap((values,), stats.gmean, n_resamples=20000, method="percentile",
                          rng=np.random.default_rng(1)).confidence_interval
    assert iv.low == pytest.approx(ref.low, rel=2e-3) and iv.high == pytest.approx(ref.high, rel=2e-3)
    assert geometric_mean(values, draws=0).low is None


def test_the_comparison_is_the_ratio_of_per_prompt_medians() -> None:
    first, second = [[1.2, 1.0, 1.1], [0.9, 0.95]], [[1.0, 1.0], [1.0, 0.8, 0.9]]
    c = compare(first, second, draws=500)
    ratios = [statistics.median(a) / statistics.median(b) for a, b in zip(first, second)]
    assert c.geometric.value == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
    assert c.medians.value == pytest.approx(statistics.median([1.1, 0.925]) / statistics.median([1.0, 0.9]))
    assert c.ahead == 2 and c.geometric.low <= c.geometric.value <= c.geometric.high


def test_a_control_without_spread_puts_exactly_the_slower_methods_under_the_floor() -> None:
    assert noise_floor([1.0] * 8, 1.0, prompts=3, rounds=2, draws=100) == (0.0, 0.0)
    assert noise_floor([1.0] * 8, 0.96, prompts=3, rounds=2, draws=100) == (1.0, 0.0)
    assert noise_floor([1.0] * 8, 0.92, prompts=3, rounds=2, draws=100) == (1.0, 1.0)


def test_the_runs_carry_plain_decodings_target_time() -> None:
    runs = read_runs([str(RESULTS)])
    plain = {(r.prompt, r.round): r.target_s for r in runs if r.method == "plain"}
    assert runs and all(r.plain_target_s == plain[r.prompt, r.round] for r in runs)


# ---- replay and passes: the bench's plain outputs replayed on gemma-3-270m ----------------


@pytest.mark.model
def test_replay_is_the_replay_modules_command(gemma_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "replay", "--option", "max_draft=8", str(RESULTS), "-m", str(gemma_path))
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == [p["id"] for p in recorded()["prompts"]]
    assert lines[-1].startswith("median sim ")


@pytest.mark.model
def test_passes_of_plain_decoding_cost_what_plain_decoding_does(gemma_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "passes", str(RESULTS), "-m", str(gemma_path), "--method", "plain", "--rounds", "2")
    for p in recorded()["prompts"]:
        line = next(x for x in out.splitlines() if x.startswith(p["id"] + " "))
        assert "drafted     0" in line and line.endswith("speedup 1.0000")
    assert "geometric mean speedup 1.0000" in out and "medians: code 1.0000, edit 1.0000" in out


@pytest.mark.model
def test_passes_show_steps_and_orders(gemma_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "passes", str(RESULTS), "-m", str(gemma_path), "--method", "lookup", "--oracle",
              "--show", "rename-heapq-merge", "--curve", "1:1,2:1.5,4:2.5,8:4", "--shuffle", "3")
    steps = [line for line in out.splitlines() if " drafted " in line and " kept " in line]
    plain = next(r["tokens"] for r in recorded()["prompts"][1]["runs"] if r["method"] == "plain")
    assert out.startswith("== rename-heapq-merge") and steps
    assert int(steps[-1].split()[0]) < len(plain) and " oracle " in out and " share " in out
    out = run(capsys, "passes", str(RESULTS), "-m", str(gemma_path), "--method", "lookup", "--against", "plain",
              "--orders", "2")
    assert "order  1:" in out and "order  2:" in out and "lookup median >= plain median in: " in out
    assert out.count(" of 2 orders") == 2  # one count per suite


def test_a_bad_curve_is_refused_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "passes", str(RESULTS), "-m", "none.gguf", "--curve", "2:1.5"]) == USAGE_ERROR
    assert "--curve must start at 1:1" in capsys.readouterr().err


# ---- trace: live runs through the decode loop's trace hook --------------------------------


@pytest.mark.model
def test_trace_runs_and_prices_every_step(gemma_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "t" / "trace.jsonl"
    out = run(capsys, "trace", "-m", str(gemma_path), "--n-ctx", "1024", "--suite", "edit", "--prompts", "1",
              "--methods", "plain,lookup", "--max-tokens", "16", "--show", "rename-heapq-merge", "--jsonl", str(rows))
    row = json.loads(rows.read_text(encoding="utf-8"))
    assert row["id"] == "rename-heapq-merge" and list(row["runs"]) == ["plain", "lookup"]
    plain = row["runs"]["plain"]
    assert plain["modelled"] == 1.0 and plain["units"] == pytest.approx(len(plain["steps"]))
    for r in row["runs"].values():
        assert sum(s["committed"] for s in r["steps"]) == r["decoded"] == 15
    assert "== rename-heapq-merge lookup" in out and "| method | edit | min | at 0.97x+ | geometric mean |" in out


def test_trace_refuses_a_peer_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "trace", "-m", "none.gguf", "--suite", "edit", "--methods", "plain,llama-plain"]) == 2
    assert "leave llama-plain" in capsys.readouterr().err
