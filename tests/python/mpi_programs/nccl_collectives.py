"""Run under mpirun by tests/python/test_dist_nccl.py on a machine with GPUs:
the nccl backend over GPUs driven by several processes (NCCL's unique id
sent over MPI). Every collective is checked bit for bit against the local
backend on the same inputs, and a tensor-parallel @jit step against the same
step with the mpi backend. Prints "ok <case>" lines from process 0; any
difference raises (and the job exits non-zero)."""

import sys

import numpy as np

import tessera
from tessera import _C, dist
from tessera.dist._backend import chosen, make_communicator
from member_threads import inputs as member_inputs, threads

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2  # members (GPUs)
W, ME = dist.world_size(), dist.rank()
MEMBERS = [f"cuda:{i}" for i in range(N)]
MESH = dist.mesh(devices=MEMBERS, axes=("tp",), shape=(N,))
assert chosen(MEMBERS, MESH) == "nccl", chosen(MEMBERS, MESH)
OWNERS = [_C.mpi_owner(r, N, W) for r in range(N)]
MINE = [r for r in range(N) if OWNERS[r] == ME]


def inputs(shape, dtype, seed, uneven_dim=None):
    return member_inputs(N, shape, dtype, seed, uneven_dim)


COMM = make_communicator("tp", MEMBERS, MESH)
LOCAL = _C.local_communicator("tp", [f"cpu:{i}" for i in range(N)], timeout=60)


def check(name, call, xs):
    got = threads(MINE, lambda r: call(COMM, r, xs[r].to(MEMBERS[r])).to("cpu"))
    want = threads(range(N), lambda r: call(LOCAL, r, xs[r]))
    for r in MINE:
        if not np.array_equal(got[r].codes(), want[r].codes()):
            raise AssertionError(f"{name}: member {r} differs from the local backend")
    if ME == 0:
        print("ok", name, flush=True)


for dtype in ("fp32", "bf16"):
    check(f"allreduce {dtype}", lambda c, r, x: c.allreduce(r, x, "sum"), inputs((37, 129), dtype, 1))
    check(f"allreduce {dtype} tree", lambda c, r, x: c.allreduce(r, x, "sum", "tree"), inputs((1001,), dtype, 2))
    check(f"reduce_scatter {dtype}", lambda c, r, x: c.reduce_scatter(r, x, 1, "sum"), inputs((7, 6, 5), dtype, 3))
    check(f"all_gather {dtype}", lambda c, r, x: c.all_gather(r, x, 1), inputs((3, 4, 5), dtype, 4, uneven_dim=1))
    check(f"all_to_all {dtype}", lambda c, r, x: c.all_to_all(r, x, 0, 1), inputs((6, 9, 5), dtype, 5))
    check(f"broadcast {dtype}", lambda c, r, x: c.broadcast(r, x, N - 1), inputs((33, 3), dtype, 6))

# A mismatch is reported before anything is queued on a GPU.
try:
    threads(MINE, lambda r: COMM.allreduce(r, tessera.tensor(np.ones(8 + r, np.float32)).to(MEMBERS[r]), "sum"))
    raise AssertionError("a mismatched allreduce did not raise")
except tessera.errors.CollectiveError as e:
    assert "disagree on the size of dim 0" in str(e), e
if ME == 0:
    print("ok mismatch", flush=True)


def megatron(backend):
    m = dist.mesh(devices=MEMBERS, axes=("tp",), shape=(N,), backend=backend)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((128, 64)) / 8).astype(np.float32)
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
    mlp = tessera.jit(lambda x, w1, w2: tessera.ops.matmul(tessera.ops.gelu(tessera.ops.matmul(x, w1)), w2))
    return mlp(dist.tensor(x, mesh=m), dist.tensor(w1, layout=col, mesh=m),
               dist.tensor(w2, layout=row, mesh=m)).numpy()


a, b = megatron("nccl"), megatron("mpi")
assert np.array_equal(a, b), "the tp step differs between the nccl and mpi backends"
if ME == 0:
    print("ok tp step", flush=True)
