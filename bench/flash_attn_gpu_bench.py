"""flash_attn on a CUDA device next to torch's scaled_dot_product_attention, in the same run.

    python bench/flash_attn_gpu_bench.py [--b 1] [--h 8] [--s 2048 8192] [--d 64 128] [--runs 3]
                                         [--forms default lane ptx_blocked] [--no-backward] [--fp8]

bf16 q/k/v [B, H, S, D] on cuda:0, causal and not. Tessera runs the eager
op (its compiled attention kernels through the CUDA backend) and jit(grad)
of sum(flash_attn(q, k, v) * g) for the backward; torch runs
scaled_dot_product_attention under each SDPA backend this machine offers
(flash, cuDNN, memory-efficient), forward and forward+backward.
TFLOP/s counts 4 * B * H * S^2 * D flops forward (half when causal) and 2.5x
that backward, the usual convention; backward times are (forward+backward)
minus forward for both sides. Tessera's output and gradients are checked
against torch's math backend (fp32) first. Each time is the median of --runs calls after a
warm-up, ended by a device synchronization.

--cutile also times the same blocked forward written in cuTile Python (the
cuda-tile package, where installed): the same recipe (exp, one mma per
product, 128 x 64 blocks, the causal diagonal masked), a measure of what the
CUDA Tile IR toolchain reaches with its own frontend.

--forms times the forward in several of Tessera's forms, each set by the
environment knobs its kernels are compiled under: `default` (the default
mapper: on Hopper with tileiras the blocked tensor-core forward through CUDA
Tile IR), `ptx_blocked` (the blocked forward through the PTX path,
TESSERA_CUDA_TILE_DEFAULT=0 TESSERA_ATTENTION_BLOCKED=1) and `lane` (the
scalar-lane kernel, TESSERA_ATTENTION_BLOCKED=0). The ratio and the backward
use the first form.

--fp8 also times the fp8_e4m3 forward of the same values rounded to e4m3
(descales 1, a bf16 result; checked against torch's math backend on the
decoded values): its codes become bf16 values (exactly), so it runs the bf16
products (docs/design/0043-fp8-and-d256-blocked-attention.md).
"""

import os

import argparse

import numpy as np

import tessera
from gpu_timing import median_seconds as seconds


FORMS = {
    "default": {},
    "ptx_blocked": {"TESSERA_CUDA_TILE_DEFAULT": "0", "TESSERA_ATTENTION_BLOCKED": "1"},
    "lane": {"TESSERA_ATTENTION_BLOCKED": "0"},
}


KNOBS = ("TESSERA_CUDA_TILE_DEFAULT", "TESSERA_ATTENTION_BLOCKED", "TESSERA_ATTENTION_TILE",
         "TESSERA_CUDA_TILE_OCCUPANCY", "TESSERA_CUDA_TILE_LATENCY", "TESSERA_CUDA_TILE_EXP2")


def set_form(name):
    for knob in KNOBS:
        os.environ.pop(knob, None)
    if name in FORMS:
        os.environ.update(FORMS[name])
    else:  # NAME=VALUE+NAME=VALUE
        os.environ.update(dict(kv.split("=", 1) for kv in name.split("+")))


