"""Host cost of launching a compiled executable's kernels on CUDA, against raw
cuLaunchKernel, in one run.

    python bench/launch_overhead_gpu_bench.py [--runs 200]

Rows (host microseconds per call, `runs` calls queued back to back without
synchronizing, then divided; per kernel = per call / kernels the executable
launches):
- raw cuLaunchKernel of an empty kernel with one pointer parameter, called
  through ctypes on the driver library, the same with a 3136-byte parameter
  (Tessera's launch ABI), and a ctypes call of cuCtxGetCurrent
  (the part of the first that is ctypes: the driver's own launch cost is the
  difference);
- torch `x * 2 + 1` eager (two launches) on the same tensor, for scale;
- eager `tessera.ops.add` (one cached single-op executable);
- `@jit` of `x * 2 + 1` (one fused kernel), plain and with capture_graph=True;
- `@jit(grad)` of a 2-layer MLP, plain and captured: per call and per kernel.
"""

import argparse
import contextlib
import ctypes
import os

import numpy as np

import tessera
from gpu_timing import host_seconds

ops = tessera.ops

_EMPTY_PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry empty_kernel(.param .u64 p) { ret; }
.visible .entry empty_block_kernel(.param .align 64 .b8 p[3136]) { ret; }
"""


def raw_launches(runs):
    """Host seconds per cuLaunchKernel of an empty kernel (the current context: torch's primary one)
    with an 8-byte parameter and with a 3136-byte one (the size of Tessera's parameter block,
    src/backends/cuda/device/tile.cuh), and per ctypes call of cuCtxGetCurrent (what ctypes alone
    costs of the others)."""
    cu = ctypes.CDLL("libcuda.so.1")
    context = ctypes.c_void_p()
    floor = host_seconds(lambda: cu.cuCtxGetCurrent(ctypes.byref(context)), runs)
    module = ctypes.c_void_p()
    rc = cu.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(_EMPTY_PTX))
    if rc != 0:
        raise RuntimeError(f"cuModuleLoadData failed with CUresult {rc}")
    launch = cu.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
                                                                  ctypes.c_void_p]
    out = []
    for name, block in ((b"empty_kernel", ctypes.c_uint64(0)), (b"empty_block_kernel", (ctypes.c_uint8 * 3136)())):
        function = ctypes.c_void_p()
        rc = cu.cuModuleGetFunction(ctypes.byref(function), module, name)
        if rc != 0:
            raise RuntimeError(f"cuModuleGetFunction failed with CUresult {rc}")
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(block), ctypes.c_void_p))

        def once(function=function, params=params):
            rc = launch(function, 1, 1, 1, 32, 1, 1, 0, None, params, None)
            if rc != 0:
                raise RuntimeError(f"cuLaunchKernel failed with CUresult {rc}")

        out.append(host_seconds(once, runs, sync=lambda: cu.cuCtxSynchronize()))
    return out[0], out[1], floor


@contextlib.contextmanager
def plans_off(off):
    """TESSERA_RUN_PLANS=0 inside (every plain run walks the steps) when `off`."""
    if not off:
        yield
        return
    os.environ["TESSERA_RUN_PLANS"] = "0"
    try:
        yield
    finally:
        del os.environ["TESSERA_RUN_PLANS"]


def mlp_loss(w1, b1, w2, b2, x, y):
    h = ops.relu(ops.matmul(x, w1) + b1)
    return ops.mean(-ops.sum(y * ops.log(ops.softmax_safe(ops.matmul(h, w2) + b2, axis=-1)), axis=-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    import torch
    dev, sync, runs = "cuda:0", torch.cuda.synchronize, args.runs
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(4096).astype(np.float32)
    x, tx = tessera.tensor(xv).to(dev), torch.tensor(xv, device=dev)
    rows = []  # (name, host seconds per call, kernels per call)

    torch.cuda.init()
    sync()
    raw, raw_block, floor = raw_launches(runs)
    rows.append(("raw cuLaunchKernel (ctypes)", raw, 1))
    rows.append(("raw cuLaunchKernel, 3136 B params", raw_block, 1))
    rows.append(("ctypes call alone", floor, 1))
    rows.append(("torch x * 2 + 1 (eager)", host_seconds(lambda: tx * 2 + 1, runs, sync), 2))
    rows.append(("tessera.ops.add (eager)", host_seconds(lambda: ops.add(x, x), runs, sync), 1))

    def affine(v):
        return v * 2.0 + 1.0

    # "walk": plain calls with run plans off (TESSERA_RUN_PLANS=0), each walking
    # the executable's steps; "plan": the default (docs/design/0048).
    modes = [("walk", False), ("plan", False), ("graph", True)]
    for mode, capture in modes:
        f = tessera.jit(affine, capture_graph=capture)
        with plans_off(mode == "walk"):
            np.testing.assert_array_equal(f(x).numpy(), xv * np.float32(2) + np.float32(1))
            kernels = len(f.executable().kernels)
            rows.append((f"jit x * 2 + 1 ({mode})", host_seconds(lambda: f(x), runs, sync), kernels))

    B, D = 32, 256
    host = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in [(D, D), (D,), (D, 10), (10,), (B, D)]]
    host.append(np.eye(10, dtype=np.float32)[rng.integers(0, 10, B)])
    m = [tessera.tensor(h).to(dev) for h in host]
    for mode, capture in modes:
        step = tessera.jit(tessera.grad(mlp_loss, argnums=(0, 1, 2, 3)), capture_graph=capture)
        with plans_off(mode == "walk"):
            step(*m)
            kernels = len(step.executable().kernels)
            rows.append((f"jit(grad) MLP B{B} D{D} ({mode})", host_seconds(lambda: step(*m), runs, sync), kernels))

    print(f"{'host cost':<32} {'us/call':>8} {'kernels':>8} {'us/kernel':>10} {'vs raw':>7}")
    for name, seconds, kernels in rows:
        per_kernel = seconds / kernels
        print(f"{name:<32} {seconds * 1e6:8.1f} {kernels:8d} {per_kernel * 1e6:10.1f} {per_kernel / raw:6.1f}x")


if __name__ == "__main__":
    main()
