"""tessera.dist on in-process devices: meshes, shard specs and distributions,
distributed tensors with real per-device shards, index launches of kernels and
functions, per-shard collectives (against numpy), and their failure modes."""

import time

import numpy as np
import pytest

import tessera
from tessera import dist
from tessera.errors import ArgumentError, CollectiveError, DeviceError


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


def test_mesh_and_its_errors():
    m = dist.mesh(devices=cpus(8), axes=("dp", "tp"), shape=(2, 4))
    assert m.shape == (2, 4) and m.axes == ("dp", "tp") and m.axis_size("tp") == 4 and len(m) == 8
    assert "mesh(dp=2, tp=4) over cpu:0..cpu:7" in repr(m)
    with pytest.raises(ArgumentError, match=r"shape 2 x 4 holds 8 device\(s\) but 6 were given"):
        dist.mesh(devices=cpus(6), axes=("dp", "tp"), shape=(2, 4))
    with pytest.raises(ArgumentError, match="device 'cpu:1' appears twice"):
        dist.mesh(devices=["cpu:0", "cpu:1", "cpu:1", "cpu:3"], axes=("tp",), shape=(4,))
    with pytest.raises(ArgumentError, match="axis name 'tp' appears twice"):
        dist.mesh(devices=cpus(4), axes=("tp", "tp"), shape=(2, 2))
    with pytest.raises(DeviceError, match="unknown device 'npu:0'"):
        dist.mesh(devices=["npu:0"], axes=("tp",), shape=(1,))


def test_the_nvl72_teaser_runs_on_virtual_devices(monkeypatch):
    monkeypatch.setenv("TESSERA_VIRTUAL_DEVICES", "cuda:72")
    mesh = dist.mesh(devices=[f"cuda:{i}" for i in range(72)], axes=("dp", "tp", "pp"), shape=(4, 9, 2))
    W = dist.tensor(shape=(8192, 8192), layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=mesh,
                    dtype="fp8_e4m3")
    assert W.shape == (8192, 8192)
    assert len(W.shards) == 72
    # 8192 columns over 9: the first 2 shards get 911, the rest 910 (numpy.array_split).
    widths = [s.shape[1] for s in W.parts("tp")]
    assert widths == [911, 911] + [910] * 7
    assert sum(widths) == 8192
    assert str(W.parts("tp")[0].dtype) == "fp8_e4m3"
    monkeypatch.delenv("TESSERA_VIRTUAL_DEVICES")
    with pytest.raises(DeviceError, match="TESSERA_VIRTUAL_DEVICES=cuda:K"):
        dist.mesh(devices=[f"cuda:{i}" for i in range(72)], axes=("tp",), shape=(72,))


def test_shard_and_gather_every_layout():
    m = dist.mesh(devices=cpus(8), axes=("dp", "tp"), shape=(2, 4))
    a = np.arange(7 * 10, dtype=np.float32).reshape(7, 10)
    for layout in [dist.ShardSpec(partition=("col",), mesh_axes=("tp",)),
                   dist.ShardSpec(partition=("row", "col"), mesh_axes=("dp", "tp")),
                   dist.Block(mesh_axes=("dp", "tp")), dist.Cyclic(mesh_axes=("tp",), block=2),
                   dist.Replicated(), None]:
        x = dist.tensor(a, layout=layout, mesh=m)
        np.testing.assert_array_equal(x.numpy(), a)
    x = dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    parts = x.parts("tp")
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in parts], axis=1), a)
    np.testing.assert_array_equal(parts[2].numpy(), a[:, 6:8])
    # A cyclic split deals blocks of 2 rows round-robin over tp: device tp=1 holds rows 2, 3.
    c = dist.tensor(a, layout=dist.Cyclic(mesh_axes=("tp",), block=2), mesh=m)
    np.testing.assert_array_equal(c.parts("tp")[1].numpy(), a[2:4])
    with pytest.raises(ArgumentError, match="also split over mesh axis 'tp'"):
        dist.tensor(a, layout=dist.Block(mesh_axes=("dp", "tp")), mesh=m).parts("dp")
    r = dist.reshard(x, dist.ShardSpec(partition=("row",), mesh_axes=("dp",)))
    np.testing.assert_array_equal(r.numpy(), a)
    assert r.parts("dp")[1].shape == (3, 10)


