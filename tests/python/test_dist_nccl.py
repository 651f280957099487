"""The nccl collective backend (tessera/dist/nccl.h) on the GPUs of this
process: every collective checked bit for bit against the local backend on
the same inputs (the deterministic reductions must give the same bits on
every backend), the native algorithm against numpy, errors, and partitioned
@jit functions and index launches over meshes of GPUs. Tests that need k GPUs
skip with fewer; one GPU already runs the one-member forms."""

# Kernel bodies below name the kernel language's built-ins (tile, tshared, shape
# symbols, ...): Python only compiles them; the C++ front end reads their text.
import threading
import time

import numpy as np
import pytest

import tessera
from tessera import _C, dist
from tessera.errors import CollectiveError

GPUS = _C._cuda_device_count() if _C._cuda_available() else 0
HAS_NCCL = _C.nccl_available()


def needs(k):
    return pytest.mark.skipif(GPUS < k or not HAS_NCCL,
                              reason=f"needs {k} GPU(s) and NCCL (found {GPUS}; NCCL: "
                                     f"{_C.nccl_unavailable_reason() or 'available'})")


def members(n):
    return [f"cuda:{i}" for i in range(n)]


def run_ranks(n, fn, comms=()):
    """fn(rank) on n threads at once; results by rank. A rank that raises fails
    itself in `comms` (so the others raise instead of waiting); the first error is raised."""
    results, errors = [None] * n, [None] * n

    def body(r):
        try:
            results[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors[r] = e
            for c in comms:
                c.fail(r, f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def inputs(n, shape, dtype, seed=0, uneven_dim=None):
    rng = np.random.default_rng(seed)
    out = []
    for r in range(n):
        s = list(shape)
        if uneven_dim is not None:
            s[uneven_dim] += r  # all_gather takes members of different sizes along its dim
        if dtype.startswith("int"):
            out.append(tessera.tensor(rng.integers(-1000, 1000, size=s), dtype))
        else:
            out.append(tessera.tensor(rng.standard_normal(s) * 3, dtype))
    return out


def both(n, call, xs):
    """call(comm, rank, x) on the nccl backend (x on cuda:rank) and the local one
    (x on the host), as host tensors by rank."""
    nccl = _C.nccl_communicator("tp", members(n), timeout=60)
    local = _C.local_communicator("tp", [f"cpu:{i}" for i in range(n)], timeout=60)
    on_gpu = [x.to(f"cuda:{r}") for r, x in enumerate(xs)]
    got = run_ranks(n, lambda r: call(nccl, r, on_gpu[r]), [nccl])
    want = run_ranks(n, lambda r: call(local, r, xs[r]), [local])
    for r in range(n):
        assert got[r].device == f"cuda:{r}"
    return [g.to("cpu") for g in got], want


def assert_same_bits(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g.codes(), w.codes())


@needs(1)
def test_tessera_info_names_nccl():
    assert "nccl:        available" in _C.info_report()


@needs(2)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16", "fp64", "int32"])
@pytest.mark.parametrize("op", ["sum", "max", "mean"])
def test_allreduce_gives_the_local_backends_bits(n, dtype, op):
    if n > GPUS:
        pytest.skip(f"needs {n} GPUs")
    xs = inputs(n, (37, 129), dtype, seed=n)
    got, want = both(n, lambda c, r, x: c.allreduce(r, x, op), xs)
    assert_same_bits(got, want)
    # Every member holds the same result.
    for g in got[1:]:
        np.testing.assert_array_equal(g.codes(), got[0].codes())


@needs(2)
@pytest.mark.parametrize("algorithm", ["ring", "tree"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_ring_and_tree_orders_give_the_local_backends_bits(algorithm, dtype):
    n = min(GPUS, 4)
    xs = inputs(n, (1001,), dtype, seed=3)
    got, want = both(n, lambda c, r, x: c.allreduce(r, x, "sum", algorithm), xs)
    assert_same_bits(got, want)
    xs = inputs(n, (5, 7, 9), dtype, seed=4)
    got, want = both(n, lambda c, r, x: c.reduce_scatter(r, x, 1, "sum", algorithm), xs)
    assert_same_bits(got, want)


@needs(2)
@pytest.mark.parametrize("exchange", ["peer", "push", "nccl"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("algorithm", ["rank_order", "ring"])
def test_both_exchanges_give_the_local_backends_bits(monkeypatch, exchange, dtype, algorithm):
    # "peer": each GPU's combining kernel reads the others' parts over NVLink
    # (16 bytes at a time where aligned, element by element in the tail);
    # "push": the same kernel also writes every member's result (no NCCL);
    # "nccl": grouped send/recv into staging. Sizes: parts that are 16-byte
    # aligned with and without a tail, and unaligned ones.
    monkeypatch.setenv("TESSERA_NCCL_EXCHANGE", exchange)
    n = min(GPUS, 4)
    for elems in (4096 * n, 4096 * n + 24 * n + 5, (1 << 18) + 3):
        for op in ("sum", "max", "mean"):
            xs = inputs(n, (elems,), dtype, seed=elems % 97)
            got, want = both(n, lambda c, r, x: c.allreduce(r, x, op, algorithm), xs)
            assert_same_bits(got, want)


@needs(2)
@pytest.mark.parametrize("exchange", ["peer", "push", "nccl"])
def test_back_to_back_allreduces_whose_inputs_are_freed_and_reused(monkeypatch, exchange):
    # Each step's input is dropped (its memory returns to the caching
    # allocator and is reused by the next step's tensors) while the peers
    # may still be reading it: the all-gather must order that reuse after
    # their reads, or the later steps' bits drift from the local backend's.
    monkeypatch.setenv("TESSERA_NCCL_EXCHANGE", exchange)
    n = min(GPUS, 4)
    xs = inputs(n, (1 << 20,), "fp32", seed=21)
    nccl = _C.nccl_communicator("tp", members(n), timeout=60)
    local = _C.local_communicator("tp", [f"cpu:{i}" for i in range(n)], timeout=60)

    def steps(c, r, x):
        for _ in range(12):
            out = c.allreduce(r, x, "sum")
            x = tessera.ops.sub(tessera.ops.mul(out, 0.25), x)
        return x
    got = run_ranks(n, lambda r: steps(nccl, r, xs[r].to(f"cuda:{r}")).to("cpu"), [nccl])
    want = run_ranks(n, lambda r: steps(local, r, xs[r]), [local])
    assert_same_bits(got, want)


@needs(2)
def test_a_malformed_exchange_setting_is_an_argument_error(monkeypatch):
    monkeypatch.setenv("TESSERA_NCCL_EXCHANGE", "carrier-pigeon")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_NCCL_EXCHANGE='carrier-pigeon'"):
        _C.nccl_communicator("tp", members(2), timeout=60)


@needs(2)
def test_the_native_allreduce_is_nccls_sum():
    n = min(GPUS, 4)
    xs = inputs(n, (4096,), "fp32", seed=5)
    got, _ = both(n, lambda c, r, x: c.allreduce(r, x, "sum", "native"), xs)
    want = np.sum([x.numpy().astype(np.float64) for x in xs], axis=0)
    for g in got:
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-5)


@needs(2)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int32"])
def test_reduce_scatter_along_every_dim(dim, dtype):
    n = min(GPUS, 4)
    xs = inputs(n, (7, 6, 5), dtype, seed=6)  # 7, 6 and 5 split unevenly over 4
    got, want = both(n, lambda c, r, x: c.reduce_scatter(r, x, dim, "sum"), xs)
    assert_same_bits(got, want)


@needs(2)
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_all_gather_of_members_of_different_sizes(dim):
    n = min(GPUS, 4)
    xs = inputs(n, (3, 4, 5), "bf16", seed=7, uneven_dim=dim)
    got, want = both(n, lambda c, r, x: c.all_gather(r, x, dim), xs)
    assert_same_bits(got, want)


@needs(2)
@pytest.mark.parametrize("split,concat", [(0, 0), (0, 1), (1, 0), (2, 1), (1, 1)])
def test_all_to_all(split, concat):
    n = min(GPUS, 4)
    xs = inputs(n, (6, 9, 5), "fp32", seed=8)
    got, want = both(n, lambda c, r, x: c.all_to_all(r, x, split, concat), xs)
    assert_same_bits(got, want)


@needs(2)
def test_broadcast_and_send_recv():
    n = min(GPUS, 4)
    xs = inputs(n, (33, 3), "fp16", seed=9)
    got, want = both(n, lambda c, r, x: c.broadcast(r, x, n - 1), xs)
    assert_same_bits(got, want)
    nccl = _C.nccl_communicator("pp", members(2), timeout=60)
    x = tessera.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).to("cuda:0")

    def step(r):
        if r == 0:
            nccl.send(0, x, 1)
            return None
        return nccl.recv(1, 0, [3, 4], x.policy)
    out = run_ranks(2, step, [nccl])[1]
    assert out.device == "cuda:1"
    np.testing.assert_array_equal(out.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


@needs(1)
def test_a_one_member_communicator_is_the_identity():
    x = tessera.tensor(np.linspace(-1, 1, 50), "bf16").to("cuda:0")
    nccl = _C.nccl_communicator("tp", ["cuda:0"], timeout=30)
    for out in (nccl.allreduce(0, x, "sum"), nccl.all_gather(0, x, 0), nccl.reduce_scatter(0, x, 0, "sum"),
                nccl.broadcast(0, x, 0), nccl.all_to_all(0, x, 0, 0)):
        np.testing.assert_array_equal(out.codes(), x.codes())


@needs(2)
def test_mismatched_calls_and_failed_members_are_collective_errors():
    nccl = _C.nccl_communicator("tp", members(2), timeout=20)
    xs = [tessera.tensor(np.ones(8 + r, np.float32)).to(f"cuda:{r}") for r in range(2)]
    with pytest.raises(CollectiveError, match=r"disagree on the size of dim 0 \(8 vs 9\)"):
        run_ranks(2, lambda r: nccl.allreduce(r, xs[r], "sum"), [nccl])
    nccl = _C.nccl_communicator("tp", members(2), timeout=20)

    def body(r):
        if r == 1:
            raise RuntimeError("rank 1 stopped")
        return nccl.allreduce(r, xs[0], "sum")
    with pytest.raises((CollectiveError, RuntimeError), match="rank 1 stopped"):
        run_ranks(2, body, [nccl])
    # The NCCL communicators of the pair still work afterwards.
    nccl = _C.nccl_communicator("tp", members(2), timeout=20)
    ys = [tessera.tensor(np.full(8, r + 1, np.float32)).to(f"cuda:{r}") for r in range(2)]
    outs = run_ranks(2, lambda r: nccl.allreduce(r, ys[r], "sum"), [nccl])
    np.testing.assert_array_equal(outs[1].numpy(), np.full(8, 3, np.float32))


@needs(2)
def test_a_tensor_on_the_wrong_gpu_is_a_device_error():
    nccl = _C.nccl_communicator("tp", members(2), timeout=5)
    x = tessera.tensor(np.ones(4, np.float32)).to("cuda:1")
    with pytest.raises(tessera.DeviceError, match="member cuda:0 passed a tensor on cuda:1"):
        nccl.allreduce(0, x, "sum")


def test_an_unknown_backend_is_an_argument_error(monkeypatch):
    with pytest.raises(tessera.ArgumentError, match="'mpx'"):
        dist.mesh(devices=["cpu:0", "cpu:1"], axes=("tp",), shape=(2,), backend="mpx")
    monkeypatch.setenv("TESSERA_COLLECTIVE_BACKEND", "nope")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_COLLECTIVE_BACKEND is 'nope'"):
        dist.mesh(devices=["cpu:0", "cpu:1"], axes=("tp",), shape=(2,))


def test_virtual_devices_never_get_nccl():
    from tessera.dist._backend import chosen
    assert chosen(["cpu:0", "cpu:1"]) == "local"


def megatron(n, backend):
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,), backend=backend)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((128, 64)) / 8).astype(np.float32)
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))

    @tessera.jit
    def mlp(x, w1, w2):
        return tessera.ops.matmul(tessera.ops.gelu(tessera.ops.matmul(x, w1)), w2)

    y = mlp(dist.tensor(x, mesh=m), dist.tensor(w1, layout=col, mesh=m), dist.tensor(w2, layout=row, mesh=m))
    return y.numpy(), x, w1, w2


