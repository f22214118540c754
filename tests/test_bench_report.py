"""`pyaccel bench` reports without a model: the equality classifier, memory and machine
fingerprints, the Markdown tables, the JSON, the plot and the exit status."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

import pyaccel
from pyaccel.bench import memory
from pyaccel.bench.cli import EXIT_REAL_DIFFERENCE, EXIT_WRITE_FAILED, write_outputs
from pyaccel.bench.equality import (
    IDENTICAL,
    NEAR_TIE,
    Equality,
    Verdict,
    classify,
    first_difference,
)
from pyaccel.bench.fingerprint import (
    git_commit,
    machine_fingerprint,
    machine_line,
    model_fingerprint,
    parse_cpuinfo,
)
from pyaccel.bench.plot import INSTALL_HINT, plot_speedups, speedup_grid
from pyaccel.bench.report import (
    markdown_report,
    markdown_table,
    memory_table,
    report_dict,
    summarize,
    time_split,
)
from pyaccel.bench.runner import BenchConfig, BenchResults, MethodRun, PromptResult, run_speedup
from pyaccel.bench.runners import Run, parse_methods
from pyaccel.bench.suites import BenchPrompt
from pyaccel.cli import main
from pyaccel.registry import load_registry

# ---- the equality classifier -------------------------------------------------------------


def _no_gap(i: int) -> float:
    raise AssertionError(f"identical outputs need no gap, asked at {i}")


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2 and first_difference([1, 2, 3], [1, 2]) == 2
    assert first_difference([], []) is None


def test_classify_identical_near_tie_and_real() -> None:
    assert classify([1, 2, 3], [1, 2, 3], _no_gap) == IDENTICAL
    asked: list[int] = []

    def gap(i: int) -> float:
        asked.append(i)
        return [3.0, 0.2, 1.0, 0.7][i]

    assert classify([1, 2, 3], [1, 9, 3], gap) == Verdict(Equality.NEAR_TIE, 1, 0.2)
    assert classify([1, 2, 3], [1, 2, 9], gap) == Verdict(Equality.REAL, 2, 1.0)
    assert classify([1, 2, 3], [9, 2, 3], gap).equality is Equality.REAL
    # One output ended where the other went on: plain's gap at the shorter length decides.
    assert classify([1, 2, 3], [1, 2, 3, 4], gap) == Verdict(Equality.REAL, 3, 0.7)
    assert classify([1, 2, 3], [1, 2, 3, 4], gap, near_tie=1.0).equality is Equality.NEAR_TIE
    assert asked == [1, 2, 0, 3, 3]
    assert classify([1], [2], lambda i: NEAR_TIE).equality is Equality.REAL  # the bound itself is not a tie
    assert "near-tie difference at token 1" in Verdict(Equality.NEAR_TIE, 1, 0.2).describe()


# ---- memory ----------------------------------------------------------------------------

STATUS = """Name:\tpython
VmHWM:\t  900000 kB
VmRSS:\t  800000 kB
RssAnon:\t  300000 kB
RssFile:\t  490000 kB
RssShmem:\t   10000 kB
Threads:\t3
"""


def test_parse_status() -> None:
    s = memory.parse_status(STATUS)
    assert s == memory.MemorySample(rss=800000 * 1024, peak=900000 * 1024, anon=310000 * 1024, file=490000 * 1024)
    assert memory.parse_status("VmRSS:\t1 kB\n") is None


def test_bind_memory_and_extra_over_plain() -> None:
    mb = 2**20
    base = memory.MemorySample(700 * mb, 700 * mb, 200 * mb, 500 * mb)
    before = memory.MemorySample(710 * mb, 720 * mb, 210 * mb, 500 * mb)
    after = memory.MemorySample(1250 * mb, 1300 * mb, 290 * mb, 960 * mb)  # a draft model: weights + context
    draft = memory.bind_memory(base, before, after)
    assert (draft.bind, draft.bind_anon, draft.bind_file) == (540 * mb, 80 * mb, 460 * mb)
    assert draft.alone is None  # no run measured yet
    draft.run_growth = 30 * mb
    plain = memory.MethodMemory(base=700 * mb, bind=0, bind_anon=0, bind_file=0, run_growth=10 * mb)
    assert draft.alone == 1270 * mb and memory.extra_over_plain(draft, plain) == 560 * mb
    assert memory.bind_memory(None, before, after) == memory.MethodMemory()
    assert memory.extra_over_plain(memory.MethodMemory(), plain) is None
    assert memory.mib(3 * mb) == "3" and memory.mib(None) == "-"


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="resident memory is read from Linux's /proc")
def test_run_peak_sees_memory_touched_inside_the_run() -> None:
    m = memory.MethodMemory()
    with memory.RunPeak(m) as peak:
        block = bytearray(64 * 2**20)  # zero-filled: every page touched
        del block
    if not peak.resettable:
        pytest.skip("this kernel does not let a process reset its own peak RSS")
    assert m.run_growth is not None and m.run_growth >= 60 * 2**20
    assert m.peak is not None and m.peak >= m.run_growth


# ---- fingerprints ----------------------------------------------------------------------

X86 = "processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_vnni\n\n" \
      "processor\t: 1\nmodel name\t: Example CPU 9000\nflags\t\t: fpu sse4_2\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd asimddp i8mm\nCPU part\t: 0xd40\n"


def test_parse_cpuinfo() -> None:
    assert parse_cpuinfo(X86) == ("Example CPU 9000", ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni"])
    assert parse_cpuinfo(ARM) == (None, ["asimd", "asimddp", "i8mm"])
    assert parse_cpuinfo("") == (None, [])


def test_machine_fingerprint() -> None:
    fp = machine_fingerprint()
    assert fp["cores"] == os.cpu_count() and 1 <= fp["usable_cores"] <= fp["cores"]
    assert fp["llama_cpp_python"] == metadata.version("llama_cpp_python")
    assert fp["pyaccel"] == metadata.version("pyaccel")
    package = Path(pyaccel.__file__).resolve().parent
    done = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=package, capture_output=True, text=True)
    head = done.stdout.strip() if done.returncode == 0 else None  # None: pyaccel is not in a git checkout
    assert (fp["pyaccel_commit"] or "").split("+")[0] == (head or "")
    line = machine_line(fp)
    assert f"of {fp['cores']} cores" in line and (head or "unknown")[:12] in line and fp["os"] in line


def test_git_commit_outside_a_checkout(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None


def test_model_fingerprint(tmp_path: Path) -> None:
    spec = load_registry().models["gemma-3-270m"]
    path = tmp_path / spec.file
    path.write_bytes(b"GGUF" + bytes(60))
    fp = model_fingerprint(SimpleNamespace(path=path, registry_spec=spec))
    assert fp == {"file": spec.file, "size": 64, "registry_name": "gemma-3-270m", "sha256": spec.sha256,
                  "license": spec.license, "draft": spec.draft}
    assert model_fingerprint(SimpleNamespace(path=path, registry_spec=None)) == {"file": spec.file, "size": 64}


# ---- tables, JSON, plot, exit status -------------------------------------------------------


def _run(tokens: list[int], tokens_per_s: float, split: tuple[float, float, float, float] | None) -> Run:
    decode_s = 10 / tokens_per_s
    parts = [None] * 4 if split is None else [decode_s * f for f in split]
    return Run(tokens, 10, decode_s, 1.0, None, None, *parts)


def _results(broken: Equality = Equality.NEAR_TIE) -> BenchResults:
    plain, lookup = [1, 2, 3], [1, 2, 4]
    prompts = []
    for k, suite in enumerate(("edit", "edit", "code")):
        pr = PromptResult(BenchPrompt(suite, f"p{k}", "text"), 20)
        pr.runs = [MethodRun("plain", 0, _run(plain, 10.0, (0.8, 0.0, 0.05, 0.15)), 1.0, IDENTICAL),
                   MethodRun("lookup", 0, _run(lookup, 20.0 + k, (0.6, 0.2, 0.1, 0.1)), 2.0 + k / 10,
                             Verdict(broken, 2, 0.3 if broken is Equality.NEAR_TIE else 4.0) if k == 1 else IDENTICAL),
                   MethodRun("llama-plain", 0, _run(plain, 11.0, None), 1.1, IDENTICAL)]
        prompts.append(pr)
    mb = 2**20
    mem = {"plain": memory.MethodMemory(700 * mb, 0, 0, 0, 10 * mb, 720 * mb),
           "lookup": memory.MethodMemory(700 * mb, 2 * mb, 2 * mb, 0, 12 * mb, 730 * mb),
           "llama-plain": memory.MethodMemory(700 * mb, 300 * mb, 40 * mb, 260 * mb, 5 * mb, 1010 * mb)}
    return BenchResults(prompts, mem)


def test_time_split() -> None:
    split = time_split([_run([1], 10.0, (0.6, 0.2, 0.1, 0.1)), _run([1], 5.0, (0.8, 0.0, 0.1, 0.1))])
    assert split == pytest.approx({"target": 0.7, "draft": 0.1, "verify": 0.1, "overhead": 0.1})
    assert time_split([_run([1], 10.0, None)]) is None


def test_markdown_tables() -> None:
    bench = _results()
    table = markdown_table(summarize(bench.prompts)).splitlines()
    assert table[0] == ("| suite | method | median speedup | min | median tau | accept | identical | near-tie | real | "
                        "tok/s | time % target/draft/verify/overhead |")
    assert table[2] == "| edit | plain | 1.00x | 1.00x | 1.00 | - | 2/2 | 0 | 0 | 10.00 | 80.0/0.0/5.0/15.0 |"
    assert table[3] == "| edit | lookup | 2.05x | 2.00x | 1.00 | - | 1/2 | 1 | 0 | 20.50 | 60.0/20.0/10.0/10.0 |"
    assert table[4] == "| edit | llama-plain | 1.10x | 1.10x | 1.00 | - | 2/2 | 0 | 0 | 11.00 | - |"
    assert table[6] == "| code | lookup | 2.20x | 2.20x | 1.00 | - | 1/1 | 0 | 0 | 22.00 | 60.0/20.0/10.0/10.0 |"
    mem = memory_table(bench.memory).splitlines()
    assert mem[0] == "| method | peak RSS | alone | extra over plain | bind anon | bind file | run growth |"
    assert mem[2] == "| plain | 720 | 710 | 0 | 0 | 0 | 10 |"
    assert mem[4] == "| llama-plain | 1010 | 1005 | 295 | 40 | 260 | 5 |"



def test_a_prompt_with_nothing_decoded_is_left_out_of_the_speeds() -> None:
    """An answer that ends at its first token has no decode phase: its runs get no speedup,
    and the suite's speeds and taus come from the other prompts alone."""
    plain, fast = Run([1, 2], 0, 0.0, 0.0), Run([1, 2], 0, 0.0, 0.0)
    assert run_speedup(fast, plain) is None
    assert run_speedup(_run([1], 20.0, None), _run([1], 10.0, None)) == pytest.approx(2.0)
    bench = _results()
    empty = PromptResult(BenchPrompt("edit", "ends-at-once", "text"), 20)
    empty.runs = [MethodRun("plain", 0, plain, None, IDENTICAL), MethodRun("lookup", 0, fast, None, IDENTICAL),
                  MethodRun("llama-plain", 0, Run([1, 2], 0, 0.0), None, IDENTICAL)]
    rows = summarize(bench.prompts + [empty])
    table = markdown_table(rows).splitlines()
    assert table[3] == "| edit | lookup | 2.05x | 2.00x | 1.00 | - | 2/3 | 1 | 0 | 20.50 | 60.0/20.0/10.0/10.0 |"
    alone = markdown_table(summarize([empty])).splitlines()
    assert alone[3] == "| edit | lookup | - | - | - | - | 1/1 | 0 | 0 | - | - |"
    assert json.loads(json.dumps(report_dict(_setup(), BenchResults([empty], {}))))["prompts"][0]["runs"][1]["speedup"] is None