def test_partial_tensors_sum_in_rank_order_when_read():
    m = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))
    x = dist.tensor(np.array([1.0, 2.0], np.float32), layout=dist.ShardSpec(partial=("tp",)), mesh=m)
    np.testing.assert_array_equal(x.shards[2].numpy(), [0.0, 0.0])
    x.shards[1].numpy()[:] = [10.0, 20.0]  # shards share storage with the tensor
    np.testing.assert_array_equal(x.numpy(), [11.0, 22.0])


def test_domains_and_the_default_mesh():
    D = tessera.domain.Rect((4, 6, 8))
    blk = dist.Block(mesh_axes=("dp", "tp"))
    with pytest.raises(ArgumentError, match="no mesh= given and no enclosing `with mesh:` block"):
        tessera.array.from_domain(D, dtype="bf16", distribution=blk)
    with dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2)):
        X = tessera.array.from_domain(D, dtype="bf16", distribution=blk)
    assert X.shape == (4, 6, 8)
    assert [s.shape for s in X.shards] == [(2, 3, 8)] * 4
    assert str(X.dtype) == "bf16"


@tessera.kernel
def scale_part(x: tessera.f32["K/tp"], y: tessera.mut(tessera.f32["K/tp"]), alpha: tessera.f32):
    i = tile.linear_id()  # one tile per element of y (the first mut parameter)
    y[i] = alpha * x[i]


def test_index_launch_of_a_kernel_binds_shard_dims():
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))
    spec = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
    a = np.arange(16, dtype=np.float32)
    X = dist.tensor(a, layout=spec, mesh=m)
    Y = dist.tensor(shape=(16,), layout=spec, mesh=m)
    tessera.index_launch(axis="tp")(scale_part)(X.parts("tp"), Y.parts("tp"), 3.0)
    np.testing.assert_array_equal(Y.numpy(), 3.0 * a)
    # Writing replicas, writing one tensor twice, and parts of the wrong length are errors.
    R = dist.tensor(shape=(16,), mesh=m)
    with pytest.raises(ArgumentError, match="'y' is written, but its parts along 'tp' are replicas"):
        tessera.index_launch(axis="tp")(scale_part)(X.parts("tp"), R.parts("tp"), 1.0)
    m2 = dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,))
    Z = dist.tensor(shape=(16,), layout=spec, mesh=m2)
    with pytest.raises(ArgumentError, match="live on another mesh"):
        tessera.index_launch(axis="tp")(scale_part)(X.parts("tp"), Z.parts("tp"), 1.0)
    with pytest.raises(ArgumentError, match="grid= applies to kernels"):
        tessera.index_launch(axis="tp", grid=4)(lambda x: x)(X.parts("tp"))


