"""Run under mpirun by tests/python/test_dist_mpi.py with a short
TESSERA_COLLECTIVE_TIMEOUT: one process misbehaves (argv[1]) while the
others call collectives over 4 members spread across the processes. The
others must raise a CollectiveError naming the culprit, never hang.

  raise     process 1 raises before its collective (its exception reaches the others)
  fail      a member thread of process 1 raises and fails itself in the communicator
  exit      process 1 exits (status 3) without taking part
  sleep     process 1 sleeps past the timeout, then calls
  mismatch  process 1 calls all_gather where the others call allreduce
  oom       (GPUs) process 1 cannot allocate its part's staging after the
            others queued theirs on their GPUs; they wait on the GPU, and
            must raise when they read their results
"""

import faulthandler
import os
import sys
import time

import numpy as np

import tessera
from tessera import _C, dist
from member_threads import threads

MODE = sys.argv[1]
if MODE == "oom" and int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")) == 1:
    # Room for the input and the result of the big allreduce, not for its staging.
    os.environ["TESSERA_CUDA_MEMORY_LIMIT"] = "640M"
# FAULT_DEVICES=cuda: the members are GPUs and the communicator is the nccl
# backend's across processes (tests/python/test_dist_nccl.py); FAULT_MEMBERS sets N.
ON_GPUS = os.environ.get("FAULT_DEVICES") == "cuda"
if ON_GPUS:
    # A process still here after 25 s prints where each of its threads
    # waits (mpirun ends the job about 30 s in, when the culprit gives up
    # waiting for the others' goodbyes).
    faulthandler.dump_traceback_later(25)
N = int(os.environ.get("FAULT_MEMBERS", "4"))
W, ME = dist.world_size(), dist.rank()
OWNERS = [_C.mpi_owner(r, N, W) for r in range(N)]
MINE = [r for r in range(N) if OWNERS[r] == ME]
if ON_GPUS:
    from tessera.dist._backend import make_communicator
    DEVICES = [f"cuda:{i}" for i in range(N)]
    comm = make_communicator("tp", DEVICES, dist.mesh(devices=DEVICES, axes=("tp",), shape=(N,)))
    assert comm.backend == "nccl", comm.backend
    xs = {r: tessera.tensor(np.ones((3, 5), np.float32)).to(DEVICES[r]) for r in MINE}
else:
    comm = _C.mpi_communicator("tp", [f"cpu:{i}" for i in range(N)], OWNERS)
    xs = {r: tessera.tensor(np.ones((3, 5), np.float32)) for r in MINE}


threads(MINE, lambda r: comm.allreduce(r, xs[r]))  # one collective that works
culprit = ME == 1
if culprit and MODE == "raise":
    raise RuntimeError("boom on purpose")
if culprit and MODE == "exit":
    sys.exit(3)
if culprit and MODE == "sleep":
    time.sleep(float(sys.argv[2]))


if MODE == "oom":
    big = {r: tessera.tensor(np.full(1 << 26, 0.5, np.float32)).to(DEVICES[r]) for r in MINE}


def call(r):
    if MODE == "oom":
        # Both members here may run out; the first aborts, the other may
        # then see the aborted communicators: each says what it raised.
        try:
            return comm.allreduce(r, big[r]).numpy()
        except tessera.TesseraError as e:
            print(f"member {r} raised {type(e).__name__}", flush=True)
            raise
    if culprit and MODE == "fail":
        comm.fail(r, "ValueError: member failed on purpose")
        raise ValueError("member failed on purpose")
    if culprit and MODE == "mismatch":
        return comm.all_gather(r, xs[r], 0)
    return comm.allreduce(r, xs[r])


start = time.monotonic()
try:
    threads(MINE, call)
except tessera.CollectiveError as e:
    print(f"process {ME} caught after {time.monotonic() - start:.1f} s: {e}", flush=True)
    if MODE == "oom" and ME == 0:
        # The job ends when a process exits with an error: let the culprit
        # say what its own members raised first.
        time.sleep(3)
    if MODE == "sleep" and ME == 0:
        # Likewise let the sleeper wake and say what it learned: under load
        # process 0's exit ended the job before it did.
        time.sleep(float(sys.argv[2]))
    raise
print(f"process {ME} finished without an error", flush=True)
