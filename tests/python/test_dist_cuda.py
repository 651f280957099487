"""tessera.dist with a real GPU in the mesh: shards in device memory, an
index launch of a @jit function on them (compiled for the GPU), and a
collective over a one-member axis; checked against numpy."""

import numpy as np
import pytest

import tessera
from tessera import _C, dist

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
