"""Decode speed through `pyaccel serve`: a speculative method against plain decoding,
both served by one server process (the method as model id MODEL, plain as MODEL@plain),
requested interleaved over the edit suite with the official `openai` client.

    python benchmarks/server_edit.py --prompts 3 --rounds 2 --max-tokens 256 [--threads N]

Prints a markdown table: median decode tokens/s (the server's `timings`), median tau and
wall-clock tokens/s per request, and the speedup: the median over prompt x round of the
method's decode tokens/s over plain's on the same prompt in the same round.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
import openai

from pyaccel.bench.suites import load_suite

START_TIMEOUT_S = 600


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(proc: subprocess.Popen[bytes], base: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"pyaccel serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"pyaccel serve did not answer /health in {START_TIMEOUT_S}s")


def _one(client: openai.OpenAI, model: str, text: str, max_tokens: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                       max_tokens=max_tokens, temperature=0)
    wall = time.perf_counter() - t0
    timings: dict[str, Any] = (r.model_extra or {})["timings"]
    return {"text": r.choices[0].message.content, "tokens": r.usage.completion_tokens,
            "wall_tps": r.usage.completion_tokens / wall, **timings}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--method", default="lookup")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None, help="the server's CPU threads (default: its own)")
    args = ap.parse_args()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    threads = ["--threads", str(args.threads)] if args.threads else []
    proc = subprocess.Popen([sys.executable, "-m", "pyaccel", "serve", "-m", args.model, "--method", args.method,
                             "--also-method", "plain", "--port", str(port), *threads])
    runs: dict[str, list[dict[str, Any]]] = {args.method: [], "plain": []}
    identical = 0
    try:
        _wait_ready(proc, base)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=1800)
        ids = {args.method: args.model, "plain": f"{args.model}@plain"}
        prompts = load_suite("edit", args.prompts)
        for rnd in range(args.rounds):
            for i, prompt in enumerate(prompts):
                order = ["plain", args.method] if (rnd + i) % 2 == 0 else [args.method, "plain"]
                out = {label: _one(client, ids[label], prompt.text, args.max_tokens) for label in order}
                for label, run in out.items():
                    runs[label].append(run)
                    print(f"round {rnd} {prompt.id} {label}: {run['tokens_per_s']:.2f} tok/s, tau {run['tau']:.2f}",
                          file=sys.stderr)
                identical += out["plain"]["text"] == out[args.method]["text"]
    finally:
        proc.terminate()
        proc.wait(30)
    ratios = [m["tokens_per_s"] / p["tokens_per_s"] for m, p in zip(runs[args.method], runs["plain"])]
    print("| method (model id) | decode tok/s (median) | tau (median) | wall tok/s (median) | speedup |")
    print("|---|---|---|---|---|")
    for label in ("plain", args.method):
        rs = runs[label]
        tps = statistics.median(r["tokens_per_s"] for r in rs)
        print(f"| {label} | {tps:.2f} | {statistics.median(r['tau'] for r in rs):.2f} | "
              f"{statistics.median(r['wall_tps'] for r in rs):.2f} | "
              f"{statistics.median(ratios) if label != 'plain' else 1.0:.2f}x |")
    print(f"\n{len(runs['plain'])} requests per method; {identical} of {len(runs['plain'])} answers identical "
          "to plain decoding's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
