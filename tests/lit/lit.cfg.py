# lit configuration for Tessera's tool tests (see README.md in this folder).
#
#   lit -sv tests/lit --param tessera_bin_dir=build/tools
#
# Tests are `.test` files (tool commands) and `.tir` files (IR text run
# through tessera-opt; their RUN/CHECK lines are `//` comments in the IR).
#
# Parameters:
#   tessera_bin_dir  folder holding the built `tessera` and `tessera-opt` executables (required)
#   filecheck        path of FileCheck (default: PATH, then /usr/lib/llvm-*/bin)
import glob
import os
import shutil
import subprocess

import lit.formats

config.name = "Tessera"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test", ".tir"]
config.excludes = ["README.md", "Output"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))

bin_dir = lit_config.params.get("tessera_bin_dir")
if not bin_dir:
    lit_config.fatal("pass --param tessera_bin_dir=<folder holding the built tessera executable>")
tessera = os.path.join(os.path.abspath(bin_dir), "tessera")
if not os.access(tessera, os.X_OK):
    lit_config.fatal("no tessera executable at " + tessera + " (build it first: ninja -C build tessera_cli)")
tessera_opt = os.path.join(os.path.abspath(bin_dir), "tessera-opt")
if not os.access(tessera_opt, os.X_OK):
    lit_config.fatal("no tessera-opt executable at " + tessera_opt + " (build it first: ninja -C build tessera_opt)")


def find_filecheck():
    explicit = lit_config.params.get("filecheck")
    if explicit:
        return explicit
    found = shutil.which("FileCheck")
    if found:
        return found
    for candidate in sorted(glob.glob("/usr/lib/llvm-*/bin/FileCheck"), reverse=True):
        if os.access(candidate, os.X_OK):
            return candidate
    lit_config.fatal("FileCheck not found: put it on PATH or pass --param filecheck=<path>")


filecheck = find_filecheck()
# FileCheck and LLVM's `not` come from the same bin folder; put it first on PATH.
config.environment["PATH"] = os.pathsep.join([os.path.dirname(filecheck), config.environment.get("PATH", os.environ.get("PATH", ""))])
# %tessera-opt first: %tessera is a prefix of it.
config.substitutions.append(("%tessera-opt", tessera_opt))
config.substitutions.append(("%tessera", tessera))
lit_config.note("tessera: " + tessera)
lit_config.note("tessera-opt: " + tessera_opt)
lit_config.note("FileCheck: " + filecheck)

# `REQUIRES: tileiras`: tests that assemble CUDA Tile IR (no GPU needed) run
# where `tessera info` finds tileiras; $TESSERA_TILEIRAS passes through.
if os.environ.get("TESSERA_TILEIRAS"):
    config.environment["TESSERA_TILEIRAS"] = os.environ["TESSERA_TILEIRAS"]
try:
    info = subprocess.run([tessera, "info"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **config.environment}).stdout
except (OSError, subprocess.SubprocessError):
    info = ""
if any(line.split()[:2] == ["tileiras:", "found"] for line in info.splitlines()):
    config.available_features.add("tileiras")
