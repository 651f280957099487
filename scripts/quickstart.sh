#!/usr/bin/env bash
# The main job on the CPU: set up, install Tessera into .venv, run the quickstart.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/install_python.sh
.venv/bin/python examples/quickstart.py
