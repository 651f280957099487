#!/usr/bin/env bash
# Where the kernel-language GEMM's time goes, on a GPU machine: builds the
# codegen benchmark, profiles its first GEMM launch (4096^3, the headline
# variant) with Nsight Compute (clocks left alone), and summarises the SASS
# of the GEMM's cached cubin (tensor-core, copy, barrier and local-memory
# instructions). Logs go to $OUT (default BUILD_DIR/profile_logs).
#
#   scripts/gpu_profile.sh [BUILD_DIR]     (default build-gpu)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${1:-build-gpu}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
[ -x /usr/bin/g++ ] && export CXX=/usr/bin/g++  # see gpu_check.sh
logs="${OUT:-$build/profile_logs}"
mkdir -p "$build" "$logs"
extra=()
if [ ! -e /usr/include/gtest/gtest.h ]; then
  gsrc="$root/.gpu-carry/googletest-src"; [ -f "$gsrc/CMakeLists.txt" ] || gsrc=/usr/src/googletest
  cmake -S "$gsrc" -B "$build/_gtest_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
    -DCMAKE_INSTALL_PREFIX="$build/_gtest" >"$logs/gtest.log" 2>&1 &&
    cmake --build "$build/_gtest_build" -j"$(nproc)" --target install >>"$logs/gtest.log" 2>&1
  extra+=("-DCMAKE_PREFIX_PATH=$build/_gtest")
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=OFF \
  "${extra[@]}" >"$logs/configure.log" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" --target tessera_gpu_codegen_bench >"$logs/build.log" 2>&1 ||
  { tail -30 "$logs/build.log"; exit 1; }
export TESSERA_CACHE_DIR="$build/profile_cache"
rm -rf "$TESSERA_CACHE_DIR"
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
"$ncu" --clock-control none --kernel-name tessera_kernel --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  "$build/tests/gpu/tessera_gpu_codegen_bench" >"$logs/ncu.txt" 2>&1
echo "== ncu (first GEMM launch)"
grep -vE "^\[gpu-bench\]|^==PROF==" "$logs/ncu.txt" | grep -E "^\s+[A-Z][A-Za-z /().-]+\s+\S+\s+[0-9.,]+$|^\s+(OPT|WRN)" | head -90
echo "== SASS of each cached GEMM cubin"
cuobjdump="$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)"
for c in "$TESSERA_CACHE_DIR"/cuda/*.cubin; do
  "$cuobjdump" -sass "$c" >"$logs/$(basename "$c").sass" 2>&1 || continue
  s="$logs/$(basename "$c").sass"
  grep -qE "HGMMA|QGMMA" "$s" || continue
  printf '%s: HGMMA %s, QGMMA %s, LDGSTS %s, UTMALDG %s, SYNCS %s, BAR.SYNC %s, WARPGROUP.DEPBAR %s, WARPGROUP.ARRIVE %s, LDL %s, STL %s, SASS lines %s\n' \
    "$(basename "$c")" "$(grep -c HGMMA "$s")" "$(grep -c QGMMA "$s")" "$(grep -c LDGSTS "$s")" "$(grep -c UTMALDG "$s")" "$(grep -c SYNCS "$s")" \
    "$(grep -c 'BAR.SYNC' "$s")" "$(grep -c 'WARPGROUP.DEPBAR' "$s")" "$(grep -c 'WARPGROUP.ARRIVE' "$s")" \
    "$(grep -c 'LDL' "$s")" "$(grep -c 'STL' "$s")" "$(wc -l <"$s")"
done
