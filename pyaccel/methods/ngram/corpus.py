"""Building a static n-gram cache from a corpus (`pyaccel ngram build`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from ... import _core
from ...progress import Progress
from .drafter import PathLike

if TYPE_CHECKING:
    from ...model import Model

# What `pyaccel ngram build` reads when walking a directory.
CORPUS_SUFFIXES = frozenset({
    ".py", ".pyi", ".md", ".rst", ".txt", ".c", ".h", ".cc", ".cpp", ".hpp", ".js", ".ts",
    ".java", ".go", ".rs", ".sh", ".toml", ".yaml", ".yml", ".json", ".html", ".css",
})


def corpus_files(paths: Sequence[PathLike]) -> list[Path]:
    """Named files as given; directories walked (sorted, hidden ones skipped) for CORPUS_SUFFIXES."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(_walk(path)))
        elif path.is_file():
            out.append(path)
        else:
            raise FileNotFoundError(f"corpus path {path} does not exist: give text files or directories")
    if not out:
        raise ValueError(f"no text files in {', '.join(map(str, paths))}: name files, or directories holding "
                         f"{', '.join(sorted(CORPUS_SUFFIXES))} files")
    return out


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if Path(name).suffix in CORPUS_SUFFIXES and not name.startswith("."):
                yield Path(dirpath) / name


def build_cache(model: "Model", files: list[Path], n_min: int = 1, n_max: int = 4,
                progress: bool = True) -> tuple["_core.NgramCache", int]:
    """Count every file's n-grams (each file its own stream); returns the cache, which
    records the model's tokenizer, and the number of files skipped because they are not
    UTF-8 text."""
    cache = _core.NgramCache(n_min, n_max)
    cache.vocab = model.backend.vocab_fingerprint
    total = sum(f.stat().st_size for f in files)
    bar = Progress(f"tokenizing {len(files)} files", total) if progress else None
    skipped = 0
    for f in files:
        data = f.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            text = ""
        if text:
            # Corpus text is data: "<|im_start|>" in a file must not become a control token.
            tokens = model.backend.tokenize(text, add_special=False, parse_special=False)
            cache.update(np.asarray(tokens, dtype=np.int32), 0)
        if bar:
            bar.update(len(data))
    if bar:
        bar.close()
    return cache, skipped
