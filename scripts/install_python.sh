#!/usr/bin/env bash
# Builds and installs the tessera Python package (and the `tessera` command)
# into .venv with `pip install .`. ccache makes rebuilds cheap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CCACHE_BASEDIR="$root"
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
werror=""; [ "${CI:-}" = "true" ] || [ "${TESSERA_WERROR:-}" = "1" ] && werror="-DTESSERA_WERROR=ON"
# TESSERA_PIP_BUILD_DIR: the CMake build tree pip builds in (pyproject's
# build/python-<tag> otherwise). scripts/test.sh points it at the tree its
# C++ build uses, so the library is compiled once, not once per tree.
settings=()
[ -n "${TESSERA_PIP_BUILD_DIR:-}" ] && settings=(--config-settings="build-dir=$TESSERA_PIP_BUILD_DIR")
CMAKE_ARGS="$launcher $werror -GNinja" .venv/bin/python -m pip install -q --no-build-isolation "${settings[@]}" .
