"""The CUDA Tile IR target against the PTX path and cuBLAS, on one GPU.

    python bench/cuda_tile_bench.py [--sizes 4096 8192] [--runs 10]

Needs a GPU, tileiras (TESSERA_TILEIRAS or the pip wheels) and torch.

Rows, per size (bf16 A and B, fp32 C, M = N = K):
- tile_ir: the kernel-language GEMM over global tiles (128x128 output tile,
  K steps of 64, tile.mma) with target="cuda_tile": CUDA Tile IR, tileiras;
- ptx (same kernel): that kernel through the CUDA C++/NVRTC path;
- ptx (staged): the PTX path's own GEMM form (shared tiles, cp_async,
  tile.range(prefetch=2));
- tile_ir (staged): that staged kernel through CUDA Tile IR: its shared
  buffers, read only as whole tiles, become tile values, so tileiras stages
  the loads itself, with latency hint 2 from prefetch=2;
- tile_ir (grouped, prefetch=3): the global-tile GEMM with the output tiles
  visited in groups of 8 block rows (for L2 reuse, as cuBLAS and the cuTile
  sample do) and tile.range(prefetch=3) (latency hint 3);
- cuTile Python: the same GEMM written in cuTile Python (cuda.tile, 128x128x64
  tiles, groups of 8 block rows), where the cuda-tile package is installed;
- torch: torch.matmul of the same bf16 matrices (cuBLAS; bf16 output,
  fp32 accumulation).
Then the first compile of the GEMM through tileiras and through NVRTC, each
with an empty cache (lowering, compiler, load, one run). --latency-sweep
adds the staged and grouped kernels compiled with each latency hint
(TESSERA_CUDA_TILE_LATENCY) at the first size.

Then the same global-tile GEMM on fp8_e4m3 operands through tile_ir against
torch._scaled_mm (cuBLAS fp8) and the cuTile Python kernel on the same
operands (B row-major for both). Then @tessera.jit bf16 products (the
Schedule IR GEMM template, plain and with a bias + relu epilogue) through the
PTX path and the default mapper, against torch (--jit-gemm-only: just these). Then the memory-bound Schedule IR templates (fp32 [rows, cols]: softmax,
rmsnorm, a row sum, an elementwise add + relu) through @tessera.jit on the
PTX path (the default mapper) and on the CUDA Tile IR target (a Mapper
choosing "tile_ir"), against torch, with GB/s of the bytes each must move,
whether the two targets agree bit for bit, and the first compile of each;
then the default mapper's choice (which target it took, and its time).

Each launch from Python synchronizes, so every row (torch's too) is timed
as call + synchronize; the figure is the median of --runs after a warm-up.
Each result's largest difference from torch's fp32 product of the same
bf16 values is printed beside its time.
"""

import argparse
import os
import tempfile
import time

import numpy as np

import tessera
from gpu_timing import median_seconds


# The kernels as .tsr text: fresh kernel objects (empty in-memory caches) are
# made from it for the first-compile figures.
GLOBAL_TILES = """@kernel tile[(128,)]
def gemm_global(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + 127) // 128
    bm = (group_linear_id() // tiles_n) * 128
    bn = (group_linear_id() % tiles_n) * 128
    acc = tile.zeros((128, 128), f32)
    for k in range(0, K, 64):
        acc = tile.mma(tile.load(A, rows=(bm, 128), cols=(k, 64)), tile.load(B, rows=(k, 64), cols=(bn, 128)), acc=acc)
    tile.store(C, rows=(bm, 128), cols=(bn, 128), value=acc)
"""

# The same global-tile GEMM on fp8 (e4m3) operands, fp32 accumulation.
GLOBAL_TILES_FP8 = GLOBAL_TILES.replace("gemm_global", "gemm_global_fp8").replace("bf16[", "fp8_e4m3[")

STAGED = """@kernel tile[(128,)] shared(64_KiB)
def gemm_staged(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_n = (N + 127) // 128
    bm = (group_linear_id() // tiles_n) * 128
    bn = (group_linear_id() % tiles_n) * 128
    a = tshared.alloc[bf16]((128, 32))
    b = tshared.alloc[bf16]((32, 128))
    acc = tile.zeros((128, 128), f32)
    for k in tile.range(K, step=32, prefetch=2):
        cp_async.shared.global(a, A[bm:bm+128, k:k+32])
        cp_async.shared.global(b, B[k:k+32, bn:bn+128])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 128), cols=(bn, 128), value=acc)
"""


