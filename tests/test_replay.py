"""`pyaccel.bench.replay.simulate` against steps worked out by hand: a run that ended with the
model's end token did not know where its output would end, so its budgets and its last pass
are the run's, not bounded by the output. And `python -m pyaccel.bench.replay` end to end on a
bench run of its own, with the mistakes it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pyaccel
from pyaccel import Draft, Proposer
from pyaccel.bench.replay import main, method_proposer, read_curve, recorded_model, recorded_plain, simulate
from pyaccel.bench.report import bench_setup
from pyaccel.bench.runner import BenchConfig
from pyaccel.bench.runners import parse_methods
from pyaccel.bench.suites import load_suite
from pyaccel.types import SamplingConfig

OUTPUT = [10, 11, 12, 13, 14]  # the prefill's token, then four decoded
PAST_THE_END = 99


class Oracle(Proposer):
    """Drafts the next `k` true tokens (PAST_THE_END beyond the output), and records each
    step's budget."""

    name = "oracle"

    def __init__(self, output: list[int], k: int) -> None:
        self.output, self.k = output, k
        self.budgets: list[int] = []
        self.prompt_len = 0

    def propose(self, tokens: list[int], budget: int) -> Draft:
        self.budgets.append(budget)
        done = len(tokens) - self.prompt_len
        n = min(budget, self.k)
        return Draft.chain([self.output[i] if i < len(self.output) else PAST_THE_END for i in range(done, done + n)])

    def begin(self, prompt: list[int], sampling: SamplingConfig) -> None:
        self.prompt_len = len(prompt)


def linear(depth: int) -> list[float]:
    """A pass with b draft nodes costs 1 + b / 2 single-token passes, at every depth."""
    return [1.0 + b / 2 for b in range(64)]


def test_an_output_at_the_limit_is_replayed_as_before() -> None:
    # done 1: budget 3, drafts 11 12, both kept (cost 2); done 4: budget 0, plain (cost 1).
    oracle = Oracle(OUTPUT, 2)
    sim = simulate(oracle, [1, 2], OUTPUT, linear, max_tokens=len(OUTPUT))
    assert oracle.budgets == [3]
    assert (sim["steps"], sim["cost"], sim["drafted"]) == (2, 3.0, 2)
    assert sim["speedup"] == pytest.approx(4 / 3)
    assert simulate(Oracle(OUTPUT, 2), [1, 2], OUTPUT, linear) == sim  # no limit given: the output's length


def test_an_output_that_ended_early_keeps_the_runs_budgets_and_its_end_pass() -> None:
    # max_tokens 8. done 1: budget 6, drafts 11 12, both kept (cost 2); done 4: budget 3,
    # drafts 14 and a token past the end; 14 is kept and the pass gives the end token (cost 2).
    # Plain decoding: four passes for 11-14 and one for the end token.
    oracle = Oracle(OUTPUT, 2)
    sim = simulate(oracle, [1, 2], OUTPUT, linear, max_tokens=8)
    assert oracle.budgets == [6, 3]
    assert (sim["steps"], sim["cost"], sim["drafted"]) == (2, 4.0, 4)
    assert sim["speedup"] == pytest.approx(5 / 4)
    assert sim["tau"] == pytest.approx(2.0)


def test_a_lost_bet_on_the_end_pass_is_paid() -> None:
    # Plain decoding costs 5 passes; a proposer that drafts only once everything is committed
    # (all of it past the output's end) pays for that draft on the end pass.
    class Late(Oracle):
        def propose(self, tokens: list[int], budget: int) -> Draft:
            done = len(tokens) - self.prompt_len
            return Draft.chain([PAST_THE_END] * 2) if done == len(self.output) else Draft.empty()

    sim = simulate(Late(OUTPUT, 0), [1, 2], OUTPUT, linear, max_tokens=8)
    assert (sim["steps"], sim["cost"]) == (5, 4 * 1.0 + 2.0)
    assert sim["speedup"] == pytest.approx(5 / 6)


def test_a_limit_below_the_output_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        simulate(Oracle(OUTPUT, 2), [1, 2], OUTPUT, linear, max_tokens=3)


def test_an_empty_output_has_nothing_to_replay() -> None:
    with pytest.raises(ValueError, match="no decode to replay"):
        simulate(Oracle([], 2), [1, 2], [], linear, max_tokens=8)


# ---- the command -------------------------------------------------------------------------


def _results_file(tmp_path: Path, setup: dict[str, object], prompts: list[dict[str, object]]) -> Path:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"setup": setup, "prompts": prompts}), encoding="utf-8")
    return path


