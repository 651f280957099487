"""Runs one named jit kernel on cuda:0 a few times, for Nsight Compute:

    ncu --clock-control none -k regex:tessera -s 2 -c 1 --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \\
        python scripts/ncu_targets.py column_sum

-s 2 skips the warm-up launches (the compile's first run and one more), so the
profiled launch is a steady one. Targets (bf16 @accum(fp32), the MLP step's
shapes): column_sum (a bias gradient: sum over axis 0 of [8192, 16384]),
rmsnorm, layernorm and softmax (forward, [16384, 8192]), softmax_grad and
layernorm_grad (jit(grad) of sum(f(x) g), one fused kernel each), gemm
([8192, 4096] x [4096, 16384]), gemm_gelu (the same with + bias and GELU in
its epilogue), chain (gelu(x + b) + r, [16384, 8192], GELU
read from its table), fft (complex64 [16384, 1024] along the last axis).
"""

import sys

import ml_dtypes
import numpy as np

import tessera

ops = tessera.ops
P = "bf16 @accum(fp32)"


def tensor(shape, scale=1.0):
    rng = np.random.default_rng(0)
    h = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.bfloat16)
    return tessera.tensor(h, P).to("cuda:0")


def complex_tensor(shape):
    rng = np.random.default_rng(0)
    z = rng.standard_normal(shape, dtype=np.float32) + 1j * rng.standard_normal(shape, dtype=np.float32)
    return tessera.tensor(z.astype(np.complex64)).to("cuda:0")


TARGETS = {
    "column_sum": (lambda x: ops.sum(x, axis=0), lambda: [tensor((8192, 16384))]),
    "rmsnorm": (lambda x: ops.rmsnorm_safe(x), lambda: [tensor((16384, 8192))]),
    "softmax": (lambda x: ops.softmax_safe(x), lambda: [tensor((16384, 8192))]),
    "layernorm": (lambda x: ops.layernorm_safe(x, eps=1e-5), lambda: [tensor((16384, 8192))]),
    "softmax_grad": (tessera.grad(lambda x, g: ops.sum(ops.softmax_safe(x) * g)),
                     lambda: [tensor((16384, 8192)), tensor((16384, 8192))]),
    "layernorm_grad": (tessera.grad(lambda x, g: ops.sum(ops.layernorm_safe(x, eps=1e-5) * g)),
                       lambda: [tensor((16384, 8192)), tensor((16384, 8192))]),
    "chain": (lambda x, b, r: ops.gelu(x + b) + r,
              lambda: [tensor((16384, 8192), 2.0), tensor((8192,)), tensor((16384, 8192))]),
    "fft": (lambda z: ops.fft(z), lambda: [complex_tensor((16384, 1024))]),
    "gemm": (lambda a, b: ops.matmul(a, b), lambda: [tensor((8192, 4096)), tensor((4096, 16384), 4096 ** -0.5)]),
    "gemm_gelu": (lambda a, b, c: ops.gelu(ops.matmul(a, b) + c),
                  lambda: [tensor((8192, 4096)), tensor((4096, 16384), 4096 ** -0.5), tensor((16384,), 0.1)]),
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: python scripts/ncu_targets.py {'|'.join(TARGETS)}")
    fn, make = TARGETS[sys.argv[1]]
    f = tessera.jit(fn)
    args = make()
    for _ in range(4):
        f(*args)
    tessera.runtime.synchronize()


if __name__ == "__main__":
    main()
