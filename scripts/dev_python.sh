#!/usr/bin/env bash
# Developer loop for the Python package without `pip install`: builds the
# extension in BUILD_DIR (default build-dev) and lays out BUILD_DIR/pydev/tessera
# with links to the package sources plus the built _C and libtessera, so
#   PYTHONPATH=BUILD_DIR/pydev .venv/bin/python -m pytest tests/python
# tests the working tree. Several build dirs can coexist.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build-dev}"
cd "$root"
export CCACHE_BASEDIR="$root"
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja $launcher -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON \
    -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_PYTHON=ON \
    -DPython_EXECUTABLE="$root/.venv/bin/python" >/dev/null
fi
targets="_C"
grep -q "TESSERA_PREBUILD_KERNELS:BOOL=ON" "$build/CMakeCache.txt" && targets="_C tessera_prebuilt"
cmake --build "$build" -j2 --target $targets
pkg="$build/pydev/tessera"
rm -rf "$build/pydev"
mkdir -p "$pkg"
for f in python/tessera/*; do ln -s "$root/$f" "$pkg/$(basename "$f")"; done
cp "$build"/python/_C*.so "$pkg/"
cp "$build"/src/libtessera.so* "$pkg/"
# The eager kernels compiled at build time (tessera-prebuild), where the
# installed package keeps them.
[ -d "$build/src/prebuilt" ] && ln -s "$root/$build/src/prebuilt" "$pkg/prebuilt"
echo "PYTHONPATH=$root/$build/pydev"
