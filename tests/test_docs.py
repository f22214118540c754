"""The docs say only what exists: every relative link and #anchor resolves, every `pyaccel`
command in a code block names a real subcommand and real flags of the CLI parser, every
script under benchmarks/ they name is there, and the README stays short. No model needed."""

from __future__ import annotations

import argparse
import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest

from pyaccel.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINKED = [README, *DOCS]
# The docs whose commands and scripts a reader copies.
COMMAND_DOCS = [README, ROOT / "docs" / "guide.md"]
SCRIPT_DOCS = [README, ROOT / "docs" / "guide.md", ROOT / "docs" / "design.md"]
README_MAX_LINES = 200

# A fence opens with 3+ backticks (an info string without backticks) or tildes, and closes
# with at least as many of the same; "```` ```python ````" starting a line is inline code.
FENCE_OPEN = re.compile(r"^\s*(`{3,}(?=[^`]*$)|~{3,})")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# `pyaccel` as a command word: at a line's start or after a shell separator, not `pyaccel.x`
# nor `pyaccel[server]`.
COMMAND = re.compile(r"(?:^|(?<=[\s;&|(`$]))pyaccel[ \t]+(?=\S)")
FLAG = re.compile(r"(?<![\w./=:-])(--?[A-Za-z][\w-]*)")
SCRIPT = re.compile(r"(?<![\w/.-])benchmarks/[\w./-]+?\.py\b")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _code_and_prose(text: str) -> tuple[list[str], list[str]]:
    """The lines inside fenced code blocks, and the others."""
    code, prose, fence = [], [], ""
    for line in text.splitlines():
        if not fence:
            m = FENCE_OPEN.match(line)
            if m:
                fence = m.group(1)
                continue
        elif re.fullmatch(rf"\s*{re.escape(fence[0])}{{{len(fence)},}}\s*", line):
            fence = ""
            continue
        (code if fence else prose).append(line)
    return code, prose


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@lru_cache(maxsize=None)
def _anchors(path: Path) -> frozenset[str]:
    _, prose = _code_and_prose(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in prose:
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def _links(path: Path) -> list[str]:
    _, prose = _code_and_prose(path.read_text(encoding="utf-8"))
    return [m.group(1) for line in prose for m in LINK.finditer(line)]


@pytest.mark.parametrize("doc", LINKED, ids=_rel)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {_rel(dest)}")
    assert not broken, f"{_rel(doc)} has broken links:\n" + "\n".join(broken)


def _logical_lines(code: list[str]) -> list[str]:
    """Code lines with continuations joined: a trailing backslash, or an indented line that
    goes on with [options] (a synopsis wrapped over several lines)."""
    out: list[str] = []
    joining = False
    for line in code:
        if out and (joining or re.match(r"\s+[\[-]", line)):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
        joining = out[-1].rstrip().endswith("\\")
        if joining:
            out[-1] = out[-1].rstrip()[:-1]
    return out


# `$(for c in A B; do echo --suite x:$c; done)`: the words it echoes stand in for it.
ECHO_LOOP = re.compile(r"\$\(for [^;]*; do echo ([^;]*); done\)")
# Shell tokens that end a command.
COMMAND_END = {"&&", "||", "|", ";", ";;", "&", "(", ")"}


def _commands(doc: Path) -> list[list[str]]:
    """The words of each `pyaccel ...` invocation in the code blocks of `doc`, up to a
    comment or the next command of the line (`&&`, `;`, a pipe, a closing parenthesis)."""
    code, _ = _code_and_prose(doc.read_text(encoding="utf-8"))
    found = []
    for line in _logical_lines(code):
        line = ECHO_LOOP.sub(r"\1", re.sub(r"(^|\s)#.*$", "", line))  # no shell comment
        for m in COMMAND.finditer(line):
            lexer = shlex.shlex(line[m.end():], posix=True, punctuation_chars=True)
            lexer.whitespace_split = True  # --max-tokens stays one word
            words = []
            for word in lexer:
                if word in COMMAND_END:
                    break
                words.append(word)
            found.append(words)
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


def check_command(parser: argparse.ArgumentParser, command: list[str]) -> list[str]:
    """What in `pyaccel <command words>` the parser does not have: an unknown subcommand, or
    flags the (sub)command it names does not take. Placeholders (NAME, [--flag X]) are fine."""
    words = [w.strip("[]|,") for w in command]
    words = [w for w in words if w]
    path = ["pyaccel"]
    problems = []
    for word in words:
        subs = _subparsers(parser)
        if not subs or word.startswith("-"):
            break
        if word not in subs:
            problems.append(f"`{' '.join(path)} {word}`: no such subcommand (choose from {', '.join(subs)})")
            return problems
        parser = subs[word]
        path.append(word)
    known = _options(parser)
    for flag in FLAG.findall(" ".join(words)):
        if flag not in known:
            problems.append(f"`{' '.join(path)}` has no option {flag}")
    return problems


@pytest.mark.parametrize("doc", COMMAND_DOCS, ids=_rel)
def test_commands_name_real_subcommands_and_flags(doc: Path) -> None:
    parser = build_parser()
    commands = _commands(doc)
    assert commands, f"{_rel(doc)} shows no pyaccel command at all: is the pattern still right?"
    problems = [f"pyaccel {' '.join(c)}: {p}" for c in commands for p in check_command(parser, c)]
    assert not problems, f"{_rel(doc)}:\n" + "\n".join(problems)


def test_command_check_catches_mistakes() -> None:
    parser = build_parser()
    def check(line: str) -> list[str]:
        return check_command(parser, shlex.split(line))

    assert check("generate --chat --max-tokens 5 PROMPT") == []
    assert check("models costs NAME [--remeasure] [--threads N]") == []
    assert check("--version") == []
    assert check("generate --no-such-flag x")
    assert check("models fetch NAME")
    assert check("serve --remeasure")


def test_command_extraction(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text('text pyaccel nothing\n```bash\npip install "pyaccel[server]" && pyaccel serve --port 1  # x --y\n'
                   'pyaccel bench $(for c in a b; do echo --suite s:$c; done) --rounds 2 | tee log\n'
                   'pyaccel generate [-m MODEL]\n         [--stats] PROMPT\n```\n', encoding="utf-8")
    assert _commands(doc) == [["serve", "--port", "1"], ["bench", "--suite", "s:$c", "--rounds", "2"],
                              ["generate", "[-m", "MODEL]", "[--stats]", "PROMPT"]]


@pytest.mark.parametrize("doc", SCRIPT_DOCS, ids=_rel)
def test_named_benchmark_scripts_exist(doc: Path) -> None:
    named = set(SCRIPT.findall(doc.read_text(encoding="utf-8")))
    missing = sorted(s for s in named if not (ROOT / s).is_file())
    assert not missing, f"{_rel(doc)} names scripts that do not exist: {', '.join(missing)}"


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it to {README_MAX_LINES} (details: docs/guide.md)"
