#!/usr/bin/env bash
# The one script the project runs on a GPU machine: configures and builds
# Tessera with its tests (and the Python module when nanobind is importable),
# runs ctest, the GPU-only tests (tests/gpu) and the Python CUDA tests, then
# prints a summary table. Works offline: nothing is installed or fetched.
#
#   scripts/gpu_check.sh [BUILD_DIR]        (default build-gpu)
#
# Environment: JOBS (default: all cores), PYTHON (default python3), GPU_CHECK_SKIP_BENCH=1
# (no collective benchmark), TESSERA_GPU_CXX
# (the C++ compiler; default the system's /usr/bin/g++ when present, see below),
# TESSERA_GTEST_SOURCE (a GoogleTest source tree, built first when the system
# has no GoogleTest package; /usr/src/googletest is tried too), OUT (a folder
# that receives the logs; default BUILD_DIR/gpu_check_logs).
# GPU_CHECK_ONLY=dist builds libtessera and the Python module and runs only the
# collectives on the GPUs (tests/python/test_dist_nccl.py, bench/nccl_bench.py).
# GPU_CHECK_ONLY=schedule builds and runs only the Schedule IR part (templates and
# executables on the GPU, @jit on cuda tensors, its benchmark), for quick rounds.
# GPU_CHECK_ONLY=python builds libtessera and the Python module, then runs the
# pytest arguments in GPU_CHECK_TESTS and each command of GPU_CHECK_RUN (';'
# separated, run by bash from the source root with the module importable, and
# BUILD naming the build folder); GPU_CHECK_TARGETS adds build targets (such
# as tessera_tests, whose GPU cases a GPU_CHECK_RUN command can then filter).
# GPU_CHECK_ONLY=cuda_tile unpacks the tileiras bundle (TILE_BUNDLE, default
# .tilebundle/cu13.tar.xz: nvidia/cu13/{bin/tileiras,bin/ptxas,lib/libnvvm.so.4,
# nvvm/libdevice}) into the build folder, points TESSERA_TILEIRAS at it, and
# runs as GPU_CHECK_ONLY=python with tests/python/test_cuda_tile.py and
# bench/cuda_tile_bench.py unless GPU_CHECK_TESTS / GPU_CHECK_RUN say otherwise.
# Wheels in .tilebundle/wheels (cuda-tile, for the benchmark's cuTile Python
# row) are installed, without network, into the build folder's pywheels,
# which goes on PYTHONPATH. The other modes unpack the bundle too wherever it
# was carried and the machine has no tileiras.
# Exit status: 0 when every step passed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${1:-build-gpu}"
# Absolute from here on: paths below are handed to cmake and Python from other folders.
case "$build" in /*) ;; *) build="$root/$build" ;; esac
# The tileiras bundle (scripts/make_tile_bundle.sh) serves every mode where it
# was carried and the machine has no tileiras of its own: without it the full
# run would measure attention on the lane kernels.
bundle="${TILE_BUNDLE:-$root/.tilebundle/cu13.tar.xz}"
if [ "${GPU_CHECK_ONLY:-}" = cuda_tile ] ||
  { [ -f "$bundle" ] && [ -z "${TESSERA_TILEIRAS:-}" ] && ! command -v tileiras >/dev/null; }; then
  mkdir -p "$build/tilebundle" && tar -xJf "$bundle" -C "$build/tilebundle" || { echo "cannot unpack $bundle"; exit 1; }
  export TESSERA_TILEIRAS="$build/tilebundle/nvidia/cu13/bin/tileiras"
  if compgen -G "$root/.tilebundle/wheels/*.whl" >/dev/null; then
    "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --target "$build/pywheels" "$root"/.tilebundle/wheels/*.whl ||
      echo "cannot install the wheels of .tilebundle/wheels"
    # cuTile Python finds tileiras on PATH.
    export PATH="$build/tilebundle/nvidia/cu13/bin:$PATH" CUDA_HOME="$build/tilebundle/nvidia/cu13"
  fi
fi
if [ "${GPU_CHECK_ONLY:-}" = cuda_tile ]; then
  GPU_CHECK_ONLY=python
  GPU_CHECK_TESTS="${GPU_CHECK_TESTS:-tests/python/test_cuda_tile.py}"
  GPU_CHECK_RUN="${GPU_CHECK_RUN:-\$PYTHON bench/cuda_tile_bench.py}"
fi
# The lent GPU machines set CXX to a toolchain whose g++ links libstdc++
# statically: libtessera then exports a private copy of the C++ runtime, and a
# Python process that also loads the system libstdc++ crashed in locale code
# (first seen in tests/python/test_kernel_cuda.py). The system compiler links
# libstdc++ dynamically, as every other library in the process does.
if [ -n "${TESSERA_GPU_CXX:-}" ]; then
  export CXX="$TESSERA_GPU_CXX"
elif [ -x /usr/bin/g++ ]; then
  export CXX=/usr/bin/g++
fi
jobs="${JOBS:-$(nproc)}"
python="${PYTHON:-python3}"
logs="${OUT:-$build/gpu_check_logs}"
mkdir -p "$build" "$logs"
declare -a rows=()
status=0
row() { rows+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); [ "$2" = FAIL ] && status=1; return 0; }
stamp() { date +%s; }

echo "== machine (C++ compiler: ${CXX:-default})"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
command -v nvcc >/dev/null && nvcc --version | tail -1

# GoogleTest: the system's, else built from source into the build folder.
cmake_extra=()
if [ ! -e /usr/include/gtest/gtest.h ] && [ ! -e /usr/local/include/gtest/gtest.h ]; then
  gsrc="${TESSERA_GTEST_SOURCE:-$root/.gpu-carry/googletest-src}"
  [ -f "$gsrc/CMakeLists.txt" ] || gsrc=/usr/src/googletest
  if [ -f "$gsrc/CMakeLists.txt" ]; then
    echo "== building GoogleTest from $gsrc"
    cmake -S "$gsrc" -B "$build/_gtest_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
      -DCMAKE_INSTALL_PREFIX="$build/_gtest" >"$logs/gtest.log" 2>&1 &&
      cmake --build "$build/_gtest_build" -j"$jobs" --target install >>"$logs/gtest.log" 2>&1 ||
      { echo "GoogleTest build failed (see $logs/gtest.log)"; }
    cmake_extra+=("-DCMAKE_PREFIX_PATH=$build/_gtest")
  else
    echo "no GoogleTest found; set TESSERA_GTEST_SOURCE to a googletest source tree"
  fi
fi

have_python=0
if "$python" -c "import nanobind, numpy" 2>/dev/null; then
  have_python=1
  cmake_extra+=("-DTESSERA_BUILD_PYTHON=ON" "-DPython_EXECUTABLE=$(command -v "$python")")
fi

echo "== configure + build ($jobs jobs)"
t0=$(stamp)
if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_TESTS=ON \
  -DTESSERA_BUILD_BENCH=OFF "${cmake_extra[@]}" >"$logs/configure.log" 2>&1 &&
  if [ "${GPU_CHECK_ONLY:-}" = schedule ]; then
    targets=(tessera tessera_cli tessera_schedule_tests tessera_cuda_codegen_tests)
  elif [ "${GPU_CHECK_ONLY:-}" = dist ] || [ "${GPU_CHECK_ONLY:-}" = python ]; then
    # shellcheck disable=SC2206  # a list of targets
    targets=(tessera tessera_cli ${GPU_CHECK_TARGETS:-})
  else
    targets=(tessera tessera_cli tessera_opt tessera_tests tessera_gpu_tests tessera_gpu_figures
      tessera_cuda_codegen_tests tessera_schedule_tests tessera_gpu_codegen_bench)
  fi &&
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$logs/build.log" 2>&1; then
  row "build (C++)" PASS "$(($(stamp) - t0)) s"
  # The rest (the Python module) apart, so a failure there still lets the C++ tests run.
  rest=()
  [ -n "${GPU_CHECK_ONLY:-}" ] && rest=(--target _C)
  if [ $have_python -eq 1 ] && ! cmake --build "$build" -j"$jobs" "${rest[@]}" >>"$logs/build.log" 2>&1; then
    tail -30 "$logs/build.log"
    row "build (Python module)" FAIL "see $logs/build.log"
    have_python=0
  fi
else
  tail -40 "$logs/configure.log" "$logs/build.log"
  row "build (C++)" FAIL "see $logs/build.log"
  printf '\n== summary\n'; printf '%s\n' "${rows[@]}"
  exit 1
fi

echo "== tessera info"
"$build/tools/tessera" info | tee "$logs/info.txt"

if [ -z "${GPU_CHECK_ONLY:-}" ]; then
echo "== ctest"
t0=$(stamp)
ctest --test-dir "$build" -j"$jobs" --output-on-failure -LE gpu >"$logs/ctest.log" 2>&1
rc=$?
summary=$(grep -E "tests passed|tests failed" "$logs/ctest.log" | tail -1)
skipped=$(grep -c "Skipped" "$logs/ctest.log")
[ $rc -eq 0 ] && row "ctest (all but gpu label)" PASS "$summary, $skipped skipped, $(($(stamp) - t0)) s" ||
  { grep -E "Failed|\*\*\*" "$logs/ctest.log" | head -30; row "ctest (all but gpu label)" FAIL "$summary"; }
grep -E "CudaGpu|CudaNvrtc|CudaNoGpu" "$logs/ctest.log" | sed 's/^ *//' | head -30

