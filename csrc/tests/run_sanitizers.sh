#!/usr/bin/env bash
# Builds csrc/tests/test_core.cpp with the pure C++ core (no pybind11) under
# AddressSanitizer + UndefinedBehaviorSanitizer and runs it. Any report aborts
# the run (-fno-sanitize-recover=all). -O2 keeps the vectorised row passes in
# the sanitised code. Usage: csrc/tests/run_sanitizers.sh   (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
csrc="$(dirname "$here")"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
sources=(rng.cpp sampling.cpp sampling_filters.cpp tree.cpp verify.cpp)
"${CXX:-g++}" -std=c++17 -O2 -g -fno-omit-frame-pointer -fopenmp-simd -fno-trapping-math -Wall -Wextra \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -I"$csrc" "$here/test_core.cpp" "${sources[@]/#/$csrc/}" -o "$out/test_core"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 "$out/test_core"
