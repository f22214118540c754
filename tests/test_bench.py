"""`pyaccel bench`: the oracle against brute force, method specs, the shipped suites, one smoke run."""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

import pytest

import pyaccel
from pyaccel.bench.costs_report import curve_table, flat_curve, plan_table
from pyaccel.bench.equality import Equality
from pyaccel.bench.oracle import accept_lengths, oracle_cost, oracle_speedup
from pyaccel.bench.report import bench_setup, markdown_table, report_dict, summarize
from pyaccel.bench.runner import BenchConfig, run_bench
from pyaccel.bench.runners import parse_methods
from pyaccel.bench.suites import find_questions, load_suite, shipped_records
from pyaccel.methods.spec import MethodSpec, parse_spec, parse_value

# ---- the oracle ------------------------------------------------------------------------


def brute_accept(prompt: list[int], output: list[int], n_max: int = 4, cap: int = 64) -> list[int]:
    """The definition, literally: every suffix n-gram, every earlier occurrence, what followed it."""
    out = []
    for i in range(len(output) - 1):
        context = prompt + output[: i + 1]
        future = output[i + 1 :]
        best = 0
        for n in range(1, n_max + 1):
            if n > len(context):
                break
            gram = context[-n:]
            for end in range(n - 1, len(context) - 1):  # occurrences ending before the suffix itself
                if context[end - n + 1 : end + 1] != gram:
                    continue
                follow = context[end + 1 :]
                k = 0
                while k < min(len(follow), len(future), cap) and follow[k] == future[k]:
                    k += 1
                best = max(best, k)
        out.append(best)
    return out


def brute_cost(accept: list[int], t: list[float], i: int = 0) -> float:
    """Every sequence of step lengths, enumerated."""
    n = len(accept)
    if i == n:
        return 0.0
    return min(t[L] + brute_cost(accept, t, i + L + 1) for L in range(min(accept[i], n - 1 - i, len(t) - 1) + 1))


def test_accept_lengths_match_the_definition() -> None:
    rng = random.Random(7)
    for _ in range(300):
        vocab = rng.randint(2, 4)
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, 12))]
        output = [rng.randrange(vocab) for _ in range(rng.randint(0, 12))]
        cap = rng.choice([2, 64])
        assert accept_lengths(prompt, output, cap=cap).tolist() == brute_accept(prompt, output, cap=cap)


def test_oracle_cost_matches_brute_force() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 9)
        accept = [rng.randint(0, 6) for _ in range(n)]
        t = [1.0]
        for _ in range(rng.randint(0, 6)):
            t.append(t[-1] + rng.uniform(0.0, 1.5))
        assert oracle_cost(accept, t) == pytest.approx(brute_cost(accept, t))


def test_costs_at_a_depth_interpolate_the_sweeps() -> None:
    from pyaccel.costs import DecodeCosts

    base = [1.0 + 0.5 * b for b in range(8)]  # b = 1..8 behind 1000 tokens
    shallow, deep = [0.8, 1.5, 3.0], [1.5, 4.5, 9.5]  # sizes 1, 4, 8 behind 100 and 2000
    costs = DecodeCosts(base, depth=1000, sweep_depths=[100, 2000], sweep_sizes=[1, 4, 8],
                        sweep_seconds=[shallow, deep])
    assert costs.seconds_at(1000) == pytest.approx(base)
    at_deep, at_shallow = costs.seconds_at(2000), costs.seconds_at(100)
    assert [at_deep[0], at_deep[3], at_deep[7]] == pytest.approx(deep)
    assert [at_shallow[0], at_shallow[3], at_shallow[7]] == pytest.approx(shallow)
    assert at_deep[1] == pytest.approx(base[1] + 0.5 + (2 - 1) / 3 * (2.0 - 0.5))  # interpolated in b
    assert costs.seconds_at(1500) == pytest.approx([(a + b) / 2 for a, b in zip(base, at_deep)])
    assert costs.seconds_at(550) == pytest.approx([(a + b) / 2 for a, b in zip(base, at_shallow)])
    assert costs.seconds_at(10**6) == pytest.approx(at_deep) and costs.seconds_at(0) == pytest.approx(at_shallow)
    assert costs.relative_at(2000)[0] == 1.0 and costs.relative_at(2000)[7] == pytest.approx(9.5 / 1.5)
    assert DecodeCosts(base).seconds_at(5000) == base  # no sweeps: one curve
    table = curve_table(costs).splitlines()
    assert table[0] == ("| tokens in one decode | ms behind 100 | relative behind 100 | ms behind 1000 | "
                        "relative behind 1000 | ms behind 2000 | relative behind 2000 |")
    assert table[2] == "| 1 | 800.0 | 1.00 | 1000.0 | 1.00 | 1500.0 | 1.00 |"


