"""What keeping chat content as text costs: `Model.chat_prompt` (which tokenizes every
message once more to find quoted control-token text) against one tokenization of the
rendered template, on a long history, interleaved; medians. Not a pytest module.

    python benchmarks/chat_prompt_cost.py --model qwen2.5-coder-0.5b-instruct --messages 60
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import pyaccel

PARAGRAPH = "def add(a, b):\n    return a + b  # adds two numbers and returns the sum of them\n" * 8


def _time_ms(call: Callable[[], object], times: list[float]) -> None:
    start = time.perf_counter()
    call()
    times.append((time.perf_counter() - start) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="a model with a chat template")
    parser.add_argument("--messages", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    model = pyaccel.Model(args.model, n_ctx=64)  # only the tokenizer is used
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {PARAGRAPH}"}
                for i in range(args.messages)]
    formatter = model.backend.chat_formatter()

    def one_call() -> list[int]:
        return model.backend.tokenize(formatter(messages=messages).prompt, add_special=False, parse_special=True)

    def chat_prompt() -> list[int]:
        return model.chat_prompt(messages)

    assert one_call() == chat_prompt(), "a history without markup must tokenize as one call does"
    before: list[float] = []
    now: list[float] = []
    for _ in range(args.repeats):
        _time_ms(one_call, before)
        _time_ms(chat_prompt, now)
    print(f"{args.messages} messages, {len(chat_prompt())} tokens: one tokenization "
          f"{statistics.median(before):.1f} ms, chat_prompt {statistics.median(now):.1f} ms (medians of "
          f"{args.repeats})")


if __name__ == "__main__":
    main()
