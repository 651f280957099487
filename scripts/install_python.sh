#!/usr/bin/env bash
# Builds and installs the tessera Python package (and the `tessera` command)
# into .venv with `pip install .`. ccache makes rebuilds cheap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CCACHE_BASEDIR="$root"
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
werror=""; [ "${CI:-}" = "true" ] && werror="-DTESSERA_WERROR=ON"
CMAKE_ARGS="$launcher $werror -GNinja" .venv/bin/python -m pip install -q --no-build-isolation .
