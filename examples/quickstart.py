"""Tessera quickstart: numerics as types, Graph IR, autodiff and tile kernels.

Runs on the CPU. Shows the storage dtypes, a numerics policy in both its
Python and text forms, exact conversions with three rounding modes, and the
OCP MX and NVFP4 block-scaled formats with the error each gives on the same
data; then eager ops and a @jit function with its Graph IR; gradients of a
small network (checked against finite differences); and the specification's
tile kernels compiled to host code and run. Every number printed is computed
here, by Tessera's C++ core.
"""

import math

import numpy as np

import tessera
from tessera import numerics, ops


def main() -> None:
    print(tessera.info())

    policy = tessera.fp8_e4m3 @ tessera.accum(tessera.fp32) @ tessera.stochastic_round
    print("policy (Python form):", policy)
    print("policy (text form):  ", tessera.dtype("fp8_e4m3 @accum(fp32) @stochastic_round") == policy)

    print("\nA few values in every small float format (round to nearest even):")
    x = np.array([0.1, 1.0, 3.3, 100.0, 500.0, -7.9], dtype=np.float32)
    print(f"  {'input':>10}", "".join(f"{v:>10.4g}" for v in x))
    for name in ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1"]:
        back = numerics.decode(numerics.encode(x, name), name)
        print(f"  {name:>10}", "".join(f"{v:>10.4g}" for v in back))

    print("\nRounding 0.3 into fp8_e4m3 (neighbours 0.28125 and 0.3125), 100000 times:")
    v = np.full(100_000, 0.3, dtype=np.float32)
    for rounding in ["nearest_even", "toward_zero", "stochastic"]:
        mean = numerics.decode(numerics.encode(v, "fp8_e4m3", rounding=rounding, seed=1), "fp8_e4m3").mean()
        print(f"  {rounding:>13}: mean {mean:.5f}")

    rng = np.random.default_rng(0)
    data = (rng.standard_normal((256, 256)) * np.exp(rng.uniform(-4, 4, (256, 1)))).astype(np.float32)
    print("\nBlock-scaled formats on a 256x256 matrix with rows of very different scales:")
    print(f"  {'format':>22} {'bits/value':>10} {'relative RMS error':>20}")
    for elem, bits in [("fp8_e4m3", 8), ("fp6_e2m3", 6), ("fp4_e2m1", 4)]:
        codes, scales = numerics.quantize_mx(data, elem=elem)
        back = numerics.dequantize_mx(codes, scales, elem=elem)
        err = np.sqrt(np.mean((back - data) ** 2) / np.mean(data ** 2))
        print(f"  {'MX ' + elem:>22} {bits + 8 / 32:>10.2f} {err:>20.4f}")
    codes, scales, tensor_scale = numerics.quantize_nvfp4(data)
    back = numerics.dequantize_nvfp4(codes, scales, tensor_scale)
    err = np.sqrt(np.mean((back - data) ** 2) / np.mean(data ** 2))
    print(f"  {'NVFP4':>22} {4 + 8 / 16:>10.2f} {err:>20.4f}")
    plain = numerics.decode(numerics.encode(data, "fp4_e2m1", overflow="saturate"), "fp4_e2m1")
    err = np.sqrt(np.mean((plain - data) ** 2) / np.mean(data ** 2))
    print(f"  {'fp4_e2m1, no scaling':>22} {4:>10.2f} {err:>20.4f}")

    try:
        tessera.dtype("fp8_e4m3 @acum(fp32)")
    except tessera.ParseError as error:
        print("\nErrors point at their source:\n" + str(error))

    graph_section(rng)
    autodiff_section(rng)
    kernel_section(rng)
    distribution_section(rng)