def _setup() -> dict[str, object]:
    spec = load_registry().models["gemma-3-270m"]
    return {"model": "gemma-3-270m", "model_file": {"file": spec.file, "size": spec.size, "sha256": spec.sha256},
            "machine": machine_fingerprint(), "n_ctx": 1024, "n_threads": 2, "max_tokens": 8, "rounds": 1}


def test_markdown_report_and_json() -> None:
    bench = _results(Equality.REAL)
    text = markdown_report(bench, _setup(), "pyaccel bench --suite edit")
    assert text.startswith("## pyaccel bench\n\n```bash\npyaccel bench --suite edit\n```\n")
    assert "253,113,024 B, sha256 a5fd3b62230aa5ec" in text and "| edit | lookup | 2.05x | 2.00x |" in text
    assert "| llama-plain | 1010 |" in text
    record = json.loads(json.dumps(report_dict(_setup(), bench)))
    run = record["prompts"][1]["runs"][1]
    assert (run["equality"], run["first_difference"], run["plain_top2_gap"]) == ("real", 2, 4.0)
    assert run["target_s"] == pytest.approx(0.6 * 10 / 21)
    assert record["memory"]["llama-plain"]["extra_over_plain"] == 295 * 2**20
    assert record["summary"][1]["real"] == 1 and record["summary"][1]["time_split"]["draft"] == pytest.approx(0.2)


