"""Collectives on the GPUs of one host, ratios measured in the same run.

    python bench/nccl_bench.py [--sizes 4K,1M,256M,1G] [--gpus 2,4]

For every GPU count and size:
- check: Tessera's nccl backend against its local backend on the same
  inputs (allreduce, reduce_scatter, all_gather, all_to_all, broadcast; fp32
  and bf16), element by element (the bits of every code);
- bus bandwidth by the usual definitions (allreduce: bytes * 2(n-1)/n / time)
  of Tessera's deterministic (rank-order) allreduce, its native one
  (NCCL's own, algorithm "native") and torch.distributed's all_reduce on
  NCCL (one process per GPU), in the same run.
Then a Megatron MLP (tp over the GPUs) per step, nccl against one GPU.
Prints one table; NCCL_NVLS_ENABLE=0 is set for every process.
"""

import argparse
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import _C, dist  # noqa: E402


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def run_ranks(n, fn):
    out, err = [None] * n, [None] * n

    def body(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001
            err[r] = e
    ts = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for e in err:
        if e is not None:
            raise e
    return out


def sync(n):
    for r in range(n):
        _C._cuda_synchronize(r)


def check(n, nbytes, dtype, only=None):
    """The five collectives (or `only` those named) on nccl and local: the number of mismatching codes."""
    es = 4 if dtype == "fp32" else 2
    elems = max(n, nbytes // es)
    rng = np.random.default_rng(n * 7 + elems % 1000)
    host = [tessera.tensor(rng.standard_normal(elems).astype(np.float32), dtype) for _ in range(n)]
    gpu = [h.to(f"cuda:{r}") for r, h in enumerate(host)]
    nccl = _C.nccl_communicator("x", [f"cuda:{r}" for r in range(n)], timeout=600)
    local = _C.local_communicator("x", [f"cpu:{r}" for r in range(n)], timeout=600)
    calls = {
        "allreduce": lambda c, r, x: c.allreduce(r, x, "sum"),
        "reduce_scatter": lambda c, r, x: c.reduce_scatter(r, x, 0, "sum"),
        "all_gather": lambda c, r, x: c.all_gather(r, x, 0),
        "all_to_all": lambda c, r, x: c.all_to_all(r, x, 0, 0),
        "broadcast": lambda c, r, x: c.broadcast(r, x, n - 1),
    }
    bad = {}
    for name, call in calls.items():
        if only and name not in only:
            continue
        got = run_ranks(n, lambda r: call(nccl, r, gpu[r]).to("cpu"))
        want = run_ranks(n, lambda r: call(local, r, host[r]))
        bad[name] = sum(int(np.count_nonzero(g.codes() != w.codes())) for g, w in zip(got, want))
    return bad


HOST_US = {}  # (n, bytes, algorithm, exchange) -> microseconds per call spent queueing


def tessera_busbw(n, nbytes, algorithm, reps):
    elems = nbytes // 4
    comm = _C.nccl_communicator("x", [f"cuda:{r}" for r in range(n)], timeout=600)
    xs = [tessera.tensor(np.ones(elems, np.float32)).to(f"cuda:{r}") for r in range(n)]

    def loop(r, k):
        for _ in range(k):
            comm.allreduce(r, xs[r], "sum", algorithm)
    run_ranks(n, lambda r: loop(r, 2))
    sync(n)
    t0 = time.perf_counter()
    run_ranks(n, lambda r: loop(r, reps))
    host = (time.perf_counter() - t0) / reps  # queueing alone: the host's cost per call
    sync(n)
    t = (time.perf_counter() - t0) / reps
    HOST_US[(n, nbytes, algorithm, os.environ.get("TESSERA_NCCL_EXCHANGE", ""))] = host * 1e6
    return nbytes / t * 2 * (n - 1) / n / 1e9, t


def torch_worker(rank, n, sizes, reps, init, queue):
    import torch
    import torch.distributed as td
    torch.cuda.set_device(rank)
    td.init_process_group("nccl", init_method=init, rank=rank, world_size=n)
    res = {}
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=f"cuda:{rank}")
        for _ in range(2):
            td.all_reduce(x)
        torch.cuda.synchronize()
        td.barrier()
        t0 = time.perf_counter()
        for _ in range(reps[nbytes]):
            td.all_reduce(x)
        torch.cuda.synchronize()
        res[nbytes] = (time.perf_counter() - t0) / reps[nbytes]
    if rank == 0:
        queue.put(res)
    td.destroy_process_group()


def torch_busbw(n, sizes, reps):
    try:
        import torch.multiprocessing as mp
    except ImportError:
        return None
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = "file://" + tempfile.mktemp(prefix="tessera_nccl_bench_")
    procs = [ctx.Process(target=torch_worker, args=(r, n, sizes, reps, init, q)) for r in range(n)]
    for p in procs:
        p.start()
    res = q.get(timeout=600)
    for p in procs:
        p.join(60)
    return {s: (s / t * 2 * (n - 1) / n / 1e9, t) for s, t in res.items()}


def megatron_step(n, reps=20):
    """ms per step of a tp MLP (x[64, 1024] @ w1[1024, 4096] -> gelu -> @ w2) over n GPUs."""
    devices = [f"cuda:{r}" for r in range(n)]
    m = dist.mesh(devices=devices, axes=("tp",), shape=(n,))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    w1 = (rng.standard_normal((1024, 4096)) / 32).astype(np.float32)
    w2 = (rng.standard_normal((4096, 1024)) / 64).astype(np.float32)
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))

    @tessera.jit
    def mlp(x, w1, w2):
        return tessera.ops.matmul(tessera.ops.gelu(tessera.ops.matmul(x, w1)), w2)
    args = (dist.tensor(x, mesh=m), dist.tensor(w1, layout=col, mesh=m), dist.tensor(w2, layout=row, mesh=m))
    y = mlp(*args)
    y.numpy()
    sync(n)
    t0 = time.perf_counter()
    for _ in range(reps):
        y = mlp(*args)
    sync(n)
    return (time.perf_counter() - t0) / reps * 1e3, y.numpy()


