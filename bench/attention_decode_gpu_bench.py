"""Attention for decoding (a few query rows against a long KV cache) on a CUDA device, next to
torch's scaled_dot_product_attention in the same run.

    python bench/attention_decode_gpu_bench.py [--b 1 8] [--hq 32] [--hkv 8] [--sq 1] [--sk 1024 8192 32768]
                                               [--d 128] [--runs 20]

bf16 q [B, Hq, Sq, D] against k, v [B, Hkv, Sk, D] (grouped-query attention), not causal (with
Sq = 1 the bottom-right causal mask hides nothing; torch's is_causal aligns top-left, so the two
would differ for Sq > 1). Tessera runs the op under jit (the executable: padding, kernels and
cuts, without eager dispatch) and under jit(capture_graph=True) (the launches replayed as a CUDA
graph, as a decode loop would run them); torch runs each SDPA backend this machine offers with
enable_gqa=True, and the best is the baseline. The figure is the median time of --runs calls after
a warm-up, each ended by a device synchronization, and the bandwidth of reading the KV cache once
(2 B Hkv Sk D bytes of bf16) in that time. Tessera's result is checked against torch's math backend
in fp32 first.
"""

import argparse

import numpy as np

import tessera
from gpu_timing import median_seconds as seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--sq", type=int, default=1)
    ap.add_argument("--sk", type=int, nargs="+", default=[1024, 8192, 32768])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sync = torch.cuda.synchronize
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    rng = np.random.default_rng(0)
    print(f"decode attention bf16 on {torch.cuda.get_device_name(0)}: Hq = {args.hq}, Hkv = {args.hkv}, "
          f"Sq = {args.sq}, D = {args.d}")
    print(f"{'B':>3} {'Sk':>6} | {'jit us':>8} {'graph us':>8} {'GB/s':>7} | {'best torch us':>13} {'backend':>9} "
          f"{'GB/s':>7} | {'ratio':>6}")
    for b in args.b:
        for sk in args.sk:
            host = [rng.standard_normal((b, h, s, args.d)).astype(np.float32)
                    for h, s in ((args.hq, args.sq), (args.hkv, sk), (args.hkv, sk))]
            q, k, v = (tessera.tensor(x, dtype="bf16").to("cuda:0") for x in host)
            tq, tk, tv = (torch.tensor(x, device="cuda:0", dtype=torch.bfloat16) for x in host)
            with sdpa_kernel(SDPBackend.MATH):
                want = F.scaled_dot_product_attention(tq.float(), tk.float(), tv.float(), enable_gqa=True)
            f = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v))
            got = f(q, k, v).to("cpu").numpy().astype(np.float32)
            err = np.max(np.abs(got - want.cpu().numpy()))
            assert err < 2e-2, f"decode attention B={b} Sk={sk}: max error {err}"
            plain = seconds(lambda: f(q, k, v), args.runs, sync)
            g = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v), capture_graph=True)
            assert g(q, k, v).to("cpu").numpy().tobytes() == f(q, k, v).to("cpu").numpy().tobytes()
            ours = seconds(lambda: g(q, k, v), args.runs, sync)
            theirs = {}
            for name, backend in backends.items():
                try:
                    with sdpa_kernel(backend):
                        theirs[name] = seconds(lambda: F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True),
                                               args.runs, sync)
                except RuntimeError:  # backend not available for this shape or machine
                    continue
            best = min(theirs, key=theirs.get)
            kv_bytes = 2.0 * b * args.hkv * sk * args.d * 2
            print(f"{b:>3} {sk:>6} | {plain * 1e6:>8.1f} {ours * 1e6:>8.1f} {kv_bytes / ours / 1e9:>7.0f} | "
                  f"{theirs[best] * 1e6:>13.1f} "
                  f"{best:>9} {kv_bytes / theirs[best] / 1e9:>7.0f} | {theirs[best] / ours:>5.3f}x", flush=True)


if __name__ == "__main__":
    main()
