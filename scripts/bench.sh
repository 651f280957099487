#!/usr/bin/env bash
# Builds and runs the CPU benchmarks; each prints ratios against its baseline.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DTESSERA_BUILD_BENCH=ON >/dev/null
cmake --build build --target numerics_convert_bench graph_trace_bench autodiff_bench
# One core, as the benchmarks' ratios are defined.
taskset -c 0 ./build/bench/numerics_convert_bench --benchmark_min_time=0.5 "$@"
taskset -c 0 ./build/bench/graph_trace_bench --benchmark_min_time=0.5 "$@"
taskset -c 0 ./build/bench/autodiff_bench
bash scripts/install_python.sh
taskset -c 0 .venv/bin/python bench/eager_dispatch_bench.py
taskset -c 0 .venv/bin/python bench/autodiff_jax_bench.py
taskset -c 0 .venv/bin/python bench/kernel_gemm_bench.py
taskset -c 0 .venv/bin/python bench/schedule_elementwise_bench.py
# These pin themselves to one core (bench/one_core.py).
.venv/bin/python bench/run_plan_cpu_bench.py
.venv/bin/python bench/cpu_gemm_epilogue_bench.py
# Schedule IR: each on one core and on all cores.
for c in 1 all; do
  .venv/bin/python bench/schedule_mlp_bench.py --cores "$c"
  .venv/bin/python bench/schedule_norm_bench.py --cores "$c"
done