echo "== CUDA runtime tests"
"$build/tests/cpp/tessera_tests" --gtest_filter='Cuda*' 2>&1 | tee "$logs/cuda_runtime.log" | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|error" | head -40
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && row "cuda runtime tests" PASS "$(grep -E '^\[  PASSED  \]' "$logs/cuda_runtime.log" | sed 's/\[  PASSED  \] //')" ||
  row "cuda runtime tests" FAIL "see $logs/cuda_runtime.log"

echo "== GPU numerics (device vs host, bit for bit)"
t0=$(stamp)
"$build/tests/gpu/tessera_gpu_tests" 2>&1 | tee "$logs/gpu_tests.log" | grep -E "gpu-numerics|Failure|FAILED|SKIPPED|PASSED|device |hardware " | head -80
rc=${PIPESTATUS[0]}
checked=$(grep -oE '[0-9]+ checked' "$logs/gpu_tests.log" | awk '{s += $1} END {print s}')
mism=$(grep -oE '[0-9]+ mismatches' "$logs/gpu_tests.log" | awk '{s += $1} END {print s+0}')
[ "$rc" -eq 0 ] && row "gpu numerics" PASS "$checked conversions, $mism mismatches, $(($(stamp) - t0)) s" ||
  row "gpu numerics" FAIL "$checked conversions, $mism mismatches"

