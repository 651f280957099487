"""@tessera.jit on a CUDA device: the Schedule IR executable compiled by the CUDA
backend, next to PyTorch on the same GPU in the same run.

    python bench/schedule_gpu_bench.py [--batch 256] [--width 1024]

Rows:
- jit(grad) of the 2-layer MLP of bench/schedule_mlp_bench.py (fp32), per
  step, against torch (eager autograd) doing the same gradients;
- a 5-op elementwise chain over 16M fp32 elements, against torch eager;
- softmax_safe over 4096x4096 fp32, against torch.softmax;
- sums of 4096x4096 fp32 over the last and the first axis, against torch.sum;
- the first call of jit(grad) with an empty kernel cache (NVRTC compiles),
  and in a second process with a warm cache;
- the same jit(grad) step with capture_graph=True (one CUDA graph replayed
  with new buffer addresses) against plain launches, at the size above and
  at a small one where launch overhead dominates.
Each Tessera result is checked against torch first (fp32, 1e-4 relative).
Launches do not synchronize; a per-step time ends with a device
synchronization.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import tessera
from gpu_timing import host_seconds
from gpu_timing import median_seconds as seconds

ops = tessera.ops


def mlp_loss(w1, b1, w2, b2, x, y):
    h = ops.relu(ops.matmul(x, w1) + b1)
    logits = ops.matmul(h, w2) + b2
    return ops.mean(-ops.sum(y * ops.log(ops.softmax_safe(logits, axis=-1)), axis=-1))


def first_call(batch, width):
    """Seconds of the first jit(grad) call in a fresh process (cache dir from the environment)."""
    code = (
        "import time, numpy as np, tessera, sys; sys.path.insert(0, 'bench');"
        "from schedule_gpu_bench import mlp_loss;"
        f"B, D = {batch}, {width};"
        "rng = np.random.default_rng(0);"
        "a = [tessera.tensor(rng.standard_normal(s).astype(np.float32)).to('cuda:0') for s in "
        "[(D, D), (D,), (D, 10), (10,), (B, D), (B, 10)]];"
        "f = tessera.jit(tessera.grad(mlp_loss, argnums=(0, 1, 2, 3)));"
        "t0 = time.perf_counter(); f(*a); print(time.perf_counter() - t0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=1024)
    args = ap.parse_args()
    import torch
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    B, D = args.batch, args.width
    host = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in [(D, D), (D,), (D, 10), (10,), (B, D)]]
    host.append(np.eye(10, dtype=np.float32)[rng.integers(0, 10, B)])
    ours = [tessera.tensor(h).to(dev) for h in host]
    theirs = [torch.tensor(h, device=dev) for h in host]
    rows = []

    step = tessera.jit(tessera.grad(mlp_loss, argnums=(0, 1, 2, 3)))

    def torch_step():
        w1, b1, w2, b2, x, y = [t.clone().requires_grad_(i < 4) for i, t in enumerate(theirs)]
        h = torch.relu(x @ w1 + b1)
        loss = torch.mean(-torch.sum(y * torch.log(torch.softmax(h @ w2 + b2, -1)), -1))
        return torch.autograd.grad(loss, [w1, b1, w2, b2])

    g_ours = step(*ours)
    g_theirs = torch_step()
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.cpu().numpy(), rtol=1e-3, atol=1e-5)
    a, b = seconds(lambda: step(*ours), sync=sync), seconds(torch_step, sync=sync)
    rows.append((f"jit(grad) MLP B{B} D{D}", a, b))
    host_rows = [(f"jit(grad) MLP B{B} D{D}", host_seconds(lambda: step(*ours), sync=sync), a)]

    n = 1 << 24
    xv = rng.standard_normal(n).astype(np.float32)
    xt, tt = tessera.tensor(xv).to(dev), torch.tensor(xv, device=dev)
    chain = tessera.jit(lambda x: ops.tanh(x * 1.5 + 0.25) * x - 0.5)
    np.testing.assert_allclose(chain(xt).numpy(), (torch.tanh(tt * 1.5 + 0.25) * tt - 0.5).cpu().numpy(),
                               rtol=1e-4, atol=1e-6)
    a = seconds(lambda: chain(xt), sync=sync)
    b = seconds(lambda: torch.tanh(tt * 1.5 + 0.25) * tt - 0.5, sync=sync)
    rows.append(("5-op chain 16M fp32", a, b))

    sv = rng.standard_normal((4096, 4096)).astype(np.float32)
    st, sto = tessera.tensor(sv).to(dev), torch.tensor(sv, device=dev)
    sm = tessera.jit(lambda x: ops.softmax_safe(x, axis=-1))
    np.testing.assert_allclose(sm(st).numpy(), torch.softmax(sto, -1).cpu().numpy(), rtol=1e-4, atol=1e-7)
    a = seconds(lambda: sm(st), sync=sync)
    b = seconds(lambda: torch.softmax(sto, -1), sync=sync)
    rows.append(("softmax_safe 4096^2 fp32", a, b))

    for axis in (-1, 0):
        red = tessera.jit(lambda x, axis=axis: ops.sum(x, axis=axis))
        np.testing.assert_allclose(red(st).numpy(), torch.sum(sto, axis).cpu().numpy(), rtol=1e-4, atol=1e-3)
        a = seconds(lambda: red(st), sync=sync)
        b = seconds(lambda: torch.sum(sto, axis), sync=sync)
        rows.append((f"sum axis {axis} 4096^2 fp32", a, b))

    print(f"{'benchmark':<28} {'tessera ms':>11} {'torch ms':>9} {'vs torch':>9}")
    for name, a, b in rows:
        print(f"{name:<28} {a * 1e3:11.3f} {b * 1e3:9.3f} {b / a:8.2f}x")
    host_rows.append(("softmax_safe 4096^2 fp32", host_seconds(lambda: sm(st), sync=sync), rows[2][1]))
    print(f"{'host cost per call':<28} {'host ms':>11} {'step ms':>9} {'share':>9}")
    for name, h, a in host_rows:
        print(f"{name:<28} {h * 1e3:11.3f} {a * 1e3:9.3f} {h / a:8.2f}")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TESSERA_CACHE_DIR"] = cache
        cold = first_call(B, D)
        warm = first_call(B, D)
    print(f"first call of jit(grad) MLP: {cold:.2f} s with an empty cache, {warm:.2f} s in a second process")

    print(f"{'graph replay vs launches':<28} {'graph ms':>11} {'plain ms':>9} {'speedup':>9}")
    for gb, gd in ((B, D), (32, 256)):
        gh = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in [(gd, gd), (gd,), (gd, 10), (10,), (gb, gd)]]
        gh.append(np.eye(10, dtype=np.float32)[rng.integers(0, 10, gb)])
        gt = [tessera.tensor(h).to(dev) for h in gh]
        plain = tessera.jit(tessera.grad(mlp_loss, argnums=(0, 1, 2, 3)))
        graphed = tessera.jit(capture_graph=True)(tessera.grad(mlp_loss, argnums=(0, 1, 2, 3)))
        for a, b in zip(graphed(*gt), plain(*gt)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())  # the same kernels: the same bits
        a, b = seconds(lambda: graphed(*gt), sync=sync), seconds(lambda: plain(*gt), sync=sync)
        ha, hb = host_seconds(lambda: graphed(*gt), sync=sync), host_seconds(lambda: plain(*gt), sync=sync)
        print(f"{'jit(grad) MLP B%d D%d' % (gb, gd):<28} {a * 1e3:11.3f} {b * 1e3:9.3f} {b / a:8.2f}x"
              f"  (host: graph {ha * 1e3:.3f} ms, plain {hb * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