def dp_row(total):
    """The microbatched DP recipe (examples/dp_training.py): 20 steps at dp = 1, 2, 4 on the GPUs."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import dp_training
    x, t, w1, w2 = dp_training.problem(batch=256, d_in=64, hidden=256, d_out=16)
    devices = [f"cuda:{r}" for r in range(total)]
    runs, times = {}, {}
    for dp in [d for d in (1, 2, 4) if d <= total]:
        t0 = time.perf_counter()
        runs[dp] = dp_training.dp_train_bitwise(x, t, w1, w2, steps=20, dp=dp, microbatches=4, devices=devices)
        times[dp] = (time.perf_counter() - t0) / 20 * 1e3
    ref = runs[1][0]
    same = all(r[0] == ref[0] and np.array_equal(r[1], ref[1]) and np.array_equal(r[2], ref[2])
               for dp in runs for r in runs[dp])
    return (f"dp training (4 microbatches, 20 steps, dp={','.join(map(str, runs))}): losses and weights "
            f"{'bitwise equal' if same else 'DIFFER'}; ms/step " + ", ".join(f"dp={d}: {v:.1f}" for d, v in times.items()))


# NCCL settings tried for the deterministic allreduce's send/recv exchange
# (TESSERA_NCCL_EXCHANGE=nccl), in a process of their own (NCCL reads them at
# init). Each changed it by at most 1% on 4 H100s.
TUNINGS = ["NCCL_P2P_NVL_CHUNKSIZE=1048576", "NCCL_NCHANNELS_PER_PEER=8", "NCCL_MIN_P2P_NCHANNELS=16"]


def tuned_rows(n, sizes):
    import subprocess
    rows = []
    for tuning in TUNINGS:
        env = dict(os.environ, **dict(kv.split("=") for kv in tuning.split()))
        cmd = [sys.executable, os.path.abspath(__file__), "--busbw-only", ",".join(str(s) for s in sizes),
               "--gpus", str(n)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        for line in out.stdout.splitlines():
            if line.startswith("busbw"):
                rows.append(f"  {tuning}: {line}")
        if out.returncode:
            rows.append(f"  {tuning}: failed ({out.stderr.strip().splitlines()[-1:]})")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--busbw-only", default="")
    ap.add_argument("--sizes", default="4K,1M,64M,256M,1G")
    ap.add_argument("--check-sizes", default="4K,1M,32M")
    ap.add_argument("--check-big", default="1G", help="fp32 allreduce only, checked at this size too")
    ap.add_argument("--gpus", default="")
    ap.add_argument("--tunings", action="store_true", help="also try NCCL p2p settings (a process each)")
    ap.add_argument("--allreduce-only", action="store_true", help="only the allreduce bandwidth rows (no checks, no steps)")
    a = ap.parse_args()
    total = _C._cuda_device_count() if _C._cuda_available() else 0
    counts = [int(c) for c in a.gpus.split(",") if c] or [c for c in (2, 4, 8) if c <= total]
    if total < 2 or not _C.nccl_available():
        print(f"nccl_bench: needs 2 GPUs and NCCL (found {total}; {_C.nccl_unavailable_reason()})")
        return 0
    if a.busbw_only:
        for s in [int(v) for v in a.busbw_only.split(",")]:
            for n in counts:
                det, _ = tessera_busbw(n, s, "rank_order", 20)  # the exchange the environment selects
                print(f"busbw n={n} {s >> 20} MiB deterministic {det:.1f} GB/s")
        return 0
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    reps = {s: max(20, min(200, (1 << 34) // max(s, 1))) for s in sizes}
    rows = []
    failed = False
    for n in counts:
        for s in [] if a.allreduce_only else [parse_size(c) for c in a.check_sizes.split(",") if c]:
            for dtype in ("fp32", "bf16"):
                bad = check(n, s, dtype)
                ok = all(v == 0 for v in bad.values())
                failed |= not ok
                rows.append(f"check n={n} {s >> 10:>8} KiB {dtype:5} "
                            + ("all five collectives bitwise equal to local" if ok else f"MISMATCH {bad}"))
        if a.check_big and not a.allreduce_only:
            s = parse_size(a.check_big)
            bad = check(n, s, "fp32", only=("allreduce",))
            failed |= bad["allreduce"] != 0
            rows.append(f"check n={n} {s >> 10:>8} KiB fp32  allreduce " +
                        ("bitwise equal to local" if bad["allreduce"] == 0 else f"MISMATCH {bad}"))
        theirs = torch_busbw(n, sizes, reps)
        for s in sizes:
            # The deterministic allreduce with its default exchange and each of
            # its three: NCCL send/recv, peer reads inside the combining kernel
            # ("peer"), the same kernel also writing every member's result ("push").
            ex = {}
            for exchange in ("nccl", "peer", "push"):
                os.environ["TESSERA_NCCL_EXCHANGE"] = exchange
                ex[exchange], _ = tessera_busbw(n, s, "rank_order", reps[s])
            del os.environ["TESSERA_NCCL_EXCHANGE"]
            det, t_det = tessera_busbw(n, s, "rank_order", reps[s])  # the default exchange
            nat, _ = tessera_busbw(n, s, "native", reps[s])
            host = HOST_US[(n, s, "rank_order", "")]
            line = (f"allreduce n={n} {s >> 10:>8} KiB  tessera det {det:7.1f} GB/s ({t_det * 1e6:9.1f} us, "
                    f"host {host:6.1f} us; exchanges: send/recv {ex['nccl']:7.1f}, peer {ex['peer']:7.1f}, "
                    f"push {ex['push']:7.1f})  native {nat:7.1f}")
            if theirs:
                tb, _ = theirs[s]
                line += f"  torch {tb:7.1f} GB/s  det/torch {det / tb:5.2f}x  native/torch {nat / tb:5.2f}x"
            rows.append(line)
        if a.tunings:
            rows.extend(tuned_rows(n, [s for s in sizes if s >= (256 << 20)]))
        if a.allreduce_only:
            continue
        ms, y = megatron_step(n)
        ms1, y1 = megatron_step(1)
        rows.append(f"megatron mlp tp={n}: {ms:.2f} ms/step vs 1 GPU {ms1:.2f} ms/step ({ms1 / ms:.2f}x); "
                    f"max |diff| vs 1 GPU {np.max(np.abs(y - y1)):.2e}")
    if not a.allreduce_only:
        rows.append(dp_row(total))
        failed |= "DIFFER" in rows[-1]
    print("\n== nccl bench (busbw = bytes * 2(n-1)/n / time)")
    for r in rows:
        print("  " + r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
