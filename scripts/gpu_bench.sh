#!/usr/bin/env bash
# The CUDA code-generation benchmarks alone, on a GPU machine (a quicker
# loop than scripts/gpu_check.sh while tuning): builds the benchmark into
# /tmp/bb and runs it with a 150 s limit, the log in $OUT/bench.log.
set -uo pipefail
export CXX=/usr/bin/g++
b=/tmp/bb; mkdir -p $b; OUT="${OUT:-$b}"
[ -e /usr/include/gtest/gtest.h ] || cmake -S .gpu-carry/googletest-src -B $b/_gtest_build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX=$b/_gtest >/dev/null 2>&1 && cmake --build $b/_gtest_build -j16 --target install >/dev/null 2>&1
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH=$b/_gtest >/dev/null 2>&1
cmake --build $b -j16 --target tessera_gpu_codegen_bench > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
timeout 150 stdbuf -oL $b/tests/gpu/tessera_gpu_codegen_bench 2>&1 | tee $OUT/bench.log
echo "rc=${PIPESTATUS[0]}"