def test_oracle_prices_each_root_at_its_depth() -> None:
    prompt = list(range(20))
    flat, steep = [1.0] * 64, [float(b) for b in range(1, 65)]
    assert oracle_speedup(prompt, prompt, lambda depth: flat) == pytest.approx(19.0)
    assert oracle_speedup(prompt, prompt, lambda depth: steep) == pytest.approx(1.0)
    # Verification is free only beyond depth 30: roots 0-9 decode plainly, root 10 drafts the rest.
    half = oracle_speedup(prompt, prompt, lambda depth: flat if depth > 30 else steep)
    assert half == pytest.approx(19 / 11)
    assert oracle_cost([0, 2, 1, 0], [flat, flat, steep, steep]) == pytest.approx(2.0)
    assert oracle_cost([0, 2, 1, 0], [steep, steep, flat, flat]) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="one cost curve per root"):
        oracle_cost([3, 2, 1, 0], [flat])


def test_oracle_speedup_on_a_copy() -> None:
    prompt = list(range(20))
    # The output repeats the prompt: after the first token every step can copy the rest.
    assert oracle_speedup(prompt, prompt, [1.0] * 64) == pytest.approx(19.0)
    assert oracle_speedup(prompt, prompt, [float(b) for b in range(1, 65)]) == pytest.approx(1.0)
    assert oracle_speedup(prompt, [5], [1.0]) == 1.0


# ---- method specs ----------------------------------------------------------------------


def test_parse_methods() -> None:
    specs = parse_methods("lookup,draft:length=4,max_draft=8,lookup:length=8,llama-lookup:num_pred_tokens=5")
    assert specs == [
        MethodSpec("plain", "plain"),
        MethodSpec("lookup", "lookup"),
        MethodSpec("draft:length=4,max_draft=8", "draft", {"length": 4, "max_draft": 8}),
        MethodSpec("lookup:length=8", "lookup", {"length": 8}),
        MethodSpec("llama-lookup:num_pred_tokens=5", "llama-lookup", {"num_pred_tokens": 5}),
    ]
    assert parse_methods("draft,plain")[0].name == "draft"  # plain given: kept where it is
    assert [parse_value(v) for v in ("3", "0.5", "True", "none", "x.gguf")] == [3, 0.5, True, None, "x.gguf"]
    with pytest.raises(ValueError, match="twice"):
        parse_methods("lookup,lookup")
    with pytest.raises(ValueError, match="before any method"):
        parse_methods("length=4,lookup")
    with pytest.raises(ValueError, match="unknown method"):
        parse_methods("eagle")
    assert parse_spec("lookup:max_draft=32,rewrites=false") == MethodSpec(
        "lookup:max_draft=32,rewrites=false", "lookup", {"max_draft": 32, "rewrites": False})
    with pytest.raises(ValueError, match="key=value"):
        parse_spec("lookup:32")


# ---- suites ----------------------------------------------------------------------------


def test_suites_ship_with_the_package() -> None:
    prompts = resources.files("pyaccel").joinpath("data", "prompts")
    assert {"code.jsonl", "edit.jsonl"} <= {p.name for p in prompts.iterdir()}


def test_code_suite() -> None:
    suite = load_suite("code")
    assert 10 <= len(suite) <= 15
    assert len({p.id for p in suite}) == len(suite)
    assert all(p.text.strip() and p.suite == "code" for p in suite)
    assert len(load_suite("code", 2)) == 2