echo "== CUDA code generation (emission + NVRTC, GPU execution)"
t0=$(stamp)
"$build/tests/cpp/tessera_cuda_codegen_tests" 2>&1 | tee "$logs/cuda_codegen.log" | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure" | head -30
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && row "cuda codegen tests" PASS "$(grep -E '^\[  PASSED  \]' "$logs/cuda_codegen.log" | sed 's/\[  PASSED  \] //'), $(($(stamp) - t0)) s" ||
  row "cuda codegen tests" FAIL "see $logs/cuda_codegen.log"
grep -E "gpu-codegen\]" "$logs/gpu_tests.log" | head -30
conf=$(grep -cE "^\[       OK \] GpuCodegen" "$logs/gpu_tests.log")
bad=$(grep -cE "^\[  FAILED  \] GpuCodegen" "$logs/gpu_tests.log")
[ "$bad" -eq 0 ] && row "gpu conformance (vs CPU backend)" PASS "$conf kernels passed" ||
  row "gpu conformance (vs CPU backend)" FAIL "$bad failed, $conf passed"

fi  # GPU_CHECK_ONLY

if [ "${GPU_CHECK_ONLY:-}" != dist ] && [ "${GPU_CHECK_ONLY:-}" != python ]; then
echo "== Schedule IR templates through the CUDA backend (vs the CPU executable)"
"$build/tests/cpp/tessera_schedule_tests" --gtest_filter='ScheduleCuda*' 2>&1 | tee "$logs/schedule_cuda.log" |
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|bit-identical" | head -20
rc=${PIPESTATUS[0]}
exact=$(grep -oE "[0-9]+ of [0-9]+ results bit-identical" "$logs/schedule_cuda.log" | sed 's/ results bit-identical//' | paste -sd, -)
if [ "$rc" -eq 0 ] && ! grep -q "SKIPPED \] ScheduleCudaGpu" "$logs/schedule_cuda.log"; then
  row "schedule templates + executable on GPU" PASS "vs the CPU executable; gelu bit-identical: $exact"
