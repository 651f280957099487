"""The global view of distribution: @jit and eager ops over distributed tensors.

Every sharded result is compared with the same program on plain host tensors
(one device, compiled) and with numpy float64; the per-shard graphs are
checked for exactly the collectives the sharding rules call for.
"""

import numpy as np
import pytest

import tessera
from tessera import dist, ops
from tessera.errors import ArgumentError, CompileError, ShapeError


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


COL = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
ROW = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))


@pytest.fixture
def tp4():
    return dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))


def weights(seed=0, d=16, f=32, b=8):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((b, d)).astype(np.float32), (rng.standard_normal((d, f)) / 4).astype(np.float32),
            (rng.standard_normal((f, d)) / 4).astype(np.float32))


def collectives(text):
    return {op: text.count(f"graph.{op} ") for op in ("allreduce", "all_gather", "reduce_scatter", "all_to_all",
                                                       "shard_slice")}


def gelu64(h):
    from math import erf
    return 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))


def block(x, w1, w2):
    """A Megatron MLP block with its residual: column-parallel, gelu, row-parallel."""
    return x + ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


def test_a_megatron_mlp_needs_exactly_one_allreduce_forward(tp4):
    x, w1, w2 = weights()
    f = tessera.jit(block)
    y = f(dist.tensor(x, mesh=tp4), dist.tensor(w1, layout=COL, mesh=tp4), dist.tensor(w2, layout=ROW, mesh=tp4))
    graph = f.inspect_ir("graph")
    assert collectives(graph) == {"allreduce": 1, "all_gather": 0, "reduce_scatter": 0, "all_to_all": 0,
                                  "shard_slice": 0}
    # Shardings are part of the types; shapes are the shards'.
    assert "%w1: tensor<[16, 8] fp32 @accum(fp32) shard[-, tp]>" in graph
    assert "shard[-, -] partial(tp)" in graph
    assert 'attributes {mesh = "tp=4"}' in graph
    expect = x.astype(np.float64) + gelu64(x.astype(np.float64) @ w1) @ w2
    np.testing.assert_allclose(y.numpy(), expect, rtol=1e-5, atol=1e-5)
    assert y.layout == "[-, -]"


def test_a_megatron_mlp_training_step_needs_one_allreduce_each_way(tp4):
    x, w1, w2 = weights(1)

    def loss(x, w1, w2):
        y = block(x, w1, w2)
        return ops.mean(y * y)

    step = tessera.jit(tessera.value_and_grad(loss, argnums=(0, 1, 2)))
    value, grads = step(dist.tensor(x, mesh=tp4), dist.tensor(w1, layout=COL, mesh=tp4),
                        dist.tensor(w2, layout=ROW, mesh=tp4))
    assert collectives(step.inspect_ir("graph"))["allreduce"] == 2
    assert [g.layout for g in grads] == ["[-, -]", "[-, tp]", "[tp, -]"]
    ref_value, ref_grads = step(tessera.tensor(x), tessera.tensor(w1), tessera.tensor(w2))
    np.testing.assert_allclose(value.numpy(), ref_value.numpy(), rtol=1e-6)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def test_a_column_sharded_weight_needs_no_communication(tp4):
    x, w1, _ = weights(2)
    f = tessera.jit(lambda x, w: ops.relu(ops.matmul(x, w)))
    y = f(dist.tensor(x, mesh=tp4), dist.tensor(w1, layout=COL, mesh=tp4))
    assert sum(collectives(f.inspect_ir("graph")).values()) == 0
    assert y.layout == "[-, tp]"
    np.testing.assert_allclose(y.numpy(), np.maximum(x.astype(np.float64) @ w1, 0), rtol=1e-5, atol=1e-5)


def test_a_contraction_over_a_split_dim_stays_pending_until_read(tp4):
    x, w1, w2 = weights(3)
    f = tessera.jit(lambda h, w: ops.matmul(h, w))
    h = x @ w1
    y = f(dist.tensor(h, layout=COL, mesh=tp4), dist.tensor(w2, layout=ROW, mesh=tp4))
    assert sum(collectives(f.inspect_ir("graph")).values()) == 0
    assert y.layout == "[-, -] partial(tp)"
    np.testing.assert_allclose(y.numpy(), h.astype(np.float64) @ w2, rtol=1e-5, atol=1e-5)


