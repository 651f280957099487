#!/usr/bin/env bash
# Builds a fuzzer with clang (libFuzzer + ASan + UBSan) in build-fuzz/ and runs
# it for SECONDS (default 600):
#   kernel  the kernel-language parser and checker, seeded with fuzz/corpus/
#           (the specification's kernels and more);
#   ir      the IR text parser and verifier of every level, with the
#           round-trip check, seeded with the lit tests' IR files.
# Any crash, hang (> 10 s on one input), sanitizer report, internal error or
# broken round trip stops the run with a non-zero status and leaves the input
# as build-fuzz/crash-*.
#
#   scripts/fuzz.sh            # the kernel fuzzer, 10 minutes
#   scripts/fuzz.sh 60 ir      # the IR fuzzer, one minute
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-600}"
which="${2:-kernel}"
case "$which" in
  kernel) target=kernel_parser_fuzz ;;
  ir) target=ir_parser_fuzz ;;
  *) echo "fuzz.sh: the fuzzer is kernel or ir, got '$which'" >&2; exit 2 ;;
esac
build="${TESSERA_FUZZ_BUILD:-$root/build-fuzz}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target "$target"
work="$build/fuzz-corpus-$which"
mkdir -p "$work"
if [ "$which" = kernel ]; then
  cp -n "$root"/fuzz/corpus/* "$work"/ 2>/dev/null || true
else
  for f in $(find "$root/tests/lit" -name "*.tir"); do cp -n "$f" "$work/$(echo "${f#$root/tests/lit/}" | tr / _)"; done
fi
cd "$build"
exec ./fuzz/"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -print_final_stats=1 "$work"