else
  row "schedule templates + executable on GPU" FAIL "see $logs/schedule_cuda.log"
fi

echo "== deferred fault records (launches that do not synchronize)"
"$build/tests/cpp/tessera_cuda_codegen_tests" --gtest_filter='*FaultRecord*' 2>&1 | tee "$logs/fault_record.log" |
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure" | head -5
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && ! grep -q "SKIPPED \]" "$logs/fault_record.log" && row "deferred fault record" PASS "described after the launch" ||
  row "deferred fault record" FAIL "see $logs/fault_record.log"

fi  # not dist

if [ -z "${GPU_CHECK_ONLY:-}" ]; then
# compute-sanitizer over the conformance kernels (GpuCodegen.*: every kernel of
# tests/conformance plus the tensor-core GEMM, on the GPU): memcheck for
# out-of-bounds and misaligned accesses, racecheck for shared-memory hazards.
sanitizer="$(command -v compute-sanitizer || true)"
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  if [ -z "$sanitizer" ]; then
    row "compute-sanitizer $tool" SKIP "not available (compute-sanitizer not on PATH or in /usr/local/cuda/bin)"
    continue
  fi
  echo "== compute-sanitizer $tool (GpuCodegen.*)"
  t0=$(stamp)
  timeout 240 "$sanitizer" --tool "$tool" --error-exitcode 3 "$build/tests/gpu/tessera_gpu_tests" \
    --gtest_filter='GpuCodegen.*' >"$logs/sanitizer_$tool.log" 2>&1
  rc=$?
  verdict=$(grep -hE "(ERROR|RACECHECK) SUMMARY" "$logs/sanitizer_$tool.log" | tail -1 | sed 's/^=* *//')
  ran=$(grep -cE "^\[       OK \] GpuCodegen" "$logs/sanitizer_$tool.log")
  skipped=$(grep -cE "^\[  SKIPPED \] GpuCodegen" "$logs/sanitizer_$tool.log")
  grep -E "^========= (Invalid|Race|Error|Program hit|Warning)|FAILED" "$logs/sanitizer_$tool.log" | head -10
  if [ "$rc" -eq 0 ]; then
    row "compute-sanitizer $tool" PASS "$ran tests passed, $skipped skipped, $verdict, $(($(stamp) - t0)) s"
  elif [ "$rc" -eq 124 ]; then
    row "compute-sanitizer $tool" FAIL "timed out after 240 s (see $logs/sanitizer_$tool.log)"
  elif grep -qE "Device not supported|not supported on this platform" "$logs/sanitizer_$tool.log"; then
    row "compute-sanitizer $tool" SKIP "not available on this machine's runtime (see $logs/sanitizer_$tool.log)"
  else
    row "compute-sanitizer $tool" FAIL "rc $rc, $verdict (see $logs/sanitizer_$tool.log)"
  fi
done