# The global-tile GEMM with the output tiles visited in groups of 8 block
# rows: consecutive tile blocks share B's column tiles and A's row tiles
# while they are in L2. prefetch=3 gives its loads latency hint 3 on the
# CUDA Tile IR target.
GROUPED = """@kernel tile[(128,)]
def gemm_grouped(A: bf16[M, K], B: bf16[K, N], C: mut f32[M, N]):
    tiles_m = (M + 127) // 128
    tiles_n = (N + 127) // 128
    g = group_linear_id()
    first = (g // (8 * tiles_n)) * 8
    rows = min(tiles_m - first, 8)
    bm = (first + (g % (8 * tiles_n)) % rows) * 128
    bn = ((g % (8 * tiles_n)) // rows) * 128
    acc = tile.zeros((128, 128), f32)
    for k in tile.range(K, step=64, prefetch=3):
        acc = tile.mma(tile.load(A, rows=(bm, 128), cols=(k, 64)), tile.load(B, rows=(k, 64), cols=(bn, 128)), acc=acc)
    tile.store(C, rows=(bm, 128), cols=(bn, 128), value=acc)
"""


def cutile_gemm(torch):
    """The GEMM in cuTile Python (cuda.tile), or (None, why) without it."""
    try:
        import cuda.tile as ct
    except ImportError as e:
        return None, f"cuda-tile not installed ({e})"
    const = ct.Constant[int]

    @ct.kernel
    def mm(A, B, C, tm: const, tn: const, tk: const):
        m = A.shape[0]
        n = B.shape[1]
        tiles_m = ct.cdiv(m, tm)
        tiles_n = ct.cdiv(n, tn)
        g = ct.bid(0)
        first = (g // (8 * tiles_n)) * 8
        rows = min(tiles_m - first, 8)
        bm = first + (g % (8 * tiles_n)) % rows
        bn = (g % (8 * tiles_n)) // rows
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
            a = ct.load(A, index=(bm, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(B, index=(k, bn), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(bm, bn), tile=acc)

    def run(a, b, c):
        grid = (((a.shape[0] + 127) // 128) * ((b.shape[1] + 127) // 128), 1, 1)
        ct.launch(torch.cuda.current_stream(), grid, mm, (a, b, c, 128, 128, 64))
    return run, None


def make(source, target):
    """A new kernel object (its own in-memory caches) for `target`."""
    from tessera.kernel import Kernel
    return Kernel(tessera._C.kernels_from_source(source, "cuda_tile_bench.tsr")[0], target=target)


def first_compile(source, target, a, b, c, grid):
    """Seconds of the first launch of a fresh kernel object with an empty disk cache."""
    k = make(source, target)
    old = os.environ.get("TESSERA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        os.environ["TESSERA_CACHE_DIR"] = d
        try:
            t0 = time.perf_counter()
            k[grid](a, b, c)
            return time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["TESSERA_CACHE_DIR"]
            else:
                os.environ["TESSERA_CACHE_DIR"] = old


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--memory-only", action="store_true", help="skip the GEMMs")
    ap.add_argument("--jit-gemm-only", action="store_true", help="only the @tessera.jit GEMM rows")
    ap.add_argument("--cases", nargs="+", default=None, help="memory-bound cases to run (default: all)")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--latency-sweep", type=int, nargs="*", default=None,
                    help="latency hints to compile the staged and grouped kernels with (first size only)")
    args = ap.parse_args()
    import torch

    dev = "cuda:0"
    sync = torch.cuda.synchronize
    usable, version, why = tessera._C._tileiras()
    if not usable:
        raise SystemExit(f"tileiras unusable: {why or 'not found'}")
    print(f"device: {torch.cuda.get_device_name(0)}; tileiras {version}; torch {torch.__version__}")
    rng = np.random.default_rng(0)
    if args.memory_only:
        memory_bound(args, torch, rng)
        return
    if args.jit_gemm_only:
        jit_gemm(args, torch, rng)
        return

    # First compiles first: nothing of either kernel is in any cache yet.
    n0 = 512
    a0 = tessera.tensor(rng.standard_normal((n0, n0)).astype(np.float32), dtype="bf16").to(dev)
    c0 = tessera.tensor(np.zeros((n0, n0), np.float32)).to(dev)
    grid0 = (n0 // 128) ** 2
    t_tile = first_compile(GLOBAL_TILES, "cuda_tile", a0, a0, c0, grid0)
    t_ptx = first_compile(GLOBAL_TILES, "cuda", a0, a0, c0, grid0)
    t_staged = first_compile(STAGED, "cuda", a0, a0, c0, grid0)
    kernels = (("tile_ir", make(GLOBAL_TILES, "cuda_tile")), ("ptx (same kernel)", make(GLOBAL_TILES, "cuda")),
               ("ptx (staged)", make(STAGED, "cuda")), ("tile_ir (staged)", make(STAGED, "cuda_tile")),
               ("tile_ir (grouped, prefetch=3)", make(GROUPED, "cuda_tile")))
    cutile, cutile_why = cutile_gemm(torch)

    print(f"\n{'GEMM bf16 -> fp32':<36}{'size':>6}{'ms':>10}{'TFLOP/s':>10}{'vs torch':>10}{'max |diff| vs torch':>22}")
    for n in args.sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ta = tessera.tensor(a, dtype="bf16").to(dev)
        tb = tessera.tensor(b, dtype="bf16").to(dev)
        xa = torch.tensor(a, device=dev).to(torch.bfloat16)  # the same round-to-nearest-even values
        xb = torch.tensor(b, device=dev).to(torch.bfloat16)
        ref = torch.matmul(xa.float(), xb.float()).cpu().numpy()  # fp32 accumulation, no TF32
        grid = (n // 128) ** 2
        flops = 2.0 * n ** 3
        t_torch = median_seconds(lambda: torch.matmul(xa, xb), args.runs, sync)
        diff_torch = float(np.abs(torch.matmul(xa, xb).float().cpu().numpy() - ref).max())
        rows = [("torch bf16 matmul (cuBLAS)", t_torch, diff_torch)]
        for label, k in kernels:
            c = tessera.tensor(np.zeros((n, n), np.float32)).to(dev)
            k[grid](ta, tb, c)
            diff = float(np.abs(c.numpy() - ref).max())
            rows.append((label, median_seconds(lambda: k[grid](ta, tb, c), args.runs, sync), diff))
        if args.latency_sweep and n == args.sizes[0]:
            for latency in args.latency_sweep:
                os.environ["TESSERA_CUDA_TILE_LATENCY"] = str(latency)
                for label, source in (("staged", STAGED), ("grouped", GROUPED)):
                    k = make(source, "cuda_tile")
                    c = tessera.tensor(np.zeros((n, n), np.float32)).to(dev)
                    k[grid](ta, tb, c)
                    diff = float(np.abs(c.numpy() - ref).max())
                    rows.append((f"tile_ir ({label}, latency {latency})",
                                 median_seconds(lambda: k[grid](ta, tb, c), args.runs, sync), diff))
                del os.environ["TESSERA_CUDA_TILE_LATENCY"]
        if cutile is None:
            print(f"{'cuTile Python':<28}{n:>6}  not run: {cutile_why}")
        else:
            xc = torch.zeros((n, n), dtype=torch.float32, device=dev)
            cutile(xa, xb, xc)
            diff = float(np.abs(xc.cpu().numpy() - ref).max())
            rows.append(("cuTile Python", median_seconds(lambda: cutile(xa, xb, xc), args.runs, sync), diff))
        for label, t, diff in rows:
            print(f"{label:<36}{n:>6}{t * 1e3:>10.3f}{flops / t / 1e12:>10.1f}{t_torch / t:>9.2f}x{diff:>22.3g}")

    print(f"\nfirst compile (empty cache, {n0}^3 launch included): tileiras {t_tile:.2f} s, "
          f"NVRTC same kernel {t_ptx:.2f} s, NVRTC staged kernel {t_staged:.2f} s")
    fp8_gemm(args, torch, rng)
    jit_gemm(args, torch, rng)
    memory_bound(args, torch, rng)


def fp8_gemm(args, torch, rng):
    """The global-tile GEMM on fp8_e4m3 operands through tile_ir, against
    torch._scaled_mm (cuBLAS fp8, unit scales, fp32 output)."""
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    k = make(GLOBAL_TILES_FP8, "cuda_tile")
    cutile, cutile_why = cutile_gemm(torch)
    print(f"\n{'GEMM fp8_e4m3 -> fp32':<28}{'size':>6}{'ms':>10}{'TFLOP/s':>10}{'vs torch':>10}{'max |diff| vs fp32 ref':>24}")
    one = torch.tensor(1.0, device=dev)
    for n in args.sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ta = tessera.tensor(a, dtype="fp8_e4m3").to(dev)
        tb = tessera.tensor(b, dtype="fp8_e4m3").to(dev)
        xa = torch.tensor(a, device=dev).to(torch.float8_e4m3fn)
        xb = torch.tensor(b, device=dev).to(torch.float8_e4m3fn)
        xb_cols = xb.t().contiguous().t()  # cuBLAS's fp8 GEMM takes B column-major
        ref = torch.matmul(xa.float(), xb.float()).cpu().numpy()
        flops = 2.0 * n ** 3
        try:
            mm = lambda: torch._scaled_mm(xa, xb_cols, scale_a=one, scale_b=one, out_dtype=torch.float32)
            t_torch = median_seconds(mm, args.runs, sync)
            rows = [("torch._scaled_mm (cuBLAS)", t_torch, float(np.abs(mm().cpu().numpy() - ref).max()))]
        except (RuntimeError, AttributeError) as e:
            t_torch = None
            rows = []
            print(f"{'torch._scaled_mm':<28}{n:>6}  not run: {str(e).splitlines()[0]}")
        c = tessera.tensor(np.zeros((n, n), np.float32)).to(dev)
        grid = (n // 128) ** 2
        k[grid](ta, tb, c)
        rows.append(("tile_ir fp8", median_seconds(lambda: k[grid](ta, tb, c), args.runs, sync),
                     float(np.abs(c.numpy() - ref).max())))
        if cutile is None:
            print(f"{'cuTile Python fp8':<28}{n:>6}  not run: {cutile_why}")
        else:
            xc = torch.zeros((n, n), dtype=torch.float32, device=dev)
            cutile(xa, xb, xc)  # B row-major, as tile_ir's
            rows.append(("cuTile Python fp8", median_seconds(lambda: cutile(xa, xb, xc), args.runs, sync),
                         float(np.abs(xc.cpu().numpy() - ref).max())))
        for label, t, diff in rows:
            ratio = f"{t_torch / t:>9.2f}x" if t_torch else f"{'':>10}"
            print(f"{label:<28}{n:>6}{t * 1e3:>10.3f}{flops / t / 1e12:>10.1f}{ratio}{diff:>24.3g}")


def jit_gemm(args, torch, rng):
    """@tessera.jit bf16 products (the Schedule IR GEMM template) through the
    PTX path and the default mapper (tile_ir on Hopper with tileiras), against
    torch (cuBLAS), plain and with a bias + relu epilogue."""
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    print(f"\n{'jit GEMM bf16 (fp32 acc)':<28}{'size':>6}{'target':>16}{'ms':>10}{'TFLOP/s':>10}{'vs torch':>10}"
          f"{'first call s':>14}")
    for n in args.sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        c = rng.standard_normal(n).astype(np.float32)
        ta, tb, tc = (tessera.tensor(v, dtype="bf16").to(dev) for v in (a, b, c))
        xa, xb, xc = (torch.tensor(v, device=dev).to(torch.bfloat16) for v in (a, b, c))
        flops = 2.0 * n ** 3
        for name, fn, tfn in (("matmul", lambda x, y, z: tessera.ops.matmul(x, y), lambda x, y, z: x @ y),
                              ("matmul+bias+relu", lambda x, y, z: tessera.ops.relu(tessera.ops.matmul(x, y) + z),
                               lambda x, y, z: torch.relu(x @ y + z))):
            t_torch = median_seconds(lambda: tfn(xa, xb, xc), args.runs, sync)
            print(f"{name:<28}{n:>6}{'torch':>16}{t_torch * 1e3:>10.3f}{flops / t_torch / 1e12:>10.1f}{1.0:>9.2f}x")
            for target in ("ptx", "default"):
                tessera.runtime.set_mapper(MAPPERS[target]())
                try:
                    f = tessera.jit(fn)
                    t0 = time.perf_counter()
                    f(ta, tb, tc)
                    sync()
                    first = time.perf_counter() - t0
                    t = median_seconds(lambda: f(ta, tb, tc), args.runs, sync)
                    chose = {k["family"]: k["variant"] for k in f.executable().kernels}.get("gemm", "?")
                    label = f"{target} ({'ptx' if chose == 'tile' else chose})"
                    print(f"{'':<28}{n:>6}{label:>16}{t * 1e3:>10.3f}{flops / t / 1e12:>10.1f}{t_torch / t:>9.2f}x"
                          f"{first:>14.2f}")
                except tessera.TesseraError as e:
                    print(f"{'':<28}{n:>6}{target:>16}  not run: {str(e).splitlines()[0]}")
                finally:
                    tessera.runtime.set_mapper(tessera.Mapper())


class TileIRMapper(tessera.Mapper):
    def choose_variant(self, op, arch):
        return "tile_ir" if not arch.is_cpu else None


class PTXMapper(tessera.Mapper):
    def choose_variant(self, op, arch):
        return "ptx" if not arch.is_cpu else None


MAPPERS = {"ptx": PTXMapper, "tile_ir": TileIRMapper, "default": tessera.Mapper}


def memory_bound(args, torch, rng):
    """The Schedule IR templates on both NVIDIA targets against torch."""
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    cases = [  # name, Tessera fn, torch fn, bytes moved per element of x (read x once, write the result)
        ("softmax", lambda x: tessera.ops.softmax_safe(x, axis=-1), lambda x: torch.softmax(x, -1), 8),
        ("rmsnorm", lambda x: tessera.ops.rmsnorm_safe(x, axis=-1),
         lambda x: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6), 8),
        ("sum axis -1", lambda x: tessera.ops.sum(x, axis=-1), lambda x: x.sum(-1), 4),
        ("add + relu", lambda x: tessera.ops.relu(x + x * 0.5), lambda x: torch.relu(x + x * 0.5), 8),
    ]
    if args.cases:
        cases = [c for c in cases if c[0].split()[0] in args.cases]
    rows, cols = args.rows, args.cols
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    tx = tessera.tensor(x).to(dev)
    xt = torch.tensor(x, device=dev)
    nbytes = rows * cols
    print(f"\n{'fp32 ' + str(rows) + 'x' + str(cols):<16}{'target':<10}{'ms':>9}{'GB/s':>9}{'vs torch':>10}"
          f"{'first call s':>14}{'same bits':>11}")
    for name, fn, tfn, per in cases:
        t_torch = median_seconds(lambda: tfn(xt), args.runs, sync)
        results = {}
        for target in ("ptx", "tile_ir", "default"):
            old = os.environ.get("TESSERA_CACHE_DIR")
            with tempfile.TemporaryDirectory() as d:
                os.environ["TESSERA_CACHE_DIR"] = d
                tessera.runtime.set_mapper(MAPPERS[target]())
                try:
                    f = tessera.jit(fn)
                    t0 = time.perf_counter()
                    out = f(tx)
                    sync()
                    first = time.perf_counter() - t0
                    t = median_seconds(lambda: f(tx), args.runs, sync)
                    chose = "tile_ir" if '"tile_ir"' in f.inspect_ir("schedule") else "ptx"
                    results[target] = (t, first, out.numpy(), chose)
                except tessera.TesseraError as e:  # a template the target cannot express: say so
                    results[target] = (None, None, str(e).splitlines()[0], None)
                finally:
                    tessera.runtime.set_mapper(tessera.Mapper())
                    if old is None:
                        del os.environ["TESSERA_CACHE_DIR"]
                    else:
                        os.environ["TESSERA_CACHE_DIR"] = old
        ok = (results["ptx"][0] is not None and results["tile_ir"][0] is not None and
              np.array_equal(results["ptx"][2].view(np.uint32), results["tile_ir"][2].view(np.uint32)))
        print(f"{name:<16}{'torch':<10}{t_torch * 1e3:>9.3f}{nbytes * per / t_torch / 1e9:>9.0f}{1.0:>9.2f}x")
        for target in ("ptx", "tile_ir", "default"):
            t, first, out, chose = results[target]
            label = f"default ({chose})" if target == "default" else target
            if t is None:
                print(f"{'':<16}{label:<10}  not run: {out}")
                continue
            print(f"{'':<16}{label:<10}{t * 1e3:>9.3f}{nbytes * per / t / 1e9:>9.0f}{t_torch / t:>9.2f}x"
                  f"{first:>14.2f}{('yes' if ok else 'NO'):>11}")


if __name__ == "__main__":
    main()