def test_a_pending_sum_meeting_a_split_operand_is_reduce_scattered(tp4):
    # Megatron's sequence parallelism: the residual stream is split over tp along the sequence.
    x, w1, w2 = weights(4)
    f = tessera.jit(lambda r, h, w: r + ops.matmul(h, w))
    h = x @ w1
    y = f(dist.tensor(x, layout=ROW, mesh=tp4), dist.tensor(h, layout=COL, mesh=tp4),
          dist.tensor(w2, layout=ROW, mesh=tp4))
    c = collectives(f.inspect_ir("graph"))
    assert c["reduce_scatter"] == 1 and c["allreduce"] == 0
    assert y.layout == "[tp, -]"
    np.testing.assert_allclose(y.numpy(), x + h.astype(np.float64) @ w2, rtol=1e-5, atol=1e-5)


def test_conflicting_shardings_are_an_error_naming_both(tp4):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    f = tessera.jit(lambda x, y: x + y)
    x = dist.tensor(a, layout=ROW, mesh=tp4)
    y = dist.tensor(a, layout=COL, mesh=tp4)
    with pytest.raises(ShapeError, match=r"shard\[tp, -\].*shard\[-, tp\].*tessera.dist.reshard"):
        f(x, y)
    # The reshard the message asks for: an all_to_all moves y's split to dim 0.
    g = tessera.jit(lambda x, y: x + dist.reshard(y, ROW))
    z = g(x, y)
    assert collectives(g.inspect_ir("graph"))["all_to_all"] == 1
    assert z.layout == "[tp, -]"
    np.testing.assert_array_equal(z.numpy(), 2 * a)


def test_data_parallel_sgd_step_matches_one_device():
    mesh = dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2))
    x, w1, w2 = weights(5, b=16)
    target = np.random.default_rng(6).standard_normal((16, 16)).astype(np.float32)
    batch = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))

    @tessera.jit
    def sgd(x, t, w1, w2):
        def loss(w1, w2):
            d = block(x, w1, w2) - t
            return ops.mean(d * d)
        value, (g1, g2) = tessera.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return value, w1 - 0.1 * g1, w2 - 0.1 * g2

    args = (dist.tensor(x, layout=batch, mesh=mesh), dist.tensor(target, layout=batch, mesh=mesh),
            dist.tensor(w1, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=mesh),
            dist.tensor(w2, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=mesh))
    value, n1, n2 = sgd(*args)
    graph = sgd.inspect_ir("graph")
    # dp: the weight gradients' pending sums meet the replicated weights (allreduce over dp).
    assert 'axis = "dp"' in graph
    ref = sgd(tessera.tensor(x), tessera.tensor(target), tessera.tensor(w1), tessera.tensor(w2))
    np.testing.assert_allclose(value.numpy(), ref[0].numpy(), rtol=1e-5)
    np.testing.assert_allclose(n1.numpy(), ref[1].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(n2.numpy(), ref[2].numpy(), rtol=1e-5, atol=1e-6)
    assert (n1.layout, n2.layout) == ("[-, tp]", "[tp, -]")


def test_reductions_over_split_dims(tp4):
    a = np.random.default_rng(7).standard_normal((8, 12)).astype(np.float32)
    x = dist.tensor(a, layout=ROW, mesh=tp4)
    s = tessera.jit(lambda x: ops.sum(x, axis=0))(x)
    assert s.layout == "[-] partial(tp)"
    np.testing.assert_allclose(s.numpy(), a.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    m = tessera.jit(lambda x: ops.mean(x))(x)
    np.testing.assert_allclose(m.numpy(), a.astype(np.float64).mean(), rtol=1e-5, atol=1e-6)
    f = tessera.jit(lambda x: ops.max(x, axis=0))
    mx = f(x)
    assert mx.layout == "[-]" and 'op = "max"' in f.inspect_ir("graph")
    np.testing.assert_array_equal(mx.numpy(), a.max(0))
    sm = tessera.jit(lambda x: ops.softmax_safe(x, axis=0))(x)
    assert sm.layout == "[-, -]"
    e = np.exp(a - a.max(0))
    np.testing.assert_allclose(sm.numpy(), e / e.sum(0), rtol=1e-5, atol=1e-6)


def test_shape_ops_follow_their_elements(tp4):
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    x = dist.tensor(a, layout=COL, mesh=tp4)
    f = tessera.jit(lambda x: ops.transpose(ops.reshape(x, (8, 4, 4)), (2, 0, 1)))
    y = f(x)
    assert sum(collectives(f.inspect_ir("graph")).values()) == 0  # heads stay split
    assert y.layout == "[-, -, tp]"
    np.testing.assert_array_equal(y.numpy(), a.reshape(8, 4, 4).transpose(2, 0, 1))


def test_eager_ops_on_distributed_tensors(tp4):
    x, w1, _ = weights(8)
    X = dist.tensor(x, mesh=tp4)
    W = dist.tensor(w1, layout=COL, mesh=tp4)
    y = ops.matmul(X, W)
    assert isinstance(y, dist.DistTensor) and y.layout == "[-, tp]"
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) @ w1, rtol=1e-5, atol=1e-5)
    z = ops.add(y, 1.0)
    np.testing.assert_allclose(z.numpy(), x.astype(np.float64) @ w1 + 1, rtol=1e-5, atol=1e-5)


