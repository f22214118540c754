"""`pyaccel bench` refuses a mistake before any model loads: output paths, the plot's
format and content, suite files, peer options, a draft method without a draft model.

Each command names a model file that does not exist: a check that ran only after loading
would report that file instead of the mistake (and a real model would run first)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pyaccel.bench.cli import check_draft_methods
from pyaccel.bench.runners import parse_methods
from pyaccel.bench.suites import QUESTIONS_FILE, find_questions
from pyaccel.cli import build_parser, main

USAGE_ERROR = 2


def bench(tmp_path: Path, *extra: str, methods: str = "plain,lookup") -> list[str]:
    return ["bench", "-m", str(tmp_path / "none.gguf"), "--methods", methods, *extra]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error of a command that must exit with the usage status before loading its model."""
    assert main(argv) == USAGE_ERROR
    err = capsys.readouterr().err
    assert "does not exist" not in err, "the model was opened before the mistake was found"
    return err


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--plot"])
def test_an_output_path_that_is_a_folder_is_refused(flag: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    err = refused(bench(tmp_path, "--suite", "edit", flag, str(folder)), capsys)
    assert f"{flag} {folder} is a folder: give a file in it" in err
    err = refused(bench(tmp_path, "--suite", "edit", flag, f"{tmp_path / 'new'}/"), capsys)
    assert "is a folder" in err


def test_an_output_path_under_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    err = refused(bench(tmp_path, "--suite", "edit", "--json", str(tmp_path / "afile" / "sub" / "x.json")), capsys)
    assert f"{tmp_path / 'afile'} is a file, not a folder" in err


def test_the_plot_needs_an_image_format_and_something_to_draw(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="the plot is the optional extra pyaccel[plot]")
    err = refused(bench(tmp_path, "--suite", "edit", "--plot", str(tmp_path / "p.xyz")), capsys)
    assert "its extension .xyz is not an image format" in err and ".png" in err
    err = refused(bench(tmp_path, "--suite", "edit", "--plot", str(tmp_path / "speedup")), capsys)
    assert "it has no file extension" in err
    err = refused(bench(tmp_path, "--suite", "edit", "--plot", str(tmp_path / "p.png"), methods="plain"), capsys)
    assert "nothing to plot" in err


def test_suite_files_without_prompts_or_objects_are_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "mine.jsonl"
    suite.write_text("\n", encoding="utf-8")
    assert f"{suite} holds no prompts" in refused(bench(tmp_path, "--suite", str(suite)), capsys)
    for line, kind in (("5", "number"), ('"id and instruction"', "string"), ("[1]", "array")):
        suite.write_text('{"id": "a", "instruction": "hi"}\n\n' + line + "\n", encoding="utf-8")
        err = refused(bench(tmp_path, "--suite", str(suite)), capsys)
        assert f"{suite} line 3 is a JSON {kind}, not an object" in err
    suite.write_bytes(b'{"id": "a", "instruction": "caf\xe9"}\n')  # Latin-1, not UTF-8
    assert f"{suite} is not UTF-8 text" in refused(bench(tmp_path, "--suite", str(suite)), capsys)


def test_a_question_file_without_categories_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "good.jsonl"
    questions.write_text(json.dumps({"question_id": 1, "turns": ["Hello?"]}) + "\n", encoding="utf-8")
    err = refused(bench(tmp_path, "--suite", "specbench:x", "--questions", str(questions)), capsys)
    assert f'{questions} line 1 needs "category" and "turns" fields (it has no "category")' in err


@pytest.mark.parametrize("methods, named", [("lookup:bogus=1", "unknown option bogus"),
                                            ("auto:plan_margin=x", "plan_margin must be a number"),
                                            ("draft:length=-2", "length")])
def test_a_bad_method_option_is_refused_before_the_model_loads(methods: str, named: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert named in refused(bench(tmp_path, "--suite", "edit", methods=methods), capsys)


def test_an_unknown_peer_option_lists_the_valid_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp")
    err = refused(bench(tmp_path, "--suite", "edit", methods="llama-lookup:bogus=1"), capsys)
    assert "unknown option bogus" in err and "max_ngram_size, num_pred_tokens" in err
    assert "takes no options" in refused(bench(tmp_path, "--suite", "edit", methods="llama-plain:x=1"), capsys)
    assert parse_methods("llama-lookup:num_pred_tokens=4")[1].options == {"num_pred_tokens": 4}


def test_a_draft_method_without_a_draft_model_is_refused_before_loading(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # A registry model without a draft pair: known from the registry, not from loading it.
    err = refused(["bench", "-m", "gemma-3-270m", "--suite", "edit", "--methods", "plain,draft"], capsys)
    assert "'gemma-3-270m' has no registry draft model: pass --draft-model" in err
    mine = tmp_path / "mine.gguf"  # a file of one's own: no registry entry, no pair
    mine.write_bytes(bytes(16))
    args = argparse.Namespace(model=str(mine), draft_model=None)
    with pytest.raises(ValueError, match="'mine.gguf' has no registry draft model"):
        check_draft_methods(args, parse_methods("draft"))
    check_draft_methods(argparse.Namespace(model=str(mine), draft_model="small.gguf"), parse_methods("draft"))
    check_draft_methods(args, parse_methods("draft:draft=small.gguf"))
    check_draft_methods(argparse.Namespace(model="qwen2.5-coder-1.5b-instruct", draft_model=None),
                        parse_methods("draft"))  # the registry pairs it


def test_the_bench_without_a_tool_parses_as_it_always_did() -> None:
    """The tools are optional subcommands: every `pyaccel bench --suite ...` form still parses
    to the bench itself, a tool's name only counts where no option takes it as its value."""
    old = ["bench", "-m", "gemma-3-270m", "--suite", "edit", "--suite", "code", "--methods", "plain,lookup,plain:",
           "--max-tokens", "64", "--prompts", "2", "--rounds", "3", "--oracle", "--json", "out.json",
           "--markdown", "out.md", "--n-ctx", "2048", "--threads", "2"]
    args = build_parser().parse_args(old)
    assert args.tool is None and args.suite == ["edit", "code"] and args.methods == "plain,lookup,plain:"
    assert (args.max_tokens, args.prompts, args.rounds, args.oracle) == (64, 2, 3, True)
    assert (args.json, args.markdown, args.model, args.n_ctx, args.threads) == ("out.json", "out.md", "gemma-3-270m",
                                                                                 2048, 2)
    for flags in (["--costs"], ["--placements", "--rounds", "2"], ["--suite", "summary"]):
        args = build_parser().parse_args(["bench", *flags])
        assert args.tool is None
    assert build_parser().parse_args(["bench", "--suite", "summary"]).suite == ["summary"]
    args = build_parser().parse_args(["bench", "summary", "a.json", "b.json", "--compare", "auto,lookup"])
    assert (args.tool, args.results, args.compare) == ("summary", ["a.json", "b.json"], "auto,lookup")
    args = build_parser().parse_args(["bench", "replay", "--option", "max_draft=8", "a.json", "-m", "x"])
    assert (args.tool, args.argv) == ("replay", ["--option", "max_draft=8", "a.json", "-m", "x"])


def test_max_tokens_has_help_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--max-tokens MAX_TOKENS tokens generated per answer at most" in help_text and "(default: 256)" in help_text


def test_the_question_file_is_found_beside_the_repository_from_any_folder(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    beside = Path(__file__).resolve().parents[2] / "shared" / "data" / QUESTIONS_FILE  # tests/ -> the checkout
    if not beside.is_file():
        pytest.skip(f"no {beside} on this machine")
    monkeypatch.chdir(tmp_path)
    assert find_questions() == beside
    mine = tmp_path / "q.jsonl"
    mine.write_text("{}\n")
    assert find_questions(str(mine)) == mine  # --questions still wins
