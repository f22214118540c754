"""A Ctrl-C (SIGINT) sent to `pyaccel generate` at given times after it starts: its exit
status and whether it printed a traceback or "Exception ignored". 130 and no trace is
right; 0 means the interrupt was lost. Not a pytest module.

    python benchmarks/ctrl_c_timing.py --model gemma-3-270m --after 0.3 0.5 0.7 0.9 1.1 1.4
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--after", type=float, nargs="+", default=[0.3, 0.5, 0.7, 0.9, 1.1, 1.4])
    args = parser.parse_args()
    for after in args.after:
        proc = subprocess.Popen([sys.executable, "-m", "pyaccel", "generate", "-m", args.model, "--method", "plain",
                                 "--max-tokens", "60", "Tell me a story about a cat."],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        traced = b"Traceback" in err or b"Exception ignored" in err
        print(f"SIGINT at {after:.1f} s: exit {proc.returncode}, {len(out)} bytes of answer, "
              f"{'a trace on stderr' if traced else 'no trace'}")


if __name__ == "__main__":
    main()
