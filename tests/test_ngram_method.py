"""N-gram cache drafting (method "ngram"): lossless greedy output, the persistent dynamic
cache, `pyaccel ngram build / info`, damaged files, and the shared shadow scorer."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import pyaccel
from pyaccel import _core
from pyaccel.methods import ngram
from pyaccel.methods.shadow import ShadowScorer

from lossless import assert_greedy_equivalent

# Prompts whose continuations repeat structure the caches can copy.
PROMPTS = [
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
    "1. apple\n2. banana\n3. cherry\n1. apple\n2. banana\n3.",
    "The cat sat on the mat. The dog sat on the log. The cat sat on the",
]
MAX_TOKENS = 40
# A GPU-like curve (verification nearly free) so the cost model lets drafts through.
FLAT = [1.0 + 0.01 * b for b in range(64)]


@pytest.fixture(scope="module")
def plain_outputs(gemma: pyaccel.Model) -> list[tuple[list[int], list[int]]]:
    """(prompt, plain greedy output) per prompt, shared by the parametrized runs."""
    gen = pyaccel.Generator(gemma, "plain")
    prompts = [gemma.tokenize(text) for text in PROMPTS]
    return [(p, gen.generate(p, max_tokens=MAX_TOKENS).tokens) for p in prompts]


def _drafter(**options: object) -> pyaccel.NgramCacheDrafter:
    costs = pyaccel.CostModel.fixed(FLAT) if options.get("length") is None else None
    return pyaccel.NgramCacheDrafter(costs=costs, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [{"length": 4}, {}], ids=["length4", "cost-model"])
def test_greedy_output_is_the_targets_own(gemma: pyaccel.Model, plain_outputs: list[tuple[list[int], list[int]]],
                                          options: dict[str, object]) -> None:
    gen = pyaccel.Generator(gemma, _drafter(**options))
    identical, drafted = 0, 0
    for prompt, plain in plain_outputs:
        fast = gen.generate(prompt, max_tokens=MAX_TOKENS)
        identical += assert_greedy_equivalent(gemma, prompt, plain, fast.tokens)
        drafted += fast.stats.drafted
        assert fast.stats.tau >= 1.0
    assert identical >= len(PROMPTS) - 1
    assert drafted > 0, "the prompts repeat structure: the caches should have drafted"


def test_dynamic_cache_persists_across_drafters(gemma: pyaccel.Model, tmp_path: Path) -> None:
    path = tmp_path / "dyn" / "dynamic.ngc"
    prompt = gemma.tokenize("Q: Who wrote Hamlet?\nA:")  # an answer with little to copy from itself
    first = pyaccel.Generator(gemma, _drafter(length=4, dynamic_path=path))
    for _ in range(2):  # the dynamic cache's bar is >= 2 sightings of an n-gram
        first.generate(prompt, max_tokens=MAX_TOKENS)
    saved = _core.NgramCache.load(str(path))
    assert len(saved) == len(first.method.dynamic_cache) > 0  # type: ignore[attr-defined]
    assert saved.vocab == gemma.backend.vocab_fingerprint  # the same model's file is accepted below
    assert not list(path.parent.glob("*.tmp")), "the atomic save left a temporary file"

    fresh = pyaccel.Generator(gemma, _drafter(length=4)).generate(prompt, max_tokens=MAX_TOKENS)
    warm = pyaccel.Generator(gemma, _drafter(length=4, dynamic_path=path)).generate(prompt, max_tokens=MAX_TOKENS)
    assert warm.stats.accepted > fresh.stats.accepted, "the reloaded cache should predict the repeat"


def test_two_drafters_saving_one_dynamic_cache_keep_both_generations() -> None:
    """Two drafters (two processes, say) that loaded the same file: each save merges its
    generation into what the file holds then, so neither overwrites the other's."""
    import tempfile

    from pyaccel.types import SamplingConfig

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dynamic.ngc"
        a, b = (ngram.NgramCacheDrafter(dynamic_path=path, length=2) for _ in range(2))
        for drafter in (a, b):
            assert len(drafter.dynamic_cache) == 0  # loaded, as bind() does, before either saved
        runs = {a: list(range(100, 140)), b: list(range(500, 540))}
        for drafter, tokens in runs.items():
            drafter.begin(tokens, SamplingConfig())
            drafter.end()
        saved = _core.NgramCache.load(str(path))
        for tokens in runs.values():
            assert saved.counts(tokens[:2]), "a generation's n-grams were lost"


def _foreign_caches(gemma: pyaccel.Model, tmp_path: Path) -> tuple[Path, Path]:
    """A static cache built and a dynamic cache saved for Gemma: (static, dynamic)."""
    text = tmp_path / "corpus.py"
    text.write_text("for i in range(10):\n    print(i)\n" * 3)
    static, _ = ngram.build_cache(gemma, [text], progress=False)
    assert static.vocab == gemma.backend.vocab_fingerprint != 0
    ngram.save_cache(static, tmp_path / "gemma-static.ngc")
    dynamic = _core.NgramCache()
    dynamic.update(gemma.tokenize("one two three one two three"), 0)
    dynamic.vocab = gemma.backend.vocab_fingerprint
    ngram.save_cache(dynamic, tmp_path / "gemma-dynamic.ngc")
    return tmp_path / "gemma-static.ngc", tmp_path / "gemma-dynamic.ngc"


