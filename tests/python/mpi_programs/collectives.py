"""Run under mpirun by tests/python/test_dist_mpi.py: every collective of the
mpi backend over members spread across the processes, checked bit for bit
against the local backend over the same inputs (computed whole in each
process). Prints one "ok <case>" line per case from process 0; any
difference raises (and the job exits non-zero)."""

import sys

import numpy as np

import tessera
from tessera import _C, dist
from member_threads import inputs as member_inputs, threads

N = int(sys.argv[1]) if len(sys.argv) > 1 else 4  # members
W, ME = dist.world_size(), dist.rank()
MEMBERS = [f"cpu:{i}" for i in range(N)]
OWNERS = [_C.mpi_owner(r, N, W) for r in range(N)]
MINE = [r for r in range(N) if OWNERS[r] == ME]


def inputs(shape, dtype, seed, uneven_dim=None):
    return member_inputs(N, shape, dtype, seed, uneven_dim)


def check(name, call, xs):
    mpi = _C.mpi_communicator("tp", MEMBERS, OWNERS, timeout=30)
    assert mpi.backend == "mpi"
    local = _C.local_communicator("tp", MEMBERS, timeout=30)
    got = threads(MINE, lambda r: call(mpi, r, xs[r]))
    want = threads(range(N), lambda r: call(local, r, xs[r]))
    for r in MINE:
        g, w = got[r], want[r]
        assert g.shape == w.shape and g.dtype == w.dtype, (name, r, g, w)
        if not np.array_equal(g.codes(), w.codes()):
            raise AssertionError(f"{name}: member {r} differs from the local backend")
    if ME == 0:
        print("ok", name, flush=True)


for dtype in ("fp32", "bf16", "int32"):
    for op in ("sum", "mean", "max", "min"):
        check(f"allreduce {dtype} {op}", lambda c, r, x: c.allreduce(r, x, op), inputs((37, 29), dtype, 1))
for algorithm in ("ring", "tree"):
    for dtype in ("fp32", "bf16"):
        check(f"allreduce {dtype} {algorithm}", lambda c, r, x: c.allreduce(r, x, "sum", algorithm),
              inputs((1001,), dtype, 2))
        check(f"reduce_scatter {dtype} {algorithm}", lambda c, r, x: c.reduce_scatter(r, x, 1, "sum", algorithm),
              inputs((5, 7, 9), dtype, 3))
# Packed storage (two fp4 codes a byte) reduces whole.
check("allreduce fp4_e2m1 sum", lambda c, r, x: c.allreduce(r, x, "sum"), inputs((5, 7), "fp4_e2m1", 4))
for dtype in ("fp32", "bf16", "int32"):
    for dim in (0, 1, -1):
        check(f"reduce_scatter {dtype} dim {dim} (uneven)", lambda c, r, x: c.reduce_scatter(r, x, dim, "sum"),
              inputs((7, 6, 5), dtype, 5))
        check(f"all_gather {dtype} dim {dim} (uneven)", lambda c, r, x: c.all_gather(r, x, dim),
              inputs((3, 2, 4), dtype, 6, uneven_dim=dim % 3))
    for split, concat in ((0, 1), (1, 0), (2, 2)):
        check(f"all_to_all {dtype} split {split} concat {concat} (uneven)",
              lambda c, r, x: c.all_to_all(r, x, split, concat), inputs((7, 6, 5), dtype, 7))
    check(f"broadcast {dtype}", lambda c, r, x: c.broadcast(r, x, N - 1), inputs((4, 3), dtype, 8))

# Point to point: a ring, twice (messages are numbered per pair), across processes.
comm = _C.mpi_communicator("pp", MEMBERS, OWNERS, timeout=30)
xs = inputs((3, 4), "bf16", 9)


def ring(r):
    comm.send(r, xs[r], (r + 1) % N)
    comm.send(r, xs[r], (r + 1) % N)
    a = comm.recv(r, (r - 1) % N, [3, 4], "bf16")
    b = comm.recv(r, (r - 1) % N, [3, 4], "bf16")
    return a, b


for r, (a, b) in threads(MINE, ring).items():
    want = xs[(r - 1) % N].codes()
    assert np.array_equal(a.codes(), want) and np.array_equal(b.codes(), want), f"recv on member {r}"
if ME == 0:
    print("ok send/recv", flush=True)