def graph_section(rng) -> None:
    """Eager ops, a @jit function with annotations, and its Graph IR."""
    half = tessera.fp16 @ tessera.accum(tessera.fp32)
    x = tessera.tensor(rng.uniform(59000, 60000, (2, 8)), dtype=half)
    p = ops.softmax_safe(x)
    print("\nsoftmax_safe of fp16 values near 60000 (eager): row sums",
          np.round(p.numpy().astype(np.float64).sum(axis=-1), 3), "finite:", bool(np.isfinite(p.numpy()).all()))

    policy = tessera.bf16 @ tessera.accum(tessera.fp32)

    @tessera.jit
    def mlp(x: tessera.Tensor["B", "D", policy], w: tessera.Tensor["D", "H", policy],
            g: tessera.Tensor["H", policy]):
        tessera.require(tessera.constraint.Divisible("D", 16))
        h = ops.gelu(ops.matmul(x, w))
        return ops.rmsnorm_safe(h, g)

    xs = rng.standard_normal((4, 32))
    ws = rng.standard_normal((32, 8)) / np.sqrt(32)
    out = mlp(xs, ws, np.ones(8))
    h = xs @ ws
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / np.sqrt(2)))
    ref = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    err = np.max(np.abs(out.numpy() - ref))
    print(f"@jit mlp on bf16 @accum(fp32): max |error| vs float64 numpy = {err:.4f}",
          "(outputs have RMS 1; bf16 inputs, weights and outputs keep 8 significant bits)")
    print("Its Graph IR:")
    print(mlp.graph_ir)
    try:
        mlp(xs, rng.standard_normal((24, 8)), np.ones(8))
    except tessera.ShapeError as error:
        print("A call with mismatched dims:", error)


def autodiff_section(rng) -> None:
    """grad of a softmax cross-entropy loss, checked by central differences; hvp."""

    def loss(w, x, labels):
        logits = ops.matmul(x, w)
        return ops.mean(ops.logsumexp(logits, axis=-1) - ops.sum(logits * labels, axis=-1))

    x = tessera.tensor(rng.standard_normal((8, 5)))
    w = tessera.tensor(rng.standard_normal((5, 3)))
    labels = tessera.tensor(np.eye(3)[rng.integers(0, 3, 8)])
    value, g = tessera.value_and_grad(loss)(w, x, labels)
    w0 = w.numpy()
    fd = np.zeros_like(w0)
    for idx in np.ndindex(w0.shape):
        step = np.zeros_like(w0)
        step[idx] = 1e-6
        fd[idx] = (loss(tessera.tensor(w0 + step), x, labels).numpy()
                   - loss(tessera.tensor(w0 - step), x, labels).numpy()) / 2e-6
    print(f"\nsoftmax cross-entropy loss {float(value.numpy()):.6f}; grad vs central differences: "
          f"max |diff| = {np.max(np.abs(g.numpy() - fd)):.2e}")
    v = tessera.tensor(rng.standard_normal((5, 3)))
    hv = tessera.hvp(lambda w_: loss(w_, x, labels), (w,), (v,))[1]
    print("Hessian-vector product (forward over reverse), first row:", np.round(hv.numpy()[0], 6))


@tessera.kernel
def scale(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i]


@tessera.kernel(tile=(128,), shared=8 * 1024)
def group_sum(x: tessera.f32["n"], out: tessera.mut(tessera.f32["grid_groups"])):
    smem = tshared.alloc[f32](128)
    i = tile.linear_id()
    acc = 0.0
    for k in range(i, n, group_tile_count()):
        acc += x[k]
    smem[i] = acc
    tbarrier()
    if i == 0:
        out[group_linear_id()] = reduce_sum(smem)


def kernel_section(rng) -> None:
    """The specification's scale and group_sum kernels, compiled to host code."""
    x = rng.standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    scale(x, y, 2.5)  # one tile per element of y
    print("\nscale kernel (Ch. 4.1): y == 2.5 * x exactly:", bool(np.array_equal(y, np.float32(2.5) * x)))
    ints = rng.integers(-50, 50, 4096).astype(np.float32)
    out = np.zeros(3, dtype=np.float32)
    group_sum[3](ints, out)  # three groups of 128 tiles; each sums all of x
    print("group_sum kernel (Ch. 4.2), 3 groups:", out, "numpy sum:", ints.sum())
    print("Its Tile IR:")
    print(group_sum.inspect_ir("tile"))
    try:
        @tessera.kernel
        def bad(x: tessera.f32["n"], y: tessera.f32["n"]):
            y[tile.linear_id()] = x[tile.linear_id()]
    except tessera.KernelTypeError as error:
        print("Writing a parameter not marked mut:", error)


