"""The `tessera` command that `pip install .` puts on the environment's PATH."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import tessera


def _tessera():
    exe = Path(sys.executable).parent / "tessera"
    return str(exe) if exe.exists() else shutil.which("tessera")


def run(*args, env=None):
    return subprocess.run([_tessera(), *args], capture_output=True, text=True, env=env, timeout=60)


def test_console_script_is_installed():
    assert _tessera() is not None


def test_tessera_opt_console_script_runs_passes_on_stdin():
    exe = Path(sys.executable).parent / "tessera-opt"
    opt = str(exe) if exe.exists() else shutil.which("tessera-opt")
    assert opt is not None, "pip install . must put tessera-opt beside tessera"
    text = (
        "func @f(%x: tensor<[4] fp32>) -> (tensor<[4] fp32>) {\n"
        "  %0 = graph.add %x, %x : tensor<[4] fp32>\n"
        "  %1 = graph.exp %0 : tensor<[4] fp32>\n"
        "  return %1\n"
        "}\n"
    )
    result = subprocess.run([opt, "-", "--pass", "schedule-partition"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "schedule.kernel" in result.stdout and "graph.exp" in result.stdout
    bad = subprocess.run([opt, "-", "--pass", "no-such-pass"], input=text, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-pass" in bad.stderr


def test_info(tmp_path):
    env = dict(os.environ, TESSERA_CACHE_DIR=str(tmp_path / "cache"))
    result = run("info", env=env)
    assert result.returncode == 0
    assert f"Tessera {tessera.__version__}" in result.stdout
    assert "cpu:         available" in result.stdout
    # CUDA is reported either way: available with devices, or unavailable with a reason.
    cuda_line = next(line for line in result.stdout.splitlines() if line.strip().startswith("cuda:"))
    assert "available" in cuda_line
    if "unavailable" in cuda_line:
        assert len(cuda_line.split("unavailable:", 1)[1].strip()) > 10
    assert f"compile cache: {tmp_path / 'cache'}" in result.stdout
    assert tessera.info() in result.stdout or result.stdout.startswith("Tessera")
    # tileiras (the CUDA Tile IR target) is reported either way; pointed at a missing file, it says so.
    assert re.search(r"tileiras:    (found \(\d+\.\d+|not found: )", result.stdout), result.stdout
    missing = run("info", env=dict(env, TESSERA_TILEIRAS=str(tmp_path / "no-tileiras")))
    assert "tileiras:    not found" in missing.stdout and "no-tileiras" in missing.stdout, missing.stdout


def test_policy_and_errors():
    ok = run("policy", "fp8_e4m3@accum(fp32)@loss_scale(2)")
    assert ok.returncode == 0 and ok.stdout.strip() == "fp8_e4m3 @accum(fp32) @loss_scale(2.0)"
    bad = run("policy", "fp8_e4m3 @acum(fp32)")
    assert bad.returncode == 1
    assert "<command line>:1:11: error[TE3002]" in bad.stderr and "^~~~" in bad.stderr
    unknown = run("frobnicate")
    assert unknown.returncode == 2 and "unknown command 'frobnicate'" in unknown.stderr