@needs(2)
def test_a_megatron_mlp_on_gpus_gives_the_same_bits_on_nccl_and_local():
    n = min(GPUS, 4)
    got, x, w1, w2 = megatron(n, "nccl")
    want, *_ = megatron(n, "local")
    np.testing.assert_array_equal(got, want)
    h = x.astype(np.float64) @ w1
    ref = (0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))) @ w2
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)


@needs(2)
@pytest.mark.parametrize("backend", ["local", "nccl"])
def test_an_index_launch_over_gpus(backend):
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("dp",), shape=(n,), backend=backend)
    rng = np.random.default_rng(12)
    data = rng.standard_normal((n, 1000)).astype(np.float32)
    X = dist.tensor(data, layout=dist.ShardSpec(partition=("row",), mesh_axes=("dp",)), mesh=m)
    outs = tessera.index_launch(axis="dp")(lambda p: tessera.allreduce(p, axis="dp"))(X.parts("dp"))
    want = data[0:1].copy()
    for r in range(1, n):
        want = want + data[r:r + 1]  # rank order, in fp32
    for r, o in enumerate(outs):
        assert o.device == f"cuda:{r}"
        np.testing.assert_array_equal(o.to("cpu").numpy(), want)


@tessera.kernel(tile=(64,), shared=16 * 1024)
def tp_gemm(A: tessera.f16["M", "K"], B: tessera.f16["K", "N/tp"], C: tessera.mut(tessera.f32["M", "N/tp"])):
    # Column parallel: each member multiplies the whole A by its columns of B.
    tiles_n = (N // tp + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[f16]((32, 32))
    b = tshared.alloc[f16]((32, 32))
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=32):
        cp_async.shared.global_(a, A[bm:bm + 32, k:k + 32])
        cp_async.shared.global_(b, B[k:k + 32, bn:bn + 32])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


