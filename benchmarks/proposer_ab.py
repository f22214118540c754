"""Interleaved A/B of auto's proposer code: plain, auto as installed, and auto with prompt
lookup's candidates, lookahead's merge and auto's calibration of an older commit swapped
back in. Per method: target time per pass against plain's, own time per step, speedup.

    python benchmarks/proposer_ab.py --old 8308d9f
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics as st
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pyaccel.methods.auto.calibration as calibration
import pyaccel.methods.auto.proposer as auto_proposer
import pyaccel.methods.lookahead.proposer as lookahead_proposer
import pyaccel.methods.lookup.proposer as lookup_proposer
from pyaccel import Generator, Model

ROOT = Path(__file__).resolve().parent.parent
OLD_FILES = {"pyaccel.methods.lookup.old_proposer": "pyaccel/methods/lookup/proposer.py",
             "pyaccel.methods.auto.old_calibration": "pyaccel/methods/auto/calibration.py",
             "pyaccel.methods.lookahead.old_candidates": "pyaccel/methods/lookahead/candidates.py"}
CATEGORIES = ("writing", "humanities", "math_reasoning", "rag", "stem")


def load_old(commit: str, tmp: Path) -> dict[str, ModuleType]:
    """The older commit's files as modules beside the installed ones (same package)."""
    mods = {}
    for name, rel in OLD_FILES.items():
        path = tmp / Path(rel).name
        path.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{rel}"], check=True,
                                       capture_output=True, text=True).stdout)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit whose proposer code is swapped in")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--questions", default=str(ROOT.parent / "shared/data/spec_bench_questions.jsonl"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = load_old(args.old, Path(tmp))
    old_lp, old_cal, old_cand = old.values()
    lp, lap = lookup_proposer.PromptLookup, lookahead_proposer
    new_code = (lp._candidates, lp._path_probs, lap.merge_candidates, lap.path_probs)
    old_code = (old_lp.PromptLookup._candidates, old_lp.PromptLookup._path_probs, old_cand.merge_candidates,
                old_cand.path_probs)

    def use(code: tuple) -> None:
        lp._candidates, lp._path_probs, lap.merge_candidates, lap.path_probs = code

    model = Model(args.model, embeddings=False, progress=False)
    questions = [json.loads(line) for line in open(args.questions, encoding="utf-8")]
    picks = [q for q in questions if q.get("category") in CATEGORIES][::7][:4]
    auto_proposer.Calibration = old_cal.Calibration  # the Calibration a new Auto builds
    use(old_code)
    gens = {"old": Generator(model, "auto")}
    auto_proposer.Calibration = calibration.Calibration
    use(new_code)
    gens.update(new=Generator(model, "auto"), plain=Generator(model, "plain"))
    res: dict[str, list[tuple[float, float, float]]] = {"plain": [], "new": [], "old": []}
    order = ["plain", "new", "old"]
    for q in picks:
        prompt = model.chat_prompt([{"role": "user", "content": q["turns"][0]}])
        for r in range(args.rounds):
            for name in order[r % 3:] + order[:r % 3]:
                use(old_code if name == "old" else new_code)
                s = gens[name].generate(prompt, max_tokens=args.max_tokens, temperature=0.0).stats
                res[name].append((s.target_s / s.target_forwards, (s.draft_s + s.overhead_s) / s.target_forwards,
                                  s.decode_s))
        print(q.get("category"), {k: round(1000 * st.median(x[0] for x in v[-args.rounds:]), 2)
                                  for k, v in res.items()}, flush=True)
    for k in ("new", "old"):
        ratios = [a[0] / p[0] for a, p in zip(res[k], res["plain"])]
        speed = [p[2] / a[2] for a, p in zip(res[k], res["plain"])]
        print(k, "target/step vs plain: median", round(st.median(ratios), 4), "mean", round(st.mean(ratios), 4),
              "| own ms/step", round(1000 * st.median(x[1] for x in res[k]), 3),
              "| speedup median", round(st.median(speed), 4))
    print("plain own ms/step", round(1000 * st.median(x[1] for x in res["plain"]), 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