def test_row_parallel_matmul_with_an_allreduce_matches_numpy():
    """The Megatron row-parallel step per shard: a local GEMM over this
    shard's slice of K, then an allreduce over tp; the rank-order fp32 sum
    equals numpy's sum of the partial products in that order."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal((12, 7)).astype(np.float32)
    m = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))
    A = dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    B = dist.tensor(b, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)

    def shard_step(a_part, b_part):
        assert tessera.dist.axis_size("tp") == 3
        return tessera.allreduce(tessera.ops.matmul(a_part, b_part), axis="tp")

    outs = tessera.index_launch(axis="tp")(shard_step)(A.parts("tp"), B.parts("tp"))
    partials = [tessera.ops.matmul(tessera.tensor(a[:, 4 * i:4 * i + 4]), tessera.tensor(b[4 * i:4 * i + 4])).numpy()
                for i in range(3)]
    want = (partials[0] + partials[1]) + partials[2]
    for o in outs:
        np.testing.assert_array_equal(o.numpy(), want)
    np.testing.assert_allclose(outs[0].numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_per_shard_collectives():
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))

    def body(_):
        i = tessera.dist.axis_index("tp")
        x = tessera.tensor(np.full((4, 2), i, np.float32))
        return (tessera.all_gather(x, axis="tp", dim=1), tessera.reduce_scatter(x, axis="tp", dim=0),
                tessera.all_to_all(x + 10.0 * np.float32(1), axis="tp", split_dim=0, concat_dim=1),
                tessera.broadcast(x, axis="tp", root=3), tessera.allreduce(x, axis="tp", op="max"))

    outs = tessera.index_launch(axis="tp", mesh=m)(body)(None)
    for i, (g, rs, a2a, bc, mx) in enumerate(outs):
        np.testing.assert_array_equal(g.numpy()[0], [0, 0, 1, 1, 2, 2, 3, 3])
        np.testing.assert_array_equal(rs.numpy(), [[6.0, 6.0]])
        np.testing.assert_array_equal(a2a.numpy(), [[10, 10, 11, 11, 12, 12, 13, 13]])
        np.testing.assert_array_equal(bc.numpy(), np.full((4, 2), 3.0))
        np.testing.assert_array_equal(mx.numpy(), np.full((4, 2), 3.0))
    with pytest.raises(ArgumentError, match="inside a function given to tessera.index_launch"):
        tessera.allreduce(tessera.tensor(np.zeros(2, np.float32)), axis="tp")


def test_all_to_all_traces_under_jit_and_matches_the_eager_one():
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))
    X = dist.tensor(np.arange(4 * 8 * 3, dtype=np.float32).reshape(32, 3),
                    layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)

    @tessera.jit
    def swap(x):
        return tessera.all_to_all(x * 2.0, axis="tp", split_dim=0, concat_dim=1)

    def eager(x):
        return tessera.all_to_all(x * 2.0, axis="tp", split_dim=0, concat_dim=1)

    traced = tessera.index_launch(axis="tp")(swap)(X.parts("tp"))
    plain = tessera.index_launch(axis="tp")(eager)(X.parts("tp"))
    assert "graph.all_to_all" in swap.inspect_ir("graph")
    for t, p in zip(traced, plain):
        assert t.shape == (2, 12)
        np.testing.assert_array_equal(t.numpy(), p.numpy())


def test_a_failing_shard_raises_its_own_error_and_releases_the_others():
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))

    def body(_):
        if tessera.dist.axis_index("tp") == 2:
            raise ValueError("shard 2 broke")
        return tessera.allreduce(tessera.tensor(np.ones(3, np.float32)), axis="tp")

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="shard 2 broke") as info:
        tessera.index_launch(axis="tp", mesh=m)(body)(None)
    assert time.monotonic() - t0 < 10
    assert any("cpu:2 (index 2 of the index launch over mesh axis 'tp')" in n for n in info.value.__notes__)


def test_a_shard_that_skips_a_collective_is_a_timeout_naming_it(monkeypatch):
    monkeypatch.setenv("TESSERA_COLLECTIVE_TIMEOUT", "0.5")
    m = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))

    def body(_):
        if tessera.dist.axis_index("tp") == 1:
            time.sleep(2.0)  # never calls the allreduce in time
            return None
        return tessera.allreduce(tessera.tensor(np.ones(2, np.float32)), axis="tp")

    with pytest.raises(CollectiveError, match=r"allreduce #1 over mesh axis 'tp'.*timed out.*cpu:1 \(completed 0\)"):
        tessera.index_launch(axis="tp", mesh=m)(body)(None)


def test_mismatched_collectives_name_the_first_difference():
    m = dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,))

    def body(_):
        n = 4 + tessera.dist.axis_index("tp")
        return tessera.allreduce(tessera.tensor(np.ones(n, np.float32)), axis="tp")

    with pytest.raises(CollectiveError, match=r"members disagree on the size of dim 0 \(4 vs 5\): cpu:0 called "
                                              r"allreduce of \[4\] fp32 \(sum\), cpu:1 called allreduce of \[5\]"):
        tessera.index_launch(axis="tp", mesh=m)(body)(None)


def test_allreduce_is_bitwise_the_rank_order_sum():
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal(1000) * 10.0 ** rng.integers(-3, 4, 1000)).astype(np.float32) for _ in range(5)]
    m = dist.mesh(devices=cpus(5), axes=("dp",), shape=(5,))
    X = dist.tensor(np.stack(xs), layout=dist.ShardSpec(partition=("row",), mesh_axes=("dp",)), mesh=m)
    outs = tessera.index_launch(axis="dp")(lambda x: tessera.allreduce(x, axis="dp"))(X.parts("dp"))
    want = xs[0].copy()
    for x in xs[1:]:
        want = want + x  # float32 adds, in rank order
    for o in outs:
        np.testing.assert_array_equal(o.numpy()[0], want)


def test_jit_functions_with_collectives_run_compiled_per_shard():
    """A @jit function's collectives are Graph IR ops (visible in its graph)
    that the compiled executable runs through the shard's communicator."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 4)).astype(np.float32)
    m = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))
    A = dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    B = dist.tensor(b, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)

    @tessera.jit
    def row_parallel(x, w):
        y = tessera.allreduce(tessera.ops.matmul(x, w), axis="tp")
        return tessera.ops.relu(y), tessera.all_gather(y, axis="tp", dim=1), tessera.reduce_scatter(y, axis="tp",
                                                                                                      dim=0)

    outs = tessera.index_launch(axis="tp")(row_parallel)(A.parts("tp"), B.parts("tp"))
    eager = tessera.index_launch(axis="tp")(row_parallel.__wrapped__)(A.parts("tp"), B.parts("tp"))
    graph = row_parallel.inspect_ir("graph")
    assert "graph.allreduce" in graph and 'axis = "tp"' in graph and "axis_size = 3" in graph
    y = eager[0][1].numpy()[:, :4]  # the allreduced product (before relu)
    for i in range(3):
        for got, want in zip(outs[i], eager[i]):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(outs[i][1].numpy(), np.concatenate([eager[0][1].numpy()[:, :4]] * 3, axis=1))
        # The three members' y summed in rank order, rows [2i, 2i + 2) to member i.
        np.testing.assert_array_equal(outs[i][2].numpy(), np.float32(3) * y[2 * i:2 * i + 2])
    np.testing.assert_allclose(np.maximum(a.astype(np.float64) @ b, 0), outs[0][0].numpy(), rtol=1e-5, atol=1e-5)
    # Outside an index launch the traced collective has no shard to run on.
    with pytest.raises(CollectiveError, match=r"graph.allreduce over mesh axis 'tp' of 3 members runs per shard"):
        row_parallel(tessera.tensor(a[:, :3]), tessera.tensor(b[:3]))