def distribution_section(rng) -> None:
    """A row-parallel matmul on four virtual CPU devices: shards, an index
    launch of a @jit function, and its allreduce (rank-order sums)."""
    from tessera import dist
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("tp",), shape=(4,))
    a = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    A = dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=mesh)
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=mesh)

    @tessera.jit
    def row_parallel(x, y):
        return tessera.allreduce(ops.matmul(x, y), axis="tp")

    outs = tessera.index_launch(axis="tp")(row_parallel)(A.parts("tp"), W.parts("tp"))
    print(f"\n{mesh}: A {A.layout}, W {W.layout}; shard shapes {[p.shape for p in A.parts('tp')]}")
    err = np.abs(outs[0].numpy() - a.astype(np.float64) @ w).max()
    same = all(np.array_equal(o.numpy(), outs[0].numpy()) for o in outs)
    print(f"row-parallel matmul + allreduce on 4 shards: max error vs float64 {err:.2e}, "
          f"identical on every shard: {same}")
    print("its Graph IR (per shard):")
    print(row_parallel.inspect_ir("graph"))

    # The global view: the same product written for one device; the compiler
    # partitions it and inserts the allreduce where the residual needs it.
    @tessera.jit
    def residual(x, y, r):
        return r + ops.matmul(x, y)

    r = rng.standard_normal((8, 16)).astype(np.float32)
    out = residual(A, W, dist.tensor(r, mesh=mesh))
    err = np.abs(out.numpy() - (r + a.astype(np.float64) @ w)).max()
    print(f"global view, r + A @ W: layout {out.layout}, max error vs float64 {err:.2e}; per-shard Graph IR:")
    print(residual.inspect_ir("graph"))
    mapper_and_privileges_section(rng, a, w)


class MyMapper(tessera.Mapper):
    """The specification's Mapper (Ch. 10.5)."""

    def place(self, region, mesh):
        if region.axis == "tp":
            return "local_switch"

    def choose_collective(self, kind, size):
        return "sharp_ring" if size <= 72 else "tree"

    def choose_variant(self, op, arch):
        return "tile_ir" if arch.is_blackwell else "ptx"


def mapper_and_privileges_section(rng, a, w) -> None:
    """The Mapper steers placement and the reduction order (every decision
    logged); Region privileges order asynchronous calls (Ch. 4.6)."""
    from tessera import dist
    from tessera.region import Region, read, reduce_sum

    tessera.runtime.set_mapper(MyMapper())
    try:
        mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(8)], axes=("tp", "dp"), shape=(4, 2))
        print(f"\nMyMapper places tp on consecutive devices: tp group of rank 0 = {mesh.axis_group('tp', 0)}")
        f = tessera.jit(lambda x, y: ops.tanh(ops.matmul(x, y)))
        y = f(dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=mesh),
              dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=mesh))
        err = np.abs(y.numpy() - np.tanh(a.astype(np.float64) @ w)).max()
        print(f"tanh(A @ W) partitioned over tp=4 with the Mapper's ring order: max error vs float64 {err:.2e}")
        print("Mapper decisions:")
        for line in tessera.runtime.mapper_log():
            print("  " + line)
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())

    @tessera.jit
    def step(W: Region[read], X: Region[read], Y: Region[reduce_sum]):
        Y += ops.gemm(X, W)

    W = tessera.tensor(w)
    Y = tessera.tensor(np.zeros((8, 16), np.float32))
    batches = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(4)]
    for xb in batches:
        step(W, tessera.tensor(xb), Y)  # returns at once; the four run concurrently, folded in call order
    err = np.abs(Y.numpy() - sum(xb.astype(np.float64) @ w for xb in batches)).max()
    print(f"step(W, X, Y: Region[reduce_sum]) called 4 times: Y = sum of X @ W, max error vs float64 {err:.2e}")


if __name__ == "__main__":
    main()