@needs(2)
def test_the_specifications_tp_gemm_index_launch_on_gpus():
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,))
    rng = np.random.default_rng(13)
    a = rng.uniform(-1, 1, (64, 96)).astype(np.float16)
    b = rng.uniform(-1, 1, (96, 32 * n)).astype(np.float16)
    cols = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    A = dist.tensor(tessera.tensor(a.astype(np.float32), "fp16"), mesh=m)
    B = dist.tensor(tessera.tensor(b.astype(np.float32), "fp16"), layout=cols, mesh=m)
    C = dist.tensor(shape=(64, 32 * n), layout=cols, mesh=m)
    tiles = (64 // 32) * 1
    tessera.index_launch(axis="tp", grid=tiles)(tp_gemm)(A.parts("tp"), B.parts("tp"), C.parts("tp"))
    assert [s.device for s in C.shards] == members(n)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(C.numpy(), want, rtol=1e-4, atol=1e-4)


@needs(2)
def test_dp_training_with_fixed_microbatches_is_bitwise_across_dp_sizes_on_gpus():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import dp_training
    x, t, w1, w2 = dp_training.problem()
    sizes = [dp for dp in (1, 2, 4) if dp <= GPUS]
    runs = {dp: dp_training.dp_train_bitwise(x, t, w1, w2, steps=20, dp=dp, microbatches=4, devices=members(dp))
            for dp in sizes}
    losses, n1, n2 = runs[1][0]
    for dp in sizes[1:]:
        for replica in runs[dp]:
            assert replica[0] == losses
            np.testing.assert_array_equal(replica[1], n1)
            np.testing.assert_array_equal(replica[2], n2)
    cpu = dp_training.dp_train_bitwise(x, t, w1, w2, steps=20, dp=1, microbatches=4)[0]
    np.testing.assert_allclose(losses, cpu[0], rtol=1e-5)
    np.testing.assert_allclose(n1, cpu[1], rtol=1e-4, atol=1e-5)


def row_parallel_inputs(n, seed, m):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 16 * n)).astype(np.float32)
    w = rng.standard_normal((16 * n, 8)).astype(np.float32)
    X = dist.tensor(x, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    return x, w, X, W


@needs(2)
def test_a_partitioned_step_with_an_allreduce_replays_as_a_cuda_graph():
    # relu of the row-parallel product needs its sum inside the function (an
    # allreduce): captured on the first call, replayed on new inputs after.
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,), backend="nccl")
    fn = lambda a, b: tessera.ops.relu(tessera.ops.matmul(a, b))  # noqa: E731
    graphed, plain = tessera.jit(capture_graph=True)(fn), tessera.jit(fn)
    for seed in range(3):
        x, w, X, W = row_parallel_inputs(n, 20 + seed, m)
        got = graphed(X, W).numpy()
        np.testing.assert_array_equal(got, plain(X, W).numpy())
        np.testing.assert_allclose(got, np.maximum(x.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)
    assert graphed.inspect_ir("graph").count("graph.allreduce ") == 1
    for r in range(n):
        assert graphed._last.executable(r).graphs == 1  # captured once, replayed twice


@needs(2)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_collective_in_a_captured_graph_gives_the_uncaptured_bits(dtype):
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,), backend="nccl")

    def body(p):
        s = tessera.allreduce(p * 2.0, axis="tp")
        g = tessera.all_gather(p, axis="tp", dim=1)
        r = tessera.reduce_scatter(g * 0.5, axis="tp", dim=0)
        return s + 1.0, g, r

    captured = tessera.jit(capture_graph=True)(body)
    plain = tessera.jit(body)
    for seed in range(3):
        rng = np.random.default_rng(40 + seed)
        data = tessera.tensor(rng.standard_normal((8 * n, 12)).astype(np.float32), dtype)
        X = dist.tensor(data, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
        got = tessera.index_launch(axis="tp")(captured)(X.parts("tp"))
        want = tessera.index_launch(axis="tp")(plain)(X.parts("tp"))
        for r in range(n):
            for g, w in zip(got[r], want[r]):
                assert g.device == f"cuda:{r}"
                np.testing.assert_array_equal(g.to("cpu").codes(), w.to("cpu").codes())
    # The local backend's bits, on the host.
    cpu = dist.mesh(devices=[f"cpu:{i}" for i in range(n)], axes=("tp",), shape=(n,))
    host = tessera.index_launch(axis="tp")(plain)(dist.tensor(
        data, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=cpu).parts("tp"))
    for r in range(n):
        for g, w in zip(got[r], host[r]):
            np.testing.assert_array_equal(g.to("cpu").codes(), w.codes())


@needs(2)
def test_a_member_that_fails_before_its_replay_makes_the_others_raise():
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,), backend="nccl")
    step = tessera.jit(capture_graph=True)(lambda p: tessera.allreduce(p, axis="tp"))
    X = dist.tensor(np.ones((n, 256), np.float32), layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)),
                    mesh=m)
    tessera.index_launch(axis="tp")(step)(X.parts("tp"))  # built and run once

    seen = {}

    def replay(p):
        r = tessera.dist.axis_index("tp")
        if r == n - 1:
            raise RuntimeError("member gone")
        try:
            return step(p).to("cpu")  # the read waits on the replayed allreduce
        except CollectiveError as e:
            seen[r] = str(e)
            raise

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="member gone"):
        tessera.index_launch(axis="tp")(replay)(X.parts("tp"))
    # Told by the failed member, not by the timeout (TESSERA_COLLECTIVE_TIMEOUT, 300 s).
    assert time.monotonic() - start < 60
    assert sorted(seen) == list(range(n - 1))
    for message in seen.values():
        assert f"member cuda:{n - 1} (rank {n - 1}) failed: RuntimeError: member gone" in message
    # The graph held the aborted communicators: the next call captures again.
    for o in tessera.index_launch(axis="tp")(step)(X.parts("tp")):
        np.testing.assert_array_equal(o.to("cpu").numpy(), np.full((1, 256), n, np.float32))


