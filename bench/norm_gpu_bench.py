"""The memory-bound rows of the Graph-IR-on-GPU benchmarks: normalizations and
an elementwise chain in bf16 @accum(fp32) on one GPU, against a device-to-device
copy, PyTorch eager and torch.compile of the same function, in one run.

    python bench/norm_gpu_bench.py [--rows 16384] [--cols 8192] [--runs 20] [--no-compile] [--eager]

--eager times Tessera's calls as written (eager ops, each a cached
shape-generic kernel; the gradient op by op) instead of their jit.

Rows (x is [rows, cols] bf16; each function computes in fp32 and stores bf16):
- rmsnorm_safe, layernorm_safe, softmax_safe over the last axis;
- bias + gelu + residual: gelu(x + b) + r, b a [cols] bias, r a residual;
- add: x + r, the plainest elementwise kernel (what every bf16 op pays);
  forward only, since its gradient is g itself and runs no kernel.
Forward is y = f(x). Backward is the gradient of sum(f(x) * g) with respect to
x (and b for the chain): Tessera's jit(grad) of that loss, whatever it
recomputes; for torch, forward + autograd backward minus the forward. With
--precision storage (the default) Tessera's gradients are bf16, as torch's are
(grad(..., precision="storage")); with --precision full they are fp32 (its
autodiff's default), which writes twice the bytes of dx the GB/s count.

GB/s counts the bytes a kernel must move at least, the same for every column:
forward reads the inputs and writes y in bf16; backward reads x, g (and r's
absence: the residual's gradient is g itself) and writes dx in bf16. "copy" is
a device-to-device copy of the same number of bytes (torch's copy_, read and
write counted). Times are per call over back-to-back calls ending in one
synchronization (the GPU's pace where the host keeps up). Every Tessera result
is checked against torch's fp32 computation first.
"""

import argparse

import ml_dtypes
import numpy as np

import tessera
from gpu_timing import pace_seconds

ops = tessera.ops
EPS_RMS, EPS_LN = 1e-6, 1e-5


def pace(fn, sync, runs):
    return pace_seconds(fn, sync, runs, rounds=3)


def torch_fns(torch, name):
    F = torch.nn.functional
    bf16 = torch.bfloat16
    if name == "rmsnorm":
        def f(x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS_RMS)).to(bf16)
    elif name == "layernorm":
        def f(x):
            return F.layer_norm(x.float(), (x.shape[-1],), eps=EPS_LN).to(bf16)
    elif name == "softmax":
        def f(x):
            return torch.softmax(x.float(), -1).to(bf16)
    elif name == "add":
        def f(x, r):
            return (x.float() + r.float()).to(bf16)
    else:
        def f(x, b, r):
            return (F.gelu(x.float() + b.float()) + r.float()).to(bf16)
    return f


