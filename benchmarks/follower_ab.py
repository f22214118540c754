"""A/B of two halves of a change to `CopyFollower`: its `relation` and its `_resync`, each
from the installed code or an older commit, on `edit` prompts with auto, modelled from
the passes alone (each step costs the measured curve's time for its batch).

    python benchmarks/follower_ab.py --old 2bc1887 --prompts hints-bisect,rename-heapq-merge
    python benchmarks/follower_ab.py --old 2bc1887 --carry 7 --variants rel,defer
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from curve_runs import patched_greedy

from pyaccel import Generator, Model
from pyaccel.bench.suites import load_suite
from pyaccel.methods.lookup.rewrites import CopyFollower

ROOT = Path(__file__).resolve().parent.parent
REL = "pyaccel/methods/lookup/rewrites.py"


def old_follower(commit: str) -> type:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "old_rewrites.py"
        path.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{REL}"], check=True,
                                       capture_output=True, text=True).stdout)
        name = "pyaccel.methods.lookup.old_rewrites"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod.CopyFollower


def modelled(model: Model, gen: Generator, prompt: list[int]) -> tuple[int, float]:
    """Steps and the modelled speedup of one greedy generation of 256 tokens."""
    sizes: list[tuple[int, int]] = []
    propose = gen.method.propose

    def logged(tokens, budget):
        d = propose(tokens, budget)
        sizes.append((len(tokens), len(d)))
        return d

    patched_greedy(gen, prompt, 256, propose=logged)
    units = sum(model.costs.curve(depth).times[n] / model.costs.curve(depth).times[0] for depth, n in sizes)
    return len(sizes), 255 / units


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit whose follower is the 'old' half")
    ap.add_argument("--prompts", default="", help="edit prompt ids, each on a fresh Generator")
    ap.add_argument("--carry", type=int, default=0, help="instead: the first N edit prompts on one Generator")
    ap.add_argument("--variants", default="none,rel,defer,both")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    old = old_follower(args.old)
    new_rel, new_resync = CopyFollower.relation, CopyFollower._resync
    variants = {"none": (old.relation, old._resync), "rel": (new_rel, old._resync),
                "defer": (old.relation, new_resync), "both": (new_rel, new_resync)}
    model = Model(args.model, embeddings=False, progress=False)
    edits = load_suite("edit")
    chat = {p.id: model.chat_prompt([{"role": "user", "content": p.text}]) for p in edits}
    for name in args.variants.split(","):
        CopyFollower.relation, CopyFollower._resync = variants[name]
        if args.carry:
            gen = Generator(model, "auto")
            out = [f"{p.id[:14]} {s:.3f} ({n})" for p in edits[:args.carry] for n, s in [modelled(model, gen, chat[p.id])]]
            print(name, " | ".join(out), flush=True)
            continue
        for pid in args.prompts.split(","):
            n, s = modelled(model, Generator(model, "auto"), chat[pid])
            print(pid, name, "steps", n, "modelled", round(s, 3), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