def cutile_fmha(torch):
    """The blocked forward in cuTile Python: a function (q, k, v, causal) -> o, or (None, why)."""
    try:
        import math

        import cuda.tile as ct
    except Exception as e:  # noqa: BLE001
        return None, f"cuda-tile not installed ({e})"
    const = ct.Constant[int]

    @ct.kernel(occupancy=2)
    def fmha(Q, K, V, O, scale: float, H: const, BM: const, BN: const, D: const, CAUSAL: ct.Constant[bool]):
        qb = ct.bid(0)
        bh = ct.bid(1)
        b = bh // H
        h = bh % H
        q = ct.load(Q, index=(b, h, qb, 0), shape=(1, 1, BM, D)).reshape((BM, D))
        m = ct.full((BM, 1), -math.inf, dtype=ct.float32)
        lsum = ct.full((BM, 1), 0.0, dtype=ct.float32)
        acc = ct.full((BM, D), 0.0, dtype=ct.float32)
        sk = K.shape[2]
        end = ct.cdiv(sk, BN)
        free = end
        if CAUSAL:
            end = ct.cdiv(min((qb + 1) * BM, sk), BN)
            free = (qb * BM) // BN
        rows = qb * BM + ct.arange(BM, dtype=ct.int32)[:, None]
        for j in range(0, end):
            kt = ct.load(K, index=(b, h, 0, j), shape=(1, 1, D, BN), order=(0, 1, 3, 2), latency=2).reshape((D, BN))
            s = ct.mma(q, kt, ct.full((BM, BN), 0.0, dtype=ct.float32)) * scale
            if CAUSAL and j >= free:
                cols = j * BN + ct.arange(BN, dtype=ct.int32)[None, :]
                s = ct.where(cols <= rows, s, -math.inf)
            mn = max(m, ct.max(s, axis=-1, keepdims=True))
            p = ct.exp(s - mn)
            alpha = ct.exp(m - mn)
            lsum = lsum * alpha + ct.sum(p, axis=-1, keepdims=True)
            v = ct.load(V, index=(b, h, j, 0), shape=(1, 1, BN, D), latency=4).reshape((BN, D))
            acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
            m = mn
        ct.store(O, index=(b, h, qb, 0), tile=(acc / lsum).reshape((1, 1, BM, D)).astype(O.dtype))

    def run(q, k, v, causal):
        o = torch.empty_like(q)
        bsz, heads, sq, d = q.shape
        ct.launch(torch.cuda.current_stream(), (sq // 128, bsz * heads, 1), fmha,
                  (q, k, v, o, d ** -0.5, heads, 128, 64, d, causal))
        return o
    return run, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--s", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--forms", nargs="+", default=["default"],
                    help=f"{', '.join(sorted(FORMS))}, or knobs as NAME=VALUE+NAME=VALUE (a sweep)")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--cutile", action="store_true")
    ap.add_argument("--fp8", action="store_true",
                    help="also time the fp8_e4m3 forward (unit descales, bf16 result) of the same values")
    ap.add_argument("--bwd-tile-ir", action="store_true",
                    help="a Mapper sends the attention backward (in its blocked form) through CUDA Tile IR")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sync = torch.cuda.synchronize
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    rng = np.random.default_rng(0)
    if args.bwd_tile_ir:
        class AttentionTileIR(tessera.Mapper):
            def choose_variant(self, op, arch):
                return "tile_ir" if not arch.is_cpu and op.startswith("flash_attn") else None
        tessera.runtime.set_mapper(AttentionTileIR())
        print("  backward: flash_attn ops through CUDA Tile IR (a Mapper)")
    print(f"flash_attn bf16 on {torch.cuda.get_device_name(0)}, B = {args.b}, H = {args.h}; TFLOP/s")
    for i, f in enumerate(args.forms):
        print(f"  form {i}: {f}")
    forms = " ".join(f"{'form ' + str(i):>11}" for i in range(len(args.forms)))
    cutile, why = cutile_fmha(torch) if args.cutile else (None, "")
    if args.cutile:
        print(f"  cuTile Python: {'the last column before the ratio' if cutile else 'not run: ' + why}")
    print(f"{'S':>5} {'D':>4} {'causal':>6} | {forms} {'best torch':>16} {'ratio':>6} | "
          f"{'tessera bwd':>11} {'cudnn bwd':>10} {'ratio':>6}")
    for s in args.s:
        for d in args.d:
            for causal in (False, True):
                shape = (args.b, args.h, s, d)
                host = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
                q, k, v, g = (tessera.tensor(x, dtype="bf16").to("cuda:0") for x in host)
                tq, tk, tv, tg = (torch.tensor(x, device="cuda:0", dtype=torch.bfloat16) for x in host)
                with sdpa_kernel(SDPBackend.MATH):
                    want = F.scaled_dot_product_attention(tq.float(), tk.float(), tv.float(), is_causal=causal)
                flops = 4.0 * args.b * args.h * s * s * d * (0.5 if causal else 1.0)
                fwd = {}
                for form in args.forms:
                    set_form(form)
                    got = tessera.ops.flash_attn(q, k, v, causal=causal).to("cpu").numpy().astype(np.float32)
                    err = np.max(np.abs(got - want.cpu().numpy()))
                    assert err < 2e-2, f"flash_attn {form} S={s} D={d} causal={causal}: max error {err}"
                    fwd[form] = seconds(lambda: tessera.ops.flash_attn(q, k, v, causal=causal), args.runs, sync)
                set_form(args.forms[0])
                first = fwd[args.forms[0]]
                fp8 = float("nan")
                if args.fp8:
                    q8, k8, v8 = (tessera.tensor(x, dtype="fp8_e4m3").to("cuda:0") for x in host[:3])
                    dec = [torch.tensor(t.to("cpu").numpy().astype(np.float32), device="cuda:0") for t in (q8, k8, v8)]
                    with sdpa_kernel(SDPBackend.MATH):
                        want8 = F.scaled_dot_product_attention(*dec, is_causal=causal).cpu().numpy()
                    got = tessera.ops.flash_attn(q8, k8, v8, causal=causal, descale=(1.0, 1.0, 1.0))
                    err = np.max(np.abs(got.to("cpu").numpy().astype(np.float32) - want8))
                    assert err < 2e-2, f"fp8 flash_attn S={s} D={d} causal={causal}: max error {err}"
                    fp8 = seconds(lambda: tessera.ops.flash_attn(q8, k8, v8, causal=causal, descale=(1.0, 1.0, 1.0)),
                                  args.runs, sync)
                ct_tf = float("nan")
                if cutile:
                    try:
                        got = cutile(tq, tk, tv, causal).float()
                        err = (got - want).abs().max().item()
                        assert err < 2e-2, f"cuTile fmha S={s} D={d}: max error {err}"
                        ct_tf = flops / seconds(lambda: cutile(tq, tk, tv, causal), args.runs, sync) / 1e12
                    except Exception as e:  # noqa: BLE001
                        print(f"  cuTile Python failed: {e}")
                bwd = float("nan")
                if not args.no_backward:
                    grad = tessera.jit(tessera.grad(
                        lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * g),
                        argnums=(0, 1, 2)))
                    # Checked first against torch's math backend in fp32 (the same bf16 inputs).
                    got = [t.to("cpu").numpy().astype(np.float64) for t in grad(q, k, v)]
                    a32 = [t.float().clone().requires_grad_() for t in (tq, tk, tv)]
                    with sdpa_kernel(SDPBackend.MATH):
                        o32 = F.scaled_dot_product_attention(*a32, is_causal=causal)
                    ref = [r.detach().cpu().numpy().astype(np.float64) for r in torch.autograd.grad(o32, a32, tg.float())]
                    for name, gv, rv in zip(("dq", "dk", "dv"), got, ref):
                        err = np.max(np.abs(gv - rv))
                        assert err <= 2.0 ** -6 * np.max(np.abs(rv)), \
                            f"flash_attn backward {name} S={s} D={d} causal={causal}: max error {err}"
                    bwd = max(seconds(lambda: grad(q, k, v), args.runs, sync) - first, 1e-9)
                theirs = {}
                for name, backend in backends.items():
                    try:
                        with sdpa_kernel(backend):
                            a = [t.clone().requires_grad_() for t in (tq, tk, tv)]
                            f = seconds(lambda: F.scaled_dot_product_attention(*a, is_causal=causal), args.runs, sync)

                            def both():
                                o = F.scaled_dot_product_attention(*a, is_causal=causal)
                                torch.autograd.grad(o, a, tg)
                            fb = seconds(both, args.runs, sync)
                        theirs[name] = (f, max(fb - f, 1e-9))
                    except RuntimeError:  # backend not available for this shape or machine
                        continue
                best = min(theirs, key=lambda n: theirs[n][0])
                cudnn = theirs.get("cudnn", (float("nan"), float("nan")))[1]
                tf = lambda fl, t: fl / t / 1e12  # noqa: E731
                ours = " ".join(f"{tf(flops, fwd[f]):>11.2f}" for f in args.forms)
                if args.cutile:
                    ours += f" {ct_tf:>8.2f} cuTile"
                if args.fp8:
                    ours += f" {tf(flops, fp8):>8.2f} fp8"
                print(f"{s:>5} {d:>4} {str(causal):>6} | {ours} "
                      f"{tf(flops, theirs[best][0]):>9.1f} {best:>6} {theirs[best][0] / first:>5.3f}x | "
                      f"{tf(2.5 * flops, bwd):>11.2f} {tf(2.5 * flops, cudnn):>10.1f} {cudnn / bwd:>5.3f}x", flush=True)

if __name__ == "__main__":
    main()