def test_cache_of_another_tokenizer_is_refused_at_bind(gemma: pyaccel.Model, qwen_draft: pyaccel.Model,
                                                       tmp_path: Path) -> None:
    static, dynamic = _foreign_caches(gemma, tmp_path)
    for kind, path, message in (("static", static, r"gemma-static\.ngc.*pyaccel ngram build"),
                                ("dynamic", dynamic, r"gemma-dynamic\.ngc.*delete")):
        with pytest.raises(pyaccel.IncompatibleModelsError, match=message):
            pyaccel.Generator(qwen_draft, _drafter(length=4, **{f"{kind}_path": path}))
        auto = pyaccel.Auto(**{f"ngram_{kind}": path}, costs=pyaccel.CostModel.fixed(FLAT), use_draft=False,
                            medusa=False)
        with pytest.raises(pyaccel.IncompatibleModelsError, match=message):
            pyaccel.Generator(qwen_draft, auto)
    assert _core.NgramCache.load(dynamic).vocab == gemma.backend.vocab_fingerprint, "the refused file was changed"


def test_dynamic_file_of_another_tokenizer_is_not_merged_into(gemma: pyaccel.Model, qwen_draft: pyaccel.Model,
                                                              tmp_path: Path) -> None:
    from pyaccel.types import SamplingConfig

    _, foreign = _foreign_caches(gemma, tmp_path)
    path = tmp_path / "shared.ngc"
    drafter = ngram.NgramCacheDrafter(dynamic_path=path, length=2)
    drafter.bind(qwen_draft)  # no file yet: accepted
    foreign.replace(path)  # another process, another model, the same path
    drafter.begin(qwen_draft.tokenize("a b a b a b"), SamplingConfig())
    with pytest.raises(pyaccel.IncompatibleModelsError, match=r"shared\.ngc"):
        drafter.end()
    assert _core.NgramCache.load(path).vocab == gemma.backend.vocab_fingerprint
    # Through a Generator the output stands and the warning says what is wrong, not "a bug".
    path.unlink()
    gen = pyaccel.Generator(qwen_draft, ngram.NgramCacheDrafter(dynamic_path=path, length=2))
    path.write_bytes((tmp_path / "gemma-static.ngc").read_bytes())  # another model's file again
    with pytest.warns(pyaccel.ProposerFailedWarning) as caught:
        result = gen.generate("a b a b a b", max_tokens=3)
    assert result.tokens == pyaccel.Generator(qwen_draft, "plain").generate("a b a b a b", max_tokens=3).tokens
    message = str(caught[0].message)
    assert "shared.ngc" in message and "bug in pyaccel" not in message
    assert _core.NgramCache.load(path).vocab == gemma.backend.vocab_fingerprint


def test_cache_files_without_a_tokenizer_are_used_and_the_dynamic_one_restamped(qwen_draft: pyaccel.Model,
                                                                                tmp_path: Path) -> None:
    old = _core.NgramCache()  # vocab 0: what an older pyaccel saved
    old.update(qwen_draft.tokenize("x = 1\ny = 2\nx = 1\ny = 2\n"), 0)
    for name in ("static.ngc", "dynamic.ngc"):
        ngram.save_cache(old, tmp_path / name)
    drafter = _drafter(length=4, static_path=tmp_path / "static.ngc", dynamic_path=tmp_path / "dynamic.ngc")
    pyaccel.Generator(qwen_draft, drafter).generate("x = 1\ny =", max_tokens=2)
    assert drafter.static_cache is not None and len(drafter.static_cache) == len(old)
    saved = _core.NgramCache.load(tmp_path / "dynamic.ngc")
    assert saved.vocab == qwen_draft.backend.vocab_fingerprint and len(saved) >= len(old)
    assert _core.NgramCache.load(tmp_path / "static.ngc").vocab == 0, "a static cache is only read"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyaccel", *args], capture_output=True, text=True, timeout=120)


def test_build_and_info_cli(gemma: pyaccel.Model, gemma_path: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "pkg").mkdir(parents=True)
    (corpus / "a.py").write_text("for i in range(10):\n    print(i)\n" * 3)
    (corpus / "pkg" / "b.md").write_text("# Title\n\nSome text about the sea.\n")
    (corpus / "skip.bin").write_bytes(b"\x00\x01")
    out = tmp_path / "static.ngc"
    run = _cli("ngram", "build", str(corpus), "-m", str(gemma_path), "-o", str(out), "--n-max", "3")
    assert run.returncode == 0, run.stderr

    want = _core.NgramCache(1, 3)
    for f in (corpus / "a.py", corpus / "pkg" / "b.md"):
        want.update(gemma.backend.tokenize(f.read_text(), add_special=False, parse_special=False), 0)
    got = _core.NgramCache.load(str(out))
    assert (got.n_min, got.n_max, len(got)) == (1, 3, len(want))
    assert got.vocab == gemma.backend.vocab_fingerprint
    print_tok = gemma.tokenize("print", add_special=False)
    assert got.counts(print_tok) == want.counts(print_tok)

    info = _cli("ngram", "info", str(out))
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert lines[:4] == ["n_min: 1", "n_max: 3", f"size: {len(want)}",
                         f"tokenizer fingerprint: {gemma.backend.vocab_fingerprint:#010x}"]
    assert lines[4] == "cached models with this tokenizer: gemma-3-270m"  # not the Qwen pair, also cached
    # The static cache plugs into the drafter (static_n = 2 lies in 1..3).
    drafter = _drafter(length=4, static_path=out)
    pyaccel.Generator(gemma, drafter).generate("for i in range(", max_tokens=8)
    assert drafter.static_cache is not None and len(drafter.static_cache) == len(want)


