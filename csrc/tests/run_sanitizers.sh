#!/usr/bin/env bash
# Builds the standalone C++ tests with the pure C++ core (no pybind11) under
# AddressSanitizer + UndefinedBehaviorSanitizer and runs them:
#   test_core        rng, sampling, tree layout, tree merge, calibration, verification
#   test_ngram_cost  n-gram index and caches (incl. the cache file format), cost model
# Any report aborts the run (-fno-sanitize-recover=all). -O2 keeps the vectorised row
# passes in the sanitised code. Usage: csrc/tests/run_sanitizers.sh   (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
csrc="$(dirname "$here")"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

# build NAME SOURCE...: csrc/tests/NAME.cpp with csrc/SOURCE... into $out/NAME.
build() {
    local name="$1"
    shift
    "${CXX:-g++}" -std=c++17 -O2 -g -fno-omit-frame-pointer -fopenmp-simd -fno-trapping-math -Wall -Wextra \
        -fsanitize=address,undefined -fno-sanitize-recover=all \
        -I"$csrc" "$here/$name.cpp" "${@/#/$csrc/}" -o "$out/$name"
}

build test_core rng.cpp sampling.cpp sampling_filters.cpp tree.cpp tree_merge.cpp calibration.cpp verify.cpp
# tree.cpp: tree_plan validates its parents with tree_validate.
build test_ngram_cost ngram.cpp ngram_cache.cpp cost.cpp tree.cpp
"$out/test_core"
"$out/test_ngram_cost" "$out"  # writes its cache files under $out