def tessera_fn(name):
    if name == "rmsnorm":
        return lambda x: ops.rmsnorm_safe(x, axis=-1, eps=EPS_RMS)
    if name == "layernorm":
        return lambda x: ops.layernorm_safe(x, axis=-1, eps=EPS_LN)
    if name == "softmax":
        return lambda x: ops.softmax_safe(x, axis=-1)
    if name == "add":
        return lambda x, r: x + r
    return lambda x, b, r: ops.gelu(x + b) + r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile column")
    ap.add_argument("--eager", action="store_true", help="time Tessera's eager calls (no jit)")
    ap.add_argument("--precision", choices=["storage", "full"], default="storage",
                    help="Tessera's gradient precision (storage: bf16 gradients, as torch's)")
    ap.add_argument("--only", nargs="*", default=["rmsnorm", "layernorm", "softmax", "chain", "add"])
    args = ap.parse_args()
    import torch
    dev = "cuda:0"

    sync = torch.cuda.synchronize  # the whole device: Tessera's stream too

    R, C = args.rows, args.cols
    rng = np.random.default_rng(0)

    def host_bf16(shape, scale=1.0):
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.bfloat16)

    hx, hg, hr, hb = host_bf16((R, C), 2.0), host_bf16((R, C)), host_bf16((R, C)), host_bf16((C,))
    policy = "bf16 @accum(fp32)"
    tx, tg, tr, tb = (tessera.tensor(h, policy).to(dev) for h in (hx, hg, hr, hb))
    px, pg, pr, pb = (torch.from_numpy(h.view(np.int16)).to(dev).view(torch.bfloat16) for h in (hx, hg, hr, hb))
    elem = R * C

    src = torch.empty(elem * 3, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)

    def copy_seconds(nbytes):
        n = nbytes // 2 // 2  # bf16 elements: half the bytes are read, half written
        return pace(lambda: dst[:n].copy_(src[:n]), sync, args.runs)

    print(f"gradients at {args.precision} precision")
    print(f"{'row':<26} {'GB/s':>8} {'copy':>8} {'vs copy':>8} {'eager':>8} {'vs eager':>9} {'compile':>8} {'vs compile':>10}")
    summary = []
    for name in args.only:
        chain = name == "chain"
        f_t = tessera_fn(name)
        f_p = torch_fns(torch, name)
        ours_in = (tx, tb, tr) if chain else (tx, tr) if name == "add" else (tx,)
        theirs_in = (px, pb, pr) if chain else (px, pr) if name == "add" else (px,)
        argnums = (0, 1) if chain else 0
        grad = tessera.grad(lambda *a: ops.sum(f_t(*a[:-1]) * a[-1]), argnums=argnums, precision=args.precision)
        # --eager: the calls as written, each op an eager shape-generic kernel.
        fwd = f_t if args.eager else tessera.jit(f_t)
        bwd = grad if args.eager else tessera.jit(grad)

        # Correctness first: against torch in fp32 (one bf16 rounding of y apart).
        want = f_p(*(t.float() for t in theirs_in)).float()
        got = torch.from_numpy(fwd(*ours_in).to("cpu").numpy().astype(np.float32)).to(dev)
        err = (got - want).abs().max().item()
        assert err <= 2.0 ** -7 * max(want.abs().max().item(), 1.0), f"{name} forward: max error {err}"
        leaves = [t.float().clone().requires_grad_() for t in theirs_in[: (2 if chain else 1)]]
        rest = [t.float() for t in theirs_in[len(leaves):]]
        grads_want = torch.autograd.grad(f_p(*leaves, *rest).float(), leaves, pg.float())
        grads_got = bwd(*ours_in, tg)
        grads_got = grads_got if isinstance(grads_got, (tuple, list)) else (grads_got,)
        for gw, gt in zip(grads_want, grads_got):
            gt = torch.from_numpy(gt.to("cpu").numpy().astype(np.float32)).to(dev)
            err = (gt - gw).abs().max().item()
            assert err <= 2.0 ** -6 * max(gw.abs().max().item(), 1.0), f"{name} backward: max error {err}"

        io = (1 + len(ours_in) - chain) * elem * 2  # forward: inputs + y, bf16 (the bias is negligible)
        io_b = 3 * elem * 2                 # backward: x, g in; dx out
        t_fwd = pace(lambda: fwd(*ours_in), sync, args.runs)
        t_bwd = pace(lambda: bwd(*ours_in, tg), sync, args.runs)
        e_fwd = pace(lambda: f_p(*theirs_in), sync, args.runs)
        leaves_p = [t.clone().requires_grad_() for t in theirs_in[: (2 if chain else 1)]]
        rest_p = list(theirs_in[len(leaves_p):])

        def torch_both(fn):
            y = fn(*leaves_p, *rest_p)
            torch.autograd.grad(y, leaves_p, pg)
        e_both = pace(lambda: torch_both(f_p), sync, args.runs)
        c_fwd = c_bwd = float("nan")
        if not args.no_compile:
            cf = torch.compile(f_p)
            c_fwd = pace(lambda: cf(*theirs_in), sync, args.runs)
            c_both = pace(lambda: torch_both(cf), sync, args.runs)
            c_bwd = max(c_both - pace(lambda: cf(*leaves_p, *rest_p), sync, args.runs), 1e-9)
        e_bwd = max(e_both - pace(lambda: f_p(*leaves_p, *rest_p), sync, args.runs), 1e-9)
        rows = [(f"{name} forward", t_fwd, e_fwd, c_fwd, io), (f"{name} backward", t_bwd, e_bwd, c_bwd, io_b)]
        if name == "add":
            # d/dx sum((x + r) * g) is g itself: no kernel reads x or writes
            # dx, so the row's bytes would not be a bandwidth.
            rows.pop()
            print(f"{name + ' backward':<26} (dx is g itself: no kernel runs)", flush=True)
        for label, t, e, c, nbytes in rows:
            cp = copy_seconds(nbytes)
            gbs = nbytes / t / 1e9
            print(f"{label:<26} {gbs:8.0f} {nbytes / cp / 1e9:8.0f} {cp / t:7.2f}x {nbytes / e / 1e9:8.0f} "
                  f"{e / t:8.2f}x {nbytes / c / 1e9:8.0f} {c / t:9.2f}x", flush=True)
            summary.append((label, cp / t, c / t))
    print("summary: " + ", ".join(f"{lab} {a:.2f}x copy / {b:.2f}x compile" for lab, a, b in summary))


if __name__ == "__main__":
    main()