def test_the_nvl72_teaser_compiles_its_gemm(monkeypatch):
    monkeypatch.setenv("TESSERA_VIRTUAL_DEVICES", "cuda:72")
    mesh = dist.mesh(devices=[f"cuda:{i}" for i in range(72)], axes=("dp", "tp", "pp"), shape=(4, 9, 2))
    rng = np.random.default_rng(9)
    w = rng.integers(-2, 3, (8192, 8192)).astype(np.float32)
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=mesh, dtype="fp8_e4m3")
    x = rng.integers(-2, 3, (4, 8192)).astype(np.float32) / 4
    X = dist.tensor(x, mesh=mesh, dtype="fp8_e4m3")
    Y = ops.gemm(X, W)  # uneven columns: 911 on two devices of tp, 910 on seven
    assert Y.layout == "[-, tp]" and [p.shape[1] for p in Y.parts("tp")] == [911, 911] + [910] * 7
    ref = ops.gemm(tessera.tensor(x, dtype="fp8_e4m3"), tessera.tensor(w, dtype="fp8_e4m3"))
    np.testing.assert_array_equal(Y.numpy(), ref.numpy())


def test_uneven_splits_that_a_collective_would_move_are_errors():
    mesh = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))
    a = np.ones((4, 10), np.float32)
    x = dist.tensor(a, layout=COL, mesh=mesh)
    with pytest.raises(ShapeError, match=r"all_gather over mesh axis 'tp'.*10 elements do not split evenly"):
        tessera.jit(lambda x: ops.softmax_safe(x, axis=-1))(x)
    # Elementwise work on the same uneven shards needs no collective and runs.
    y = tessera.jit(lambda x: x * 2.0)(x)
    np.testing.assert_array_equal(y.numpy(), 2 * a)


def test_per_shard_collectives_in_a_global_function_are_errors(tp4):
    x = dist.tensor(np.ones((4, 4), np.float32), mesh=tp4)
    with pytest.raises(CompileError, match="per-shard code"):
        @tessera.jit
        def f(x):
            from tessera.ops._dispatch import dispatch
            return dispatch("graph.allreduce", [x], {"axis": "tp", "axis_size": 4})
        f(x)


def test_reshard_in_jit_needs_distributed_arguments():
    with pytest.raises(ArgumentError, match="called with distributed tensors"):
        tessera.jit(lambda x: dist.reshard(x, ROW))(tessera.tensor(np.ones((4, 4), np.float32)))