def test_edit_suite_holds_real_code() -> None:
    records = shipped_records("edit")
    assert 10 <= len(records) <= 12
    assert len({r["id"] for r in records}) == len(records)
    for rec in records:
        assert 50 <= len(rec["code"].splitlines()) <= 200, rec["id"]
        compile(rec["code"], rec["id"], "exec")  # real, complete Python
        assert "PSF" in rec["source"]
        assert rec["copy"] == (rec["task"] == "rename")
    suite = load_suite("edit")
    assert sum(p.copy for p in suite) >= 4
    assert all("```python\n" in p.text for p in suite)


def test_the_extra_edits_are_real_code_of_their_own() -> None:
    """pyaccel/data/prompts/edit_extra.jsonl: ten edits of functions no other suite holds."""
    data = Path(__file__).resolve().parent.parent / "pyaccel" / "data" / "prompts"
    records = [json.loads(line) for line in (data / "edit_extra.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 10 and len({r["id"] for r in records}) == 10
    for rec in records:
        compile(rec["code"], rec["id"], "exec")  # real, complete Python
        assert 20 <= len(rec["code"].splitlines()) <= 200, rec["id"]
        assert "PSF" in rec["source"] and rec["copy"] == (rec["task"] == "rename")
    others = shipped_records("edit") + [json.loads(line) for line in
                                        (data / "edit_holdout.jsonl").read_text(encoding="utf-8").splitlines()]
    assert not {r["source"] for r in records} & {r["source"] for r in others}
    suite = load_suite(str(data / "edit_extra.jsonl"))
    assert {p.suite for p in suite} == {"edit_extra"} and all("```python\n" in p.text for p in suite)


def test_the_language_edits_fence_their_own_language() -> None:
    """pyaccel/data/prompts/edit_langs.jsonl: edits of code in other languages than Python (and of
    prose), each fenced in the language its record names, which its instruction asks back."""
    path = Path(__file__).resolve().parent.parent / "pyaccel" / "data" / "prompts" / "edit_langs.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len({r["lang"] for r in records}) == len(records) >= 8 and "python" not in {r["lang"] for r in records}
    for rec, prompt in zip(records, load_suite(str(path))):
        assert prompt.id == rec["id"] and f"```{rec['lang']}\n{rec['code']}```" in prompt.text
        assert f"```{rec['lang']} code block" in rec["instruction"], rec["id"]
        assert 30 <= len(rec["code"].splitlines()) <= 200, rec["id"]


def test_a_jsonl_file_is_a_suite(tmp_path: Path) -> None:
    holdout = Path(__file__).resolve().parent.parent / "pyaccel" / "data" / "prompts" / "edit_holdout.jsonl"
    suite = load_suite(str(holdout))
    assert len(suite) == 8 and {p.suite for p in suite} == {"edit_holdout"}
    for p in suite:  # real, complete Python of 40-200 lines after the instruction
        code = p.text.split("```python\n", 1)[1].rsplit("```", 1)[0]
        compile(code, p.id, "exec")
        assert 40 <= len(code.splitlines()) <= 200, p.id
    assert sum(p.copy for p in suite) == 3 and len(load_suite(str(holdout), 2)) == 2
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"id": "a", "instruction": "say hi"}\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 needs"):
        load_suite(str(bad))
    bad.write_text('{"id": "a",\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 1 is not valid JSON"):
        load_suite(str(bad))
    with pytest.raises(FileNotFoundError, match="no prompt file"):
        load_suite(str(tmp_path / "missing.jsonl"))


def test_specbench_suites() -> None:
    try:
        questions = find_questions()
    except FileNotFoundError:
        pytest.skip("Spec-Bench questions not found in ../shared/data")
    assert [p.suite for p in load_suite("specbench:math", questions=questions)] == ["specbench:math"] * 10
    mixed = load_suite("specbench", 1, questions)
    assert len({p.id.split("-")[0] for p in mixed}) == len(mixed) >= 10
    with pytest.raises(ValueError, match="choose one of"):
        load_suite("specbench:nope", questions=questions)
    with pytest.raises(ValueError, match="unknown suite"):
        load_suite("poetry")


def test_plan_table_drafts_where_verification_is_cheap() -> None:
    cpu = [1.0 + 0.9 * (b - 1) for b in range(1, 65)]  # every token costs nearly a full pass
    table = plan_table(cpu, [("0", 0.0)]).splitlines()
    row = next(line for line in table if line.startswith("| 0.5 |"))
    measured, flat = [c.strip() for c in row.strip("|").split("|")[2:]]
    assert measured.startswith("0 ") and not flat.startswith("0 ")
    assert flat_curve(3) == [1.0, 1.02, 1.04]


# ---- one end-to-end run ----------------------------------------------------------------


@pytest.mark.model
def test_bench_smoke(gemma: pyaccel.Model, tmp_path: Path) -> None:
    config = BenchConfig(suites=["edit"], methods=parse_methods("plain,lookup"), max_tokens=8, prompts=1, oracle=True)
    bench = run_bench(gemma, config, stream=None)  # gemma has no chat template: raw text prompts
    results = bench.prompts
    assert len(results) == 1
    runs = {r.method: r for r in results[0].runs}
    assert set(runs) == {"plain", "lookup"}
    assert runs["plain"].speedup == 1.0 and runs["plain"].identical
    assert len(runs["plain"].run.tokens) == 8 and runs["plain"].run.tokens_per_s > 0
    # Lookup is lossless: the bench's own check (tests/test_bench_equality.py holds it against
    # the tests' lossless helper) finds no real difference.
    assert runs["lookup"].verdict.equality in (Equality.IDENTICAL, Equality.NEAR_TIE)
    assert not bench.real_differences()
    assert results[0].oracle_speedup is not None and results[0].oracle_speedup >= 1.0
    table = markdown_table(summarize(results))
    assert "| edit | lookup |" in table and "| edit | oracle |" in table
    assert set(bench.memory) == {"plain", "lookup"}
    out = tmp_path / "bench.json"
    out.write_text(json.dumps(report_dict(bench_setup(gemma, config), bench)))
    report = json.loads(out.read_text())
    assert report["prompts"][0]["runs"][0]["tokens"]
    assert report["setup"]["model_file"]["sha256"] == gemma.registry_spec.sha256
    assert {"plain", "lookup"} == set(report["memory"])


class _CtrlCAt:
    """A progress stream that raises KeyboardInterrupt (as Ctrl-C would) when a line holds `mark`."""

    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)
        if self.mark in text:
            raise KeyboardInterrupt

    def flush(self) -> None:
        pass


@pytest.mark.model
def test_an_interrupted_bench_keeps_and_writes_the_prompts_it_finished(gemma: pyaccel.Model, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from pyaccel.bench.cli import EXIT_INTERRUPTED, write_outputs

    config = BenchConfig(suites=["edit"], methods=parse_methods("plain,lookup"), max_tokens=4, prompts=3)
    stream = _CtrlCAt("[2/3]")  # Ctrl-C as the second prompt starts
    bench = run_bench(gemma, config, stream=stream)
    assert bench.interrupted_of == 3
    assert len(bench.prompts) == 1 and {r.method for r in bench.prompts[0].runs} == {"plain", "lookup"}
    assert any("interrupted" in line for line in stream.lines)
    args = argparse.Namespace(json=str(tmp_path / "b.json"), markdown=str(tmp_path / "b.md"), plot=None)
    assert write_outputs(args, gemma, config, bench) == EXIT_INTERRUPTED
    assert "1 of 3 prompts" in capsys.readouterr().err
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["interrupted_of"] == 3 and len(report["prompts"]) == 1
    assert "**Interrupted**: 1 of 3 prompts finished" in (tmp_path / "b.md").read_text()
    # Interrupted before any prompt finished: nothing to write, and nothing is.
    empty = run_bench(gemma, config, stream=_CtrlCAt("[1/3]"))
    assert empty.interrupted_of == 3 and not empty.prompts
    args = argparse.Namespace(json=str(tmp_path / "e.json"), markdown=None, plot=None)
    assert write_outputs(args, gemma, config, empty) == EXIT_INTERRUPTED
    assert not (tmp_path / "e.json").exists()