def test_a_damaged_static_cache_is_a_clear_error_a_damaged_dynamic_one_is_dropped(tmp_path: Path) -> None:
    good = _core.NgramCache()
    good.update([1, 2, 3, 1, 2, 3], 0)
    bad = tmp_path / "bad.ngc"
    ngram.save_cache(good, bad)
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="bad.ngc"):
        _ = pyaccel.NgramCacheDrafter(length=2, static_path=bad).static_cache
    # The dynamic cache is only what earlier generations learnt: dropped with a word, not fatal.
    with pytest.warns(UserWarning, match="dynamic n-gram cache .*bad.ngc.* is damaged .*truncated"):
        assert len(pyaccel.NgramCacheDrafter(length=2, dynamic_path=bad).dynamic_cache) == 0
    run = _cli("ngram", "info", str(bad))
    assert run.returncode == 2
    assert run.stderr.startswith("pyaccel: error:") and "bad.ngc" in run.stderr
    missing = _cli("ngram", "build", str(tmp_path / "nothing-here"), "-o", str(tmp_path / "x.ngc"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[int, bool]] = []

    def observe_position(self, position: int, accepted: bool) -> None:
        self.seen.append((position, accepted))


def _reference_outcomes(start: int, draft: list[int], history: list[int]) -> list[tuple[int, bool]]:
    """What greedy verification of `draft` at `start` would have accepted, position by position."""
    out = []
    for i, tok in enumerate(draft):
        if start + i >= len(history):
            break
        out.append((i, history[start + i] == tok))
        if history[start + i] != tok:
            break
    return out


def test_shadow_scorer_matches_a_plain_reference() -> None:
    rng = random.Random(0)
    history = [rng.randrange(3) for _ in range(300)]
    scorer, shadows = ShadowScorer(), []
    for step in range(1, len(history) + 1):
        scorer.settle(history[:step])  # the real tokens arrive one at a time
        if rng.random() < 0.5:
            draft = [rng.randrange(3) for _ in range(rng.randrange(1, 8))]
            rec = _Recorder()
            scorer.add(step, draft, rec)
            shadows.append((step, draft, rec))
    scorer.settle(history)
    for start, draft, rec in shadows:
        assert rec.seen == _reference_outcomes(start, draft, history)
    # Still waiting: right so far, but drafted past the end of the history.
    assert len(scorer) == sum(all(ok for _, ok in r.seen) and len(r.seen) < len(d) for _, d, r in shadows)
    assert Counter(ok for _, _, r in shadows for _, ok in r.seen)[True] > 0


def test_shadow_acceptance_feeds_alpha() -> None:
    stats = _core.AcceptanceStats(4, decay=1.0, prior_weight=0.0)
    scorer = ShadowScorer()
    scorer.add(0, [5, 6, 7], stats)
    scorer.settle([5, 6, 9])
    np.testing.assert_allclose(stats.alpha()[:3], [1.0, 1.0, 0.0])


def test_option_mistakes_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="static_n"):
        pyaccel.NgramCacheDrafter(thresholds=_core.NgramDraftThresholds(static_n=7))
    with pytest.raises(ValueError, match="length"):
        pyaccel.NgramCacheDrafter(length=99, max_draft=16)
    narrow = tmp_path / "n3to4.ngc"
    ngram.save_cache(_core.NgramCache(3, 4), narrow)
    with pytest.raises(ValueError, match="rebuild it with --n-min <= 2"):
        _ = pyaccel.NgramCacheDrafter(static_path=narrow).static_cache


def test_cache_paths_that_cannot_be_written_fail_before_any_work(tmp_path: Path) -> None:
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for path, message in ((tmp_path, "is a folder"), (a_file / "x.ngc", "is a file, not a folder")):
        with pytest.raises(ValueError, match=message):
            pyaccel.NgramCacheDrafter(dynamic_path=path)
        with pytest.raises(ValueError, match=message):
            ngram.save_cache(_core.NgramCache(), path)
    with pytest.raises(ValueError, match="is a folder, not an n-gram cache file"):
        ngram.load_cache(tmp_path)
    out = subprocess.run([sys.executable, "-m", "pyaccel", "ngram", "build", "-m", "no-such-model", str(a_file),
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "is a folder" in out.stderr and "unknown model" not in out.stderr
