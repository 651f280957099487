"""tessera.dist with a real GPU in the mesh: shards in device memory, an
index launch of a @jit function on them (compiled for the GPU), and a
collective over a one-member axis; checked against numpy."""

import numpy as np
import pytest

import tessera
from tessera import _C, dist, ops

HAS_GPU = _C._cuda_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {_C._cuda_unavailable_reason()}")


@needs_gpu
def test_a_mesh_of_cuda_0_keeps_shards_on_the_gpu():
    m = dist.mesh(devices=["cuda:0"], axes=("tp",), shape=(1,))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    A = dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    assert A.shards[0].device == "cuda:0"

    @tessera.jit
    def step(x, y):
        return tessera.allreduce(tessera.ops.matmul(x, y), axis="tp")

    out = tessera.index_launch(axis="tp")(step)(A.parts("tp"), W.parts("tp"))[0]
    assert out.device == "cuda:0"
    np.testing.assert_allclose(out.to("cpu").numpy(), a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(A.numpy(), a)


@needs_gpu
def test_the_global_view_compiles_per_shard_functions_for_the_gpu():
    # A one-GPU mesh: the partitioned function (no collectives over a one-member
    # axis) compiles through the CUDA backend and its shards stay on the GPU.
    m = dist.mesh(devices=["cuda:0"], axes=("tp",), shape=(1,))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w1 = (rng.standard_normal((32, 64)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((64, 32)) / 4).astype(np.float32)
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))

    @tessera.jit
    def block(x, w1, w2):
        return x + tessera.ops.matmul(tessera.ops.relu(tessera.ops.matmul(x, w1)), w2)

    y = block(dist.tensor(x, mesh=m), dist.tensor(w1, layout=col, mesh=m), dist.tensor(w2, layout=row, mesh=m))
    assert y.shards[0].device == "cuda:0"
    assert "shard[-, tp]" in block.inspect_ir("graph")
    np.testing.assert_allclose(y.numpy(), x + np.maximum(x.astype(np.float64) @ w1, 0) @ w2, rtol=1e-4, atol=1e-4)


@needs_gpu
def test_the_mapper_sees_the_gpu_and_its_reference_variant_runs_on_it():
    seen = []

    class Oracle(tessera.Mapper):
        def choose_variant(self, op, arch):
            seen.append((arch.name, arch.is_hopper, arch.is_cpu))
            return "reference" if op == "exp" else "ptx"

    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    plain = tessera.jit(lambda a: ops.exp(a) * 2.0 + ops.matmul(a, a))
    want = plain(tessera.tensor(x).to("cuda:0")).numpy()
    tessera.runtime.set_mapper(Oracle())
    try:
        f = tessera.jit(lambda a: ops.exp(a) * 2.0 + ops.matmul(a, a))
        got = f(tessera.tensor(x).to("cuda:0"))
        assert got.device == "cuda:0"
        variants = {k["variant"] for k in f.executable().kernels}
        assert variants == {"reference", "tile"}
        major = tessera._C._cuda_capability(0)[0]
        assert seen and seen[0][0].startswith("sm_") and seen[0][1] == (major == 9) and not seen[0][2]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got.numpy(), np.exp(x.astype(np.float64)) * 2 + x.astype(np.float64) @ x,
                                   rtol=1e-5, atol=1e-3)
        assert "ptx" in "\n".join(tessera.runtime.mapper_log())
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())


@needs_gpu
def test_privileged_calls_on_gpu_tensors_reduce_in_call_order():
    from tessera.region import Region, read, reduce_sum

    @tessera.jit
    def step(W: Region[read], X: Region[read], Y: Region[reduce_sum]):
        Y += ops.gemm(X, W)

    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    xs = [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(4)]
    results = []
    for _ in range(3):
        W = tessera.tensor(w).to("cuda:0")
        Y = tessera.tensor(np.zeros((8, 16), np.float32)).to("cuda:0")
        for x in xs:
            step(W, tessera.tensor(x).to("cuda:0"), Y)
        results.append(Y.numpy().copy())
    np.testing.assert_allclose(results[0], sum(x.astype(np.float64) @ w for x in xs), rtol=1e-4, atol=1e-4)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@needs_gpu
def test_a_partitioned_call_on_a_cuda_mesh_replays_a_captured_graph():
    m = dist.mesh(devices=["cuda:0"], axes=("tp",), shape=(1,))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    f = tessera.jit(capture_graph=True)(lambda a, b: ops.gelu(ops.matmul(a, b)))
    X = dist.tensor(x, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    first = f(X, W).numpy()
    second = f(X, W).numpy()
    np.testing.assert_array_equal(first, second)
    assert f._last.executable(0).graphs == 1  # captured once, replayed
    plain = tessera.jit(lambda a, b: ops.gelu(ops.matmul(a, b)))(tessera.tensor(x).to("cuda:0"),
                                                                   tessera.tensor(w).to("cuda:0"))
    np.testing.assert_allclose(first, plain.numpy(), rtol=1e-6, atol=1e-6)


needs_two_gpus = pytest.mark.skipif(not HAS_GPU or _C._cuda_device_count() < 2, reason="needs two CUDA devices")


@needs_two_gpus
def test_a_megatron_block_over_two_gpus_matches_one():
    # In-process devices cuda:0 and cuda:1 (the nccl backend where NCCL loads, else local).
    m = dist.mesh(devices=["cuda:0", "cuda:1"], axes=("tp",), shape=(2,))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w1 = (rng.standard_normal((32, 64)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((64, 32)) / 4).astype(np.float32)

    def block(x, w1, w2):
        return x + ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)

    f = tessera.jit(block)
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
    W1 = dist.tensor(w1, layout=col, mesh=m)
    assert [s.device for s in W1.shards] == ["cuda:0", "cuda:1"]
    y = f(dist.tensor(x, mesh=m), W1, dist.tensor(w2, layout=row, mesh=m))
    assert f.inspect_ir("graph").count("graph.allreduce ") == 1
    one = tessera.jit(block)(*(tessera.tensor(a).to("cuda:0") for a in (x, w1, w2)))
    np.testing.assert_allclose(y.numpy(), one.numpy(), rtol=1e-5, atol=1e-5)
