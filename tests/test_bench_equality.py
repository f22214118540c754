"""`pyaccel bench` end to end on Gemma 3 270M: its equality check catches a method that changes
the output, and the command writes its JSON, Markdown and plot."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import pyaccel
from pyaccel.bench import plot
from pyaccel.bench.cli import EXIT_REAL_DIFFERENCE, write_outputs
from pyaccel.bench.equality import Equality
from pyaccel.bench.runner import BenchConfig, run_bench
from pyaccel.bench.runners import parse_methods
from pyaccel.bench.suites import BenchPrompt
from pyaccel.cli import main
from pyaccel.types import Draft

import lossless

# The broken method changes the target's choice only where it is clear by this margin, so its
# first difference from plain decoding can never pass as a near-tie.
CLEAR_GAP = 2.0


def demote_clear_top1(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows whose top-1 leads top-2 by CLEAR_GAP or more get their top-1 pushed below every other logit."""
    out = np.array(rows, copy=True)
    for row in out:
        top = np.argsort(row)[-2:]
        if row[top[1]] - row[top[0]] >= CLEAR_GAP:
            row[top[1]] = row.min() - 1.0
    return out


class DemotesClearTop1(pyaccel.Proposer):
    """A deliberately broken method: drafts nothing, but while it generates, the target's
    logits lose their clear winner (through the backend's logits hook)."""

    name = "broken"

    def bind(self, target: pyaccel.Model) -> None:
        self.backend = target.backend

    def begin(self, prompt: list[int], sampling: pyaccel.SamplingConfig) -> None:
        self.backend.logits_hook = demote_clear_top1

    def propose(self, tokens: list[int], budget: int) -> Draft:
        return Draft.empty()

    def end(self) -> None:
        self.backend.logits_hook = None


# Short prompts keep each run on Gemma well under a second.
SHORT = BenchPrompt("short", "add", "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n")
SUITE_RECORD = {"id": "rename", "instruction": "Rename x to total.", "code": "x = 0\nfor i in range(3):\n    x += i\n"}


def _outputs(tmp_path: Path) -> argparse.Namespace:
    """Every output file; the plot where its optional extra (matplotlib) is installed."""
    return argparse.Namespace(json=str(tmp_path / "b.json"), markdown=str(tmp_path / "b.md"),
                              plot=str(tmp_path / "b.png") if plot.available() else None)


@pytest.mark.model
def test_bench_catches_a_method_that_changes_the_output(gemma: pyaccel.Model, tmp_path: Path) -> None:
    config = BenchConfig(suites=["short"], methods=parse_methods("plain"), max_tokens=8)
    bench = run_bench(gemma, config, stream=None, prompts=[SHORT], proposers={"broken": DemotesClearTop1})
    assert gemma.backend.logits_hook is None
    runs = {r.method: r for r in bench.prompts[0].runs}
    plain, broken = runs["plain"].run.tokens, runs["broken"].run.tokens
    verdict = runs["broken"].verdict
    assert verdict.equality is Equality.REAL and plain != broken
    i = verdict.position
    assert i is not None and plain[:i] == broken[:i] and plain[i] != broken[i]
    prompt = gemma.tokenize(bench.prompts[0].prompt.text)
    # The gap is plain decoding's own, as the tests' lossless check replays it.
    assert verdict.gap == pytest.approx(lossless.top2_gap(gemma, prompt, plain[: verdict.position]))
    assert verdict.gap >= CLEAR_GAP
    assert [r for _, r in bench.real_differences()] == [runs["broken"]]

    out = _outputs(tmp_path)
    assert write_outputs(out, gemma, config, bench) == EXIT_REAL_DIFFERENCE
    record = json.loads(Path(out.json).read_text())
    run = next(r for r in record["prompts"][0]["runs"] if r["method"] == "broken")
    assert (run["equality"], run["first_difference"]) == ("real", verdict.position)
    assert "| short | broken |" in Path(out.markdown).read_text()
    assert record["setup"]["methods"] == ["plain", "broken"]
    assert out.plot is None or Path(out.plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.model
def test_the_bench_command_writes_its_reports(gemma_path: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = _outputs(tmp_path)
    suite = tmp_path / "mine.jsonl"
    suite.write_text(json.dumps(SUITE_RECORD) + "\n", encoding="utf-8")
    plotting = ["--plot", out.plot] if out.plot else []
    status = main(["bench", "-m", str(gemma_path), "--n-ctx", "1024", "--suite", str(suite),
                   "--methods", "plain,lookup", "--max-tokens", "8", "--json", out.json,
                   "--markdown", out.markdown, *plotting])
    assert status == 0, capsys.readouterr().err
    record = json.loads(Path(out.json).read_text())
    assert record["setup"]["machine"]["llama_cpp_python"] and record["setup"]["model_file"]["size"] > 0
    assert {r["equality"] for p in record["prompts"] for r in p["runs"]} <= {"identical", "near-tie"}
    assert record["memory"]["lookup"]["bind"] is not None
    text = Path(out.markdown).read_text()
    assert "| mine | lookup |" in text and "| lookup |" in text and "**Machine**" in text
    assert out.plot is None or Path(out.plot).stat().st_size > 0