def test_speedup_grid_and_plot(tmp_path: Path) -> None:
    rows = summarize(_results().prompts)
    suites, methods, grid = speedup_grid(rows)
    assert (suites, methods) == (["edit", "code"], ["lookup", "llama-plain"])
    assert grid == [[pytest.approx(2.05), pytest.approx(2.2)], [pytest.approx(1.1), pytest.approx(1.1)]]
    pytest.importorskip("matplotlib", reason="the plot is the optional extra pyaccel[plot]")
    out = tmp_path / "sub" / "speedup.png"
    plot_speedups(rows, out, "test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"pip install 'pyaccel\[plot\]'"):
        plot_speedups(summarize(_results().prompts), tmp_path / "x.png", "test")
    monkeypatch.setattr("pyaccel.bench.plot.available", lambda: False)
    # Refused before any model loads (this model path does not exist).
    assert main(["bench", "-m", str(tmp_path / "none.gguf"), "--suite", "edit", "--plot", "x.png"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err


def _stand_in(tmp_path: Path) -> tuple[SimpleNamespace, BenchConfig]:
    """What write_outputs reads of a Model (gemma's registry entry, a file standing in for its
    weights) and the config of a plain + lookup run."""
    spec = load_registry().models["gemma-3-270m"]
    path = tmp_path / spec.file
    path.write_bytes(bytes(16))
    model = SimpleNamespace(name="gemma-3-270m", path=path, registry_spec=spec, n_ctx=1024,
                            backend=SimpleNamespace(n_threads=2))
    return model, BenchConfig(suites=["edit"], methods=parse_methods("plain,lookup"), max_tokens=8)


def test_a_real_difference_makes_the_exit_status_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, config = _stand_in(tmp_path)
    out = argparse.Namespace(json=str(tmp_path / "b.json"), markdown=str(tmp_path / "b.md"), plot=None)
    assert write_outputs(out, model, config, _results(Equality.NEAR_TIE)) == 0
    assert "differs" not in capsys.readouterr().err
    assert write_outputs(out, model, config, _results(Equality.REAL)) == EXIT_REAL_DIFFERENCE
    err = capsys.readouterr().err
    assert "lookup on edit p1 (round 1): real difference at token 2 (plain's top-2 gap 4.000)" in err
    assert json.loads(Path(out.json).read_text())["setup"]["model_file"]["sha256"] == model.registry_spec.sha256


def test_a_failed_write_is_reported_and_the_rest_still_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    model, config = _stand_in(tmp_path)

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pyaccel.bench.plot.plot_speedups", full_disk)
    (tmp_path / "taken").mkdir()  # --json names a folder made after the checks before the run
    out = argparse.Namespace(json=str(tmp_path / "taken"), markdown=str(tmp_path / "b.md"),
                             plot=str(tmp_path / "b.png"))
    assert write_outputs(out, model, config, _results(Equality.REAL)) == EXIT_WRITE_FAILED
    err = capsys.readouterr().err
    assert f"could not write --json {tmp_path / 'taken'}" in err
    assert f"could not write --plot {tmp_path / 'b.png'}: [Errno 28] No space left on device" in err
    assert "output differs from plain decoding: lookup on edit p1" in err  # still told after the failures
    assert "| edit | lookup |" in (tmp_path / "b.md").read_text()  # the output that could be written is