def test_gradients_through_per_shard_collectives():
    """jit(grad) through graph.allreduce per shard. As in JAX (psum's
    transpose is psum), the shards' losses are taken as summed: each shard's
    gradient of sum(Y^2) with Y = allreduce(x_r w) is x_r^T (2 P Y)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    m = dist.mesh(devices=cpus(2), axes=("dp",), shape=(2,))
    X = dist.tensor(x, layout=dist.ShardSpec(partition=("row",), mesh_axes=("dp",)), mesh=m)
    W = dist.tensor(w, mesh=m)

    def loss(xr, wr):
        return tessera.ops.sum(tessera.allreduce(tessera.ops.matmul(xr, wr), axis="dp") ** 2)

    grads = tessera.index_launch(axis="dp")(tessera.jit(tessera.grad(loss, argnums=1)))(X.parts("dp"), W.parts("dp"))
    x64 = x.astype(np.float64)
    y = x64[0:2] @ w + x64[2:4] @ w  # the allreduced [2, 2] product
    for r in range(2):
        want = x64[2 * r:2 * r + 2].T @ (2 * 2 * y)
        np.testing.assert_allclose(grads[r].numpy(), want, rtol=1e-5, atol=1e-5)


def test_an_allreduce_of_packed_fp4_storage_on_the_local_backend():
    # Two fp4 codes a byte: the result is copied whole (it has no per-element address).
    import threading
    from tessera import _C
    comm = _C.local_communicator("tp", cpus(2), timeout=20)
    vals = np.array([0.5, 1, 1.5, 2, -1, 3], np.float32)  # sums exact in fp4_e2m1
    xs = [tessera.tensor(vals, "fp4_e2m1") for _ in range(2)]
    out = [None, None]

    def member(r):
        out[r] = comm.allreduce(r, xs[r], "sum")
    threads = [threading.Thread(target=member, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in out:
        assert str(o.dtype) == "fp4_e2m1"
        np.testing.assert_array_equal(o.numpy(), 2 * vals)