echo "== CUDA code generation benchmarks"
timeout 300 stdbuf -oL "$build/tests/gpu/tessera_gpu_codegen_bench" 2>&1 | tee "$logs/codegen_bench.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && row "codegen benchmarks" PASS "table below" ||
  row "codegen benchmarks" FAIL "rc $rc$([ "$rc" -eq 124 ] && echo ', timed out after 300 s') (see $logs/codegen_bench.log)"

echo "== runtime figures"
"$build/tests/gpu/tessera_gpu_figures" 2>&1 | tee "$logs/figures.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && row "runtime figures" PASS "$(grep -c 'gpu-figures\]' "$logs/figures.log") lines above" ||
  row "runtime figures" FAIL "see $logs/figures.log"

fi  # GPU_CHECK_ONLY

if [ $have_python -eq 1 ]; then
  pkg="$build/pydev/tessera"
  rm -rf "$build/pydev" && mkdir -p "$pkg"
  for f in python/tessera/*; do ln -s "$root/$f" "$pkg/$(basename "$f")"; done
  cp "$build"/python/_C*.so "$build"/src/libtessera.so* "$pkg/"
fi
if [ $have_python -eq 1 ] && [ "${GPU_CHECK_ONLY:-}" = python ]; then
  if [ -n "${GPU_CHECK_TESTS:-}" ]; then
    echo "== pytest $GPU_CHECK_TESTS"
    # shellcheck disable=SC2086  # a list of pytest arguments
    PYTHONPATH="$build/pydev:$build/pywheels" timeout 900 "$python" -m pytest -q -rs -p no:cacheprovider $GPU_CHECK_TESTS 2>&1 |
      tee "$logs/pytest_python.log" | tail -30
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && row "pytest (GPU_CHECK_TESTS)" PASS "$(tail -1 "$logs/pytest_python.log" | tr -d '=')" ||
      row "pytest (GPU_CHECK_TESTS)" FAIL "$(tail -1 "$logs/pytest_python.log" | tr -d '=')"
  fi
  n=0
  IFS=';' read -ra commands <<<"${GPU_CHECK_RUN:-}"
  for c in "${commands[@]}"; do
    [ -z "${c// /}" ] && continue
    n=$((n + 1))
    echo "== $c"
    PYTHONPATH="$build/pydev:$build/pywheels" PYTHON="$python" BUILD="$build" timeout 900 bash -c "$c" 2>&1 | tee "$logs/run_$n.log" | tail -40
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && row "run: ${c:0:50}" PASS "see $logs/run_$n.log" || row "run: ${c:0:50}" FAIL "rc $rc"
  done
fi

if [ $have_python -eq 1 ] && [ -z "${GPU_CHECK_ONLY:-}" ]; then
  echo "== Python CUDA tensor tests"
  PYTHONPATH="$build/pydev:$build/pywheels" "$python" -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda_tensor.py \
    2>&1 | tee "$logs/pytest_cuda.log" | tail -15
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && row "python cuda tensor tests" PASS "$(tail -1 "$logs/pytest_cuda.log" | tr -d '=')" ||
    row "python cuda tensor tests" FAIL "$(tail -1 "$logs/pytest_cuda.log" | tr -d '=')"
  echo "== Python kernels on cuda:N (inspect_ir target/ptx, launches)"
  PYTHONPATH="$build/pydev:$build/pywheels" "$python" -m pytest -q -rs -p no:cacheprovider tests/python/test_kernel_cuda.py tests/python/test_kernel_cuda_autotune.py \
    2>&1 | tee "$logs/pytest_kernel_cuda.log" | tail -15
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && row "python cuda kernel tests" PASS "$(tail -1 "$logs/pytest_kernel_cuda.log" | tr -d '=')" ||
    row "python cuda kernel tests" FAIL "$(tail -1 "$logs/pytest_kernel_cuda.log" | tr -d '=')"
fi
if [ $have_python -eq 1 ] && [ "${GPU_CHECK_ONLY:-}" != schedule ] && [ "${GPU_CHECK_ONLY:-}" != python ]; then
  # Collectives over the GPUs of this host (the nccl backend); needs 2+ GPUs, skips parts with fewer.
  export NCCL_NVLS_ENABLE=0
  echo "== collectives on the GPUs (nccl backend vs local, partitioned @jit, index launches)"
  extra=()
  [ "${GPU_CHECK_ONLY:-}" = dist ] && extra=(tests/python/test_jit_cuda.py)
  PYTHONPATH="$build/pydev:$build/pywheels" timeout 900 "$python" -m pytest -q -rs -p no:cacheprovider tests/python/test_dist_nccl.py \
    tests/python/test_dist_cuda.py "${extra[@]}" 2>&1 | tee "$logs/pytest_dist_nccl.log" | tail -15
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && row "python nccl/dist tests ($(nvidia-smi -L 2>/dev/null | wc -l) GPUs)" PASS "$(tail -1 "$logs/pytest_dist_nccl.log" | tr -d '=')" ||
    row "python nccl/dist tests" FAIL "$(tail -1 "$logs/pytest_dist_nccl.log" | tr -d '=')"
  if [ "${GPU_CHECK_SKIP_BENCH:-0}" = 1 ]; then
    row "nccl benchmark" SKIP "GPU_CHECK_SKIP_BENCH=1"
  else
  echo "== collective bandwidth against torch.distributed"
  PYTHONPATH="$build/pydev:$build/pywheels" timeout 900 "$python" bench/nccl_bench.py ${NCCL_BENCH_ARGS:-} 2>&1 | tee "$logs/nccl_bench.log" | tail -40
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && row "nccl benchmark" PASS "table above" || row "nccl benchmark" FAIL "rc $rc (see $logs/nccl_bench.log)"
  fi
fi
if [ $have_python -eq 1 ] && [ "${GPU_CHECK_ONLY:-}" != dist ] && [ "${GPU_CHECK_ONLY:-}" != python ]; then
  echo "== @tessera.jit on cuda:0 (Schedule IR executables through the CUDA backend)"
  PYTHONPATH="$build/pydev:$build/pywheels" "$python" -m pytest -q -rs -p no:cacheprovider tests/python/test_jit_cuda.py tests/python/test_dist_cuda.py \
    2>&1 | tee "$logs/pytest_jit_cuda.log" | tail -15
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && row "python jit on cuda tests" PASS "$(tail -1 "$logs/pytest_jit_cuda.log" | tr -d '=')" ||
    row "python jit on cuda tests" FAIL "$(tail -1 "$logs/pytest_jit_cuda.log" | tr -d '=')"
  if "$python" -c "import torch" 2>/dev/null; then
    echo "== jit on the GPU against torch"
    PYTHONPATH="$build/pydev:$build/pywheels" timeout 300 "$python" bench/schedule_gpu_bench.py 2>&1 | tee "$logs/schedule_gpu_bench.log" | tail -8
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && row "jit on GPU benchmark" PASS "table above" || row "jit on GPU benchmark" FAIL "rc $rc (see $logs/schedule_gpu_bench.log)"
    echo "== host cost of launches against raw cuLaunchKernel"
    PYTHONPATH="$build/pydev:$build/pywheels" timeout 120 "$python" bench/launch_overhead_gpu_bench.py 2>&1 |
      tee "$logs/launch_overhead_gpu_bench.log" | tail -10
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && row "launch overhead benchmark" PASS "$(grep -o 'MLP B32 D256 (graph) *[0-9.]*' "$logs/launch_overhead_gpu_bench.log" | awk '{print $NF " us per graph call"}')" ||
      row "launch overhead benchmark" FAIL "rc $rc (see $logs/launch_overhead_gpu_bench.log)"
    if [ "${GPU_CHECK_SKIP_BENCH:-0}" != 1 ]; then
      # The issue's tables: memory-bound rows against copy and torch (eager, torch.compile), and
      # the GEMMs and the transformer MLP block step against cuBLAS and torch.
      echo "== memory-bound rows (norms, elementwise) against copy and torch"
      PYTHONPATH="$build/pydev:$build/pywheels" timeout 600 "$python" bench/norm_gpu_bench.py --runs 10 2>&1 |
        tee "$logs/norm_gpu_bench.log" | tail -12
      rc=${PIPESTATUS[0]}
      [ "$rc" -eq 0 ] && row "memory-bound benchmark" PASS "$(grep -o 'rmsnorm forward [0-9.]*x copy' "$logs/norm_gpu_bench.log")" ||
        row "memory-bound benchmark" FAIL "rc $rc (see $logs/norm_gpu_bench.log)"
      echo "== GEMMs and the MLP block against torch"
      PYTHONPATH="$build/pydev:$build/pywheels" timeout 600 "$python" bench/mlp_block_gpu_bench.py 2>&1 |
        tee "$logs/mlp_block_gpu_bench.log" | tail -10
      rc=${PIPESTATUS[0]}
      [ "$rc" -eq 0 ] && row "GEMM / MLP block benchmark" PASS "$(grep -o 'MLP step: tessera [0-9.]* ms' "$logs/mlp_block_gpu_bench.log")" ||
        row "GEMM / MLP block benchmark" FAIL "rc $rc (see $logs/mlp_block_gpu_bench.log)"
    fi
  fi
  if [ -z "${GPU_CHECK_ONLY:-}" ]; then
    # The libraries on the GPU: attention and sparse kernels against the CPU path (bit for bit for
    # the lane kernels; the blocked attention kernels against float64 numpy and JAX).
    echo "== libraries on cuda:0 (flash_attn, sparse)"
    PYTHONPATH="$build/pydev:$build/pywheels" timeout 900 "$python" -m pytest -q -rs -p no:cacheprovider tests/python/test_flash_attn.py \
      tests/python/test_flash_attn_blocked.py tests/python/test_sparse.py 2>&1 | tee "$logs/pytest_libraries.log" | tail -8
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && row "python library tests" PASS "$(tail -1 "$logs/pytest_libraries.log" | tr -d '=')" ||
      row "python library tests" FAIL "$(tail -1 "$logs/pytest_libraries.log" | tr -d '=')"
    if "$python" -c "import torch" 2>/dev/null && [ "${GPU_CHECK_SKIP_BENCH:-0}" != 1 ]; then
      echo "== flash_attn on the GPU against torch SDPA"
      PYTHONPATH="$build/pydev:$build/pywheels" timeout 600 "$python" bench/flash_attn_gpu_bench.py --s 2048 --runs 2 --fp8 2>&1 |
        tee "$logs/flash_attn_gpu_bench.log" | tail -8
      rc=${PIPESTATUS[0]}
      [ "$rc" -eq 0 ] && row "flash_attn GPU benchmark" PASS "table above" ||
        row "flash_attn GPU benchmark" FAIL "rc $rc (see $logs/flash_attn_gpu_bench.log)"
      echo "== decoding attention (a KV cache) on the GPU against torch SDPA"
      (cd bench && PYTHONPATH="$build/pydev:$build/pywheels" timeout 300 "$python" attention_decode_gpu_bench.py 2>&1 |
        tee "$logs/attention_decode_gpu_bench.log" | tail -6)
      rc=$?
      [ "$rc" -eq 0 ] && row "decode attention GPU benchmark" PASS "table above" ||
        row "decode attention GPU benchmark" FAIL "rc $rc (see $logs/attention_decode_gpu_bench.log)"
    fi
  fi
elif ! "$python" -c "import nanobind, numpy" 2>/dev/null; then
  row "python cuda tensor tests" SKIP "$python cannot import nanobind and numpy"
fi

printf '\n== summary\n'
printf '%s\n' "${rows[@]}"
grep -hE "gpu-bench\]" "$logs/codegen_bench.log" 2>/dev/null
exit $status
