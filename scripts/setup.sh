#!/usr/bin/env bash
# Installs what Tessera's build and tests need on a fresh Debian machine:
# missing Debian packages through apt-get, and a project-local Python venv
# (.venv) filled with pip. Safe to run again: it only installs what is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Debian packages: compiler and build tools, GoogleTest, Google Benchmark,
# FileCheck (llvm-14-tools), clang + its runtimes for the parser fuzzer, Open MPI
# (mpirun and libmpi, which the mpi collective backend loads at run time).
packages=(g++ cmake ninja-build ccache googletest libgtest-dev libbenchmark-dev llvm-14-tools
          clang clang-format clang-tidy python3-venv python3-dev openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3-venv/-dev are only needed when python3 is Debian's own.
if python3 -c 'import sys; sys.exit(0 if sys.prefix.startswith("/usr") else 1)' 2>/dev/null; then :; else
  missing=("${missing[@]/python3-venv}"); missing=("${missing[@]/python3-dev}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.tessera-requirements
reqs="pip>=23 numpy ml_dtypes pytest lit nanobind>=2.0 scikit-build-core>=0.10 jax matplotlib"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$reqs" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade $reqs
  echo "$reqs" > "$stamp"
fi
