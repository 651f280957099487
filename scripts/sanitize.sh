#!/usr/bin/env bash
# Builds the library and the C++ test suite with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report fails the run) and runs ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON \
      -DTESSERA_WERROR=ON -DTESSERA_BUILD_TESTS=ON -DTESSERA_LIT="$root/.venv/bin/lit" $launcher >/dev/null
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2
