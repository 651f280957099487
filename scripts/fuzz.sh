#!/usr/bin/env bash
# Builds the kernel-language parser fuzzer with clang (libFuzzer + ASan +
# UBSan) in build-fuzz/ and runs it for SECONDS (default 600) on a copy of the
# seed corpus fuzz/corpus/ (the specification's kernels and more). Any crash,
# hang (> 10 s on one input), sanitizer report or internal error stops the run
# with a non-zero status and leaves the input as build-fuzz/crash-*.
#
#   scripts/fuzz.sh          # 10 minutes
#   scripts/fuzz.sh 60       # one minute
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-600}"
build="${TESSERA_FUZZ_BUILD:-$root/build-fuzz}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target kernel_parser_fuzz
work="$build/fuzz-corpus"
mkdir -p "$work"
cp -n "$root"/fuzz/corpus/* "$work"/ 2>/dev/null || true
cd "$build"
exec ./fuzz/kernel_parser_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -print_final_stats=1 "$work"
