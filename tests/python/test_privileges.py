"""Region privileges: the specification's examples (Ch. 4.5, 4.6), the
PrivilegeErrors raised while tracing (with the user's line), and the
asynchronous calls ordered by privileges (readers concurrent, writers after
readers, reductions folded in call order), checked against numpy."""

import json
import os

import numpy as np
import pytest

import tessera
from tessera import dist, ops
from tessera.errors import ArgumentError, PrivilegeError
from tessera.ops import gemm, rmsnorm_safe
from tessera.region import Region, read, reduce_max, reduce_sum, write

jit = tessera.jit


@pytest.fixture(autouse=True)
def drained():
    yield
    try:
        tessera.runtime.synchronize()
    except Exception:
        pass


def rng(seed=0):
    return np.random.default_rng(seed)


# -- the specification's examples -------------------------------------------------------------

@jit
def step(W: Region[read], X: Region[read], Y: Region[reduce_sum]):
    # Compiler schedules reduce ops safely
    Y += gemm(X, W)


@jit
def norm_layer(X: Region[read], Y: Region[write]):
    Y[:] = rmsnorm_safe(X)


def test_step_reduces_into_y_in_call_order():
    r = rng(1)
    W = tessera.tensor(r.standard_normal((16, 8)).astype(np.float32))
    Xs = [tessera.tensor(r.standard_normal((4, 16)).astype(np.float32)) for _ in range(3)]
    Y = tessera.tensor(np.zeros((4, 8), np.float32))
    for X in Xs:
        assert step(W, X, Y) is None  # asynchronous: returns at once
    got = Y.numpy().copy()
    want = sum(x.numpy().astype(np.float64) @ W.numpy() for x in Xs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Folds run in call order: the same bits every time.
    for _ in range(3):
        Y2 = tessera.tensor(np.zeros((4, 8), np.float32))
        for X in Xs:
            step(W, X, Y2)
        np.testing.assert_array_equal(Y2.numpy(), got)


def test_norm_layer_writes_y_on_host_tensors():
    x = rng(2).standard_normal((2, 3, 8)).astype(np.float32)
    X, Y = tessera.tensor(x), tessera.tensor(np.full((2, 3, 8), 7.0, np.float32))
    norm_layer(X, Y)
    want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(Y.numpy(), want, rtol=1e-5, atol=1e-5)


def test_norm_layer_on_a_distributed_domain():
    # Ch. 4.5 as written: a Block-distributed bf16 array over (dp, tp).
    B, S, Dm = 4, 6, 8
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("dp", "tp"), shape=(2, 2))
    with mesh:
        D = tessera.domain.Rect((B, S, Dm))
        distribution = dist.Block(mesh_axes=("dp", "tp"))
        X = tessera.array.from_domain(D, dtype="bf16", distribution=distribution)
        Y = tessera.array.from_domain(D, dtype="bf16", distribution=distribution)
    x = rng(3).standard_normal((B, S, Dm))
    X = dist.tensor(x, layout=dist.Block(mesh_axes=("dp", "tp")), mesh=mesh, dtype="bf16")
    norm_layer(X, Y)
    xb = X.numpy().astype(np.float64)  # the bf16 inputs
    want = xb / np.sqrt(np.mean(xb ** 2, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(Y.numpy().astype(np.float64), want, rtol=2e-2, atol=2e-2)
    assert Y.layout == X.layout  # written shard by shard, in Y's layout


# -- errors while tracing -------------------------------------------------------------------------

def test_writing_a_read_region_names_the_line():
    @jit
    def bad(X: Region[read], Y: Region[write]):
        Y[:] = X
        X[:] = Y  # the offending line

    with pytest.raises(PrivilegeError) as info:
        bad(tessera.tensor(np.ones(3, np.float32)), tessera.tensor(np.zeros(3, np.float32)))
    msg = str(info.value)
    assert "parameter 'X' is tessera.Region['read']; it is written at" in msg
    assert "test_privileges.py:" in msg and "X[:] = Y  # the offending line" in msg


def test_reading_a_write_region_before_writing_it():
    @jit
    def bad(X: Region[read], Y: Region[write]):
        Y[:] = Y + X

    with pytest.raises(PrivilegeError, match=r"'Y' is tessera.Region\['write'\]; it is read at .*before it is written"):
        bad(tessera.tensor(np.ones(3, np.float32)), tessera.tensor(np.zeros(3, np.float32)))

    @jit
    def fine(X: Region[read], Y: Region[write]):
        Y[:] = X * 2.0
        Y += 1.0  # reading after writing is allowed

    Y = tessera.tensor(np.zeros(3, np.float32))
    fine(tessera.tensor(np.ones(3, np.float32)), Y)
    np.testing.assert_array_equal(Y.numpy(), [3, 3, 3])


def test_reducing_with_another_op_or_reading_a_reduction():
    x = tessera.tensor(np.ones(3, np.float32))

    @jit
    def times(X: Region[read], Y: Region[reduce_sum]):
        Y *= X

    with pytest.raises(PrivilegeError, match=r"updated with \*=.*another op than its sum reduction"):
        times(x, tessera.tensor(np.zeros(3, np.float32)))

    @jit
    def assign(X: Region[read], Y: Region[reduce_sum]):
        Y[:] = X

    with pytest.raises(PrivilegeError, match="assigned at .*not a sum reduction"):
        assign(x, tessera.tensor(np.zeros(3, np.float32)))

    @jit
    def peek(X: Region[read], Y: Region[reduce_sum]):
        Y += X * ops.sum(Y)

    with pytest.raises(PrivilegeError, match="'Y' is tessera.Region\\['reduce_sum'\\]; it is read at"):
        peek(x, tessera.tensor(np.zeros(3, np.float32)))

    @jit
    def add_to_max(X: Region[read], Y: Region[reduce_max]):
        Y += X

    with pytest.raises(PrivilegeError, match=r"updated with \+=.*another op than its max reduction"):
        add_to_max(x, tessera.tensor(np.zeros(3, np.float32)))


def test_a_write_region_must_be_written_and_passed_a_tensor():
    @jit
    def forgets(X: Region[read], Y: Region[write]):
        return X * 2.0

    with pytest.raises(PrivilegeError, match="never writes it"):
        forgets(tessera.tensor(np.ones(3, np.float32)), tessera.tensor(np.zeros(3, np.float32)))
    with pytest.raises(ArgumentError, match="updates it in place: pass a tessera tensor, got ndarray"):
        norm_layer(tessera.tensor(np.ones((2, 4), np.float32)), np.zeros((2, 4), np.float32))

    @jit
    def partial(X: Region[read], Y: Region[write]):
        Y[0] = X[0]

    with pytest.raises(ArgumentError, match=r"only whole-region writes \(Y\[:\] = v\)"):
        partial(tessera.tensor(np.ones(3, np.float32)), tessera.tensor(np.zeros(3, np.float32)))


# -- ordering and overlap ---------------------------------------------------------------------------

@jit
def scale_into(X: Region[read], Y: Region[write], k):
    Y[:] = X * k


@jit
def plus_one(Y: Region[read], Z: Region[write]):
    Z[:] = Y + 1.0


def test_a_writer_waits_for_earlier_readers_and_readers_for_earlier_writers():
    x = rng(4).standard_normal((64, 64)).astype(np.float32)
    for _ in range(20):  # races would show as a wrong Z now and then
        X = tessera.tensor(x)
        Y = tessera.tensor(np.zeros_like(x))
        Z = tessera.tensor(np.zeros_like(x))
        scale_into(X, Y, 2.0)   # writes Y
        plus_one(Y, Z)          # reads Y: after the first write
        scale_into(X, Y, 3.0)   # writes Y again: after the read
        np.testing.assert_array_equal(Z.numpy(), x * 2.0 + 1.0)
        np.testing.assert_array_equal(Y.numpy(), x * 3.0)


def test_the_dependencies_follow_the_privileges():
    X = tessera.tensor(np.ones((8, 8), np.float32))
    Y = tessera.tensor(np.zeros((8, 8), np.float32))
    Z1 = tessera.tensor(np.zeros((8, 8), np.float32))
    Z2 = tessera.tensor(np.zeros((8, 8), np.float32))
    sched = tessera.privilege_scheduler.scheduler()
    tessera.runtime.synchronize()
    scale_into(X, Y, 2.0)
    w1 = sched._calls[-1]
    plus_one(Y, Z1)
    r1 = sched._calls[-1]
    plus_one(Y, Z2)
    r2 = sched._calls[-1]
    scale_into(X, Y, 5.0)
    w2 = sched._calls[-1]
    tessera.runtime.synchronize()
    assert r1.compute_deps == [w1] and r2.compute_deps == [w1]  # the readers wait for the writer only
    assert set(w2.commit_deps["Y"]) == {w1, r1, r2}  # the next writer stores after both readers
    assert w1.compute_deps == [] and w2.compute_deps == []


@jit
def heavy_read(A: Region[read], Out: Region[write]):
    h = A
    for _ in range(6):
        h = ops.tanh(ops.matmul(h, A))
    Out[:] = h


def test_readers_of_one_tensor_run_concurrently_and_the_trace_shows_it(tmp_path):
    a = (rng(5).standard_normal((384, 384)) / 20).astype(np.float32)
    A = tessera.tensor(a)
    outs = [tessera.tensor(np.zeros_like(a)) for _ in range(2)]
    heavy_read(A, outs[0])  # compiled once, outside the measured block
    tessera.runtime.synchronize()
    path = tmp_path / "trace.json"
    with tessera.profile(str(path), summary=False) as prof:
        for _ in range(2):
            heavy_read(A, outs[0])
            heavy_read(A, outs[1])
    calls = sorted((r for r in prof.records if r["kind"] == "call"), key=lambda r: r["start_us"])
    assert len(calls) == 4
    # Each pair of readers overlaps in time: the second starts before the first ends.
    overlaps = sum(1 for a, b in zip(calls, calls[1:]) if b["start_us"] < a["start_us"] + a["duration_us"])
    assert overlaps >= 1
    trace = json.loads(path.read_text())
    rows = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert sum(1 for r in rows if r.startswith("tessera-call")) >= 2
    np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())


def test_reduce_max_folds_with_max():
    @jit
    def peak(X: Region[read], Y: Region[reduce_max]):
        Y.reduce(X * 2.0)

    Y = tessera.tensor(np.full(5, -np.inf, np.float32))
    xs = [rng(6 + i).standard_normal(5).astype(np.float32) for i in range(4)]
    for x in xs:
        peak(tessera.tensor(x), Y)
    np.testing.assert_array_equal(Y.numpy(), np.max(np.stack(xs) * 2.0, axis=0))


def test_a_failed_call_raises_at_the_next_wait_and_fails_its_dependents():
    base = tessera.tensor(np.zeros((4, 4), np.float32))
    column = tessera.ops.transpose(base, (1, 0))  # a non-contiguous view: the store into it fails
    assert not column.is_contiguous()

    @jit
    def fill(X: Region[read], Y: Region[write]):
        Y[:] = ops.broadcast_to(X, (4, 4))

    fill(tessera.tensor(np.ones(4, np.float32)), column)  # returns; fails on its worker
    plus_one(column, tessera.tensor(np.zeros((4, 4), np.float32)))  # waits for it
    with pytest.raises(ArgumentError, match="copy into a non-contiguous view"):
        tessera.runtime.synchronize()
    with pytest.raises(tessera.privilege_scheduler.DependencyError, match="call #.* of fill, which it waits for, "
                                                                            "failed"):
        tessera.runtime.synchronize()
    tessera.runtime.synchronize()  # both reported: nothing left
    np.testing.assert_array_equal(base.numpy(), np.zeros((4, 4)))


def test_a_region_function_runs_in_order_inside_an_index_launch():
    # A shard's collectives need its own thread's shard scope: calls made by a shard run there.
    @jit
    def shard_step(X: Region[read], Y: Region[write]):
        Y[:] = tessera.allreduce(X * 2.0, axis="tp")

    m = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("tp",), shape=(4,))
    x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
    X = dist.tensor(x, layout=row, mesh=m)
    Y = dist.tensor(shape=(8, 3), layout=row, mesh=m)
    tessera.index_launch(axis="tp")(shard_step)(X.parts("tp"), Y.parts("tp"))
    part_sum = sum(x[2 * i:2 * i + 2] for i in range(4)) * 2.0
    np.testing.assert_array_equal(Y.numpy(), np.concatenate([part_sum] * 4))