def test_replay_refuses_what_it_cannot_replay_before_loading_a_model(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def error(*argv: str) -> str:
        assert main(list(argv)) == 2
        return capsys.readouterr().err

    assert f"no results file {tmp_path / 'none.json'}" in error(str(tmp_path / "none.json"))
    (tmp_path / "x.json").write_text("{", encoding="utf-8")
    assert "cannot be read as JSON" in error(str(tmp_path / "x.json"))
    (tmp_path / "x.json").write_text("[]", encoding="utf-8")
    assert "is not a `pyaccel bench --json` file" in error(str(tmp_path / "x.json"))
    results = str(_results_file(tmp_path, {"model": "none.gguf", "path": str(tmp_path / "none.gguf"),
                                           "suites": ["edit"], "max_tokens": 8}, []))
    assert "--option takes key=value, got 'max_draft'" in error(results, "--option", "max_draft")
    err = error(results, "--option", "bogus=1")
    assert "unknown option bogus" in err and "max_draft" in err
    assert "unknown lookup tuning bogus: choose from" in error(results, "--tuning", "bogus=1")
    assert "is not on this machine: pass -m MODEL" in error(results)


def test_a_curve_file_is_filled_as_a_learnt_curve_is(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"source": "a host", "relative": {"1": 1.0, "2": 1.7, "4": 2.5}}), encoding="utf-8")
    assert read_curve(str(path)) == [1.0, 1.7, 2.5, 2.5]  # size 3: the next larger size's cost
    path.write_text(json.dumps({"1": 1.0, "3": 2.0}), encoding="utf-8")  # a bare table too
    assert read_curve(str(path)) == [1.0, 2.0, 2.0]
    for bad, message in (({"2": 1.5}, "size 1 must cost 1.0"), ([1, 2], "batch size -> relative cost"),
                         ({"1": 1.0, "x": 2}, "batch size -> relative cost")):
        path.write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            read_curve(str(path))
    with pytest.raises(FileNotFoundError, match="no curve file"):
        read_curve(str(tmp_path / "none.json"))


def test_auto_replays_without_a_draft_model_or_heads_and_takes_its_own_knobs() -> None:
    auto = method_proposer("auto", [], ["plan_margin=0.05", "min_seen=3"])
    assert isinstance(auto, pyaccel.Auto) and not auto.use_draft and auto._medusa_arg is False
    assert auto.tuning.plan_margin == 0.05 and auto.tuning.prompt_lookup.min_seen == 3
    assert isinstance(method_proposer("lookup", ["max_draft=8"], []), pyaccel.PromptLookup)
    with pytest.raises(ValueError, match="unknown auto tuning bogus"):
        method_proposer("auto", [], ["bogus=1"])
    with pytest.raises(ValueError, match="replay runs lookup or auto"):
        method_proposer("draft", [], [])


def test_the_recorded_model_is_its_file_else_its_registry_name(tmp_path: Path) -> None:
    here = tmp_path / "m.gguf"
    here.write_bytes(bytes(4))
    gone = str(tmp_path / "gone.gguf")
    assert recorded_model({"model": "m.gguf", "path": str(here)}) == str(here)
    assert recorded_model({"model": "gemma-3-270m", "path": gone,
                           "model_file": {"registry_name": "gemma-3-270m"}}) == "gemma-3-270m"
    with pytest.raises(ValueError, match="pass -m MODEL"):
        recorded_model({"model": "gone.gguf", "path": gone, "model_file": {"registry_name": None}})


@pytest.mark.model
def test_replay_runs_on_a_bench_result_with_its_own_model(gemma: pyaccel.Model, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A result as `pyaccel bench --json` writes it (its set-up from the bench's own
    `bench_setup`) whose plain answer copies 24 tokens of the prompt's code: prompt lookup,
    replayed, drafts that copy and is accepted."""
    bp = load_suite("edit", 1)[0]
    prompt = gemma.tokenize(bp.text)  # gemma has no chat template: the bench gives it the raw text
    answer = prompt[-40:-16]
    config = BenchConfig(suites=["edit"], methods=parse_methods("plain,lookup"), max_tokens=len(answer), prompts=1)
    runs = [{"method": "plain", "speedup": 1.0, "tokens": answer},
            {"method": "lookup", "speedup": 1.5, "tokens": answer}]
    data = {"setup": bench_setup(gemma, config),
            "prompts": [{"suite": bp.suite, "id": bp.id, "prompt_tokens": len(prompt), "runs": runs}]}
    path = _results_file(tmp_path, data["setup"], data["prompts"])

    (record, tokens, plain), = recorded_plain(data, gemma)  # the prompt as the bench built it
    assert (tokens, plain, record["max_tokens"]) == (prompt, answer, len(answer))
    assert main([str(path), "--option", "max_draft=8", "--tuning", "min_seen=3"]) == 0  # no -m: the bench's model
    first, median = capsys.readouterr().out.splitlines()
    fields = first.split()
    assert fields[0] == bp.id and fields[fields.index("measured") + 1] == "1.50x"
    # Copies drafted and accepted (how long the drafts are follows the machine's learnt cost curve).
    assert float(fields[fields.index("tau") + 1]) > 1.0 and int(fields[-1]) > 0
    assert median.startswith("median sim ")
    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps({"1": 1.0, "2": 1.2, "64": 4.0}), encoding="utf-8")
    for method in ("auto", "lookup"):  # priced on a given curve: one line per prompt and their summary
        assert main([str(path), "--method", method, "--curve", str(curve)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split()[0] == bp.id and lines[-1].startswith("geometric mean ")

    data["prompts"][0]["runs"][0]["tokens"] = answer + [gemma.n_vocab]  # beyond any token of this vocabulary
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main([str(path)]) == 2
    assert f"holds token id {gemma.n_vocab}, beyond {gemma.name}'s vocabulary" in capsys.readouterr().err
    data["prompts"][0]["runs"][0]["tokens"] = answer
    data["prompts"][0]["prompt_tokens"] += 1  # tokenized otherwise: another model, or an edited suite
    with pytest.raises(ValueError, match="makes .* tokens of it, the bench gave"):
        recorded_plain(data, gemma)