@needs(2)
def test_capturing_a_collective_of_the_local_backend_is_a_clear_error():
    n = min(GPUS, 4)
    m = dist.mesh(devices=members(n), axes=("tp",), shape=(n,), backend="local")
    _, _, X, W = row_parallel_inputs(n, 14, m)
    f = tessera.jit(capture_graph=True)(lambda a, b: tessera.ops.relu(tessera.ops.matmul(a, b)))
    with pytest.raises(tessera.ArgumentError, match="graph.allreduce over mesh axis 'tp' cannot be captured into a "
                                                    "CUDA graph: the local collective backend moves shards through "
                                                    "the host"):
        f(X, W)


@needs(2)
def test_nccl_across_mpi_processes():
    # GPUs driven by two processes: NCCL's unique id over MPI, every collective
    # bitwise against the local backend, a tp step equal to the mpi backend's.
    import os
    import shutil
    import subprocess
    import sys
    mpirun = shutil.which("mpirun")
    if mpirun is None or not _C.mpi_probe()["available"]:
        pytest.skip("needs mpirun and MPI")
    n = min(GPUS, 4)
    program = os.path.join(os.path.dirname(__file__), "mpi_programs", "nccl_collectives.py")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TESSERA_COLLECTIVE_TIMEOUT="60", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               NCCL_NVLS_ENABLE="0")
    p = subprocess.run([mpirun, "--oversubscribe", "-np", "2", sys.executable, program, str(n)], env=env,
                       capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert sum(line.startswith("ok ") for line in out.splitlines()) == 14, out


@needs(2)
@pytest.mark.parametrize("mode", ["raise", "fail", "exit", "mismatch", "oom"])
def test_a_faulty_process_makes_the_others_raise_naming_it_on_gpus(mode):
    # NCCL across two processes: a process that raises, fails a member, exits
    # or calls another collective makes the other raise a CollectiveError
    # naming the culprit, before anything is queued on a GPU; nothing hangs.
    # "oom": the culprit runs out of memory after the others queued their
    # part; their GPUs wait until the culprit's notice aborts NCCL, and the
    # CollectiveError comes when they read their results.
    import os
    import re
    import shutil
    import subprocess
    import sys
    import time
    mpirun = shutil.which("mpirun")
    if mpirun is None or not _C.mpi_probe()["available"]:
        pytest.skip("needs mpirun and MPI")
    n = 4 if GPUS >= 4 else 2
    program = os.path.join(os.path.dirname(__file__), "mpi_programs", "faults.py")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TESSERA_COLLECTIVE_TIMEOUT="20", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               NCCL_NVLS_ENABLE="0", FAULT_DEVICES="cuda", FAULT_MEMBERS=str(n))
    start = time.monotonic()
    p = subprocess.run([mpirun, "--oversubscribe", "-np", "2", sys.executable, program, mode], env=env,
                       capture_output=True, text=True, timeout=200)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert re.search(r"process 0 caught after \d+\.\d s", out), out
    culprit = rf"cuda:{n // 2} \(rank {n // 2}, MPI process 1\)"
    if mode == "mismatch":
        assert "members disagree on the operation (allreduce vs all_gather)" in out, out
    else:
        assert re.search(culprit, out), out
    if mode == "oom":
        assert re.search(r"member \d raised OutOfMemoryError", out), out
        assert "would pass TESSERA_CUDA_MEMORY_LIMIT (640 MiB" in out, out
        assert re.search(r"process 0 caught after \d+\.\d s: .*allreduce .*member cuda:\d", out), out
    assert "timed out" not in out and time.monotonic() - start < 120, out


def test_a_malformed_nccl_across_processes_setting_is_an_argument_error(monkeypatch):
    from tessera.dist._backend import _nccl_across_processes
    monkeypatch.setenv("TESSERA_NCCL_ACROSS_PROCESSES", "false")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_NCCL_ACROSS_PROCESSES is 'false'"):
        _nccl_across_processes()
    monkeypatch.setenv("TESSERA_NCCL_ACROSS_PROCESSES", "0")
    assert not _nccl_across_processes()
