"""flash_attn on a CUDA device next to torch's scaled_dot_product_attention, in the same run.

    python bench/flash_attn_gpu_bench.py [--b 1] [--h 8] [--s 2048 8192] [--d 64 128] [--runs 3]
                                         [--forms default lane ptx_blocked] [--no-backward]

bf16 q/k/v [B, H, S, D] on cuda:0, causal and not. Tessera runs the eager
op (its compiled attention kernels through the CUDA backend) and jit(grad)
of sum(flash_attn(q, k, v) * g) for the backward; torch runs
scaled_dot_product_attention under each SDPA backend this machine offers
(flash, cuDNN, memory-efficient), forward and forward+backward.
TFLOP/s counts 4 * B * H * S^2 * D flops forward (half when causal) and 2.5x
that backward, the usual convention; backward times are (forward+backward)
minus forward for both sides. Tessera's output is checked against torch's
math backend (fp32) first. Each time is the median of --runs calls after a
warm-up, ended by a device synchronization.

--forms times the forward in several of Tessera's forms, each set by the
environment knobs its kernels are compiled under: `default` (the default
mapper: on Hopper with tileiras the blocked tensor-core forward through CUDA
Tile IR), `ptx_blocked` (the blocked forward through the PTX path,
TESSERA_CUDA_TILE_DEFAULT=0 TESSERA_ATTENTION_BLOCKED=1) and `lane` (the
scalar-lane kernel, TESSERA_ATTENTION_BLOCKED=0). The ratio and the backward
use the first form.
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
         "TESSERA_CUDA_TILE_OCCUPANCY", "TESSERA_CUDA_TILE_LATENCY")


def set_form(name):
    for knob in KNOBS:
        os.environ.pop(knob, None)
    if name in FORMS:
        os.environ.update(FORMS[name])
    else:  # NAME=VALUE+NAME=VALUE
        os.environ.update(dict(kv.split("=", 1) for kv in name.split("+")))


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
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sync = torch.cuda.synchronize
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    rng = np.random.default_rng(0)
    print(f"flash_attn bf16 on {torch.cuda.get_device_name(0)}, B = {args.b}, H = {args.h}; TFLOP/s")
    for i, f in enumerate(args.forms):
        print(f"  form {i}: {f}")
    forms = " ".join(f"{'form ' + str(i):>11}" for i in range(len(args.forms)))
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
                bwd = float("nan")
                if not args.no_backward:
                    grad = tessera.jit(tessera.grad(
                        lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * g),
                        argnums=(0, 1, 2)))
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
                print(f"{s:>5} {d:>4} {str(causal):>6} | {ours} "
                      f"{tf(flops, theirs[best][0]):>9.1f} {best:>6} {theirs[best][0] / first:>5.3f}x | "
                      f"{tf(2.5 * flops, bwd):>11.2f} {tf(2.5 * flops, cudnn):>10.1f} {cudnn / bwd:>5.3f}x", flush=True)

if __name__ == "__main__":
    main()
