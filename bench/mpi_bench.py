"""The mpi backend's allreduce against a bare MPI_Allreduce of the same buffers.

    mpirun -np 2 .venv/bin/python bench/mpi_bench.py [MAX_MIB]   # (as root: --allow-run-as-root)

One member per process, fp32 sums from 4 KiB up to MAX_MIB (default 64):
Tessera's deterministic rank-order allreduce (bytes moved with MPI, combined
by Tessera in rank order) and MPI_Allreduce(MPI_FLOAT, MPI_SUM) called
through ctypes on the same libmpi; process 0 prints the median times and
their ratio.
"""

import ctypes
import sys
import time

import numpy as np

import tessera
from tessera import _C, dist

W, ME = dist.world_size(), dist.rank()
if W < 2:
    sys.exit("run it under mpirun -np 2 (or more)")
max_mib = float(sys.argv[1]) if len(sys.argv) > 1 else 64
lib = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)  # already loaded and initialized by tessera
world = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_comm_world")))
mpi_float = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_float")))
mpi_sum = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "ompi_mpi_op_sum")))
lib.MPI_Allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p]
lib.MPI_Barrier.argtypes = [ctypes.c_void_p]

comm = _C.mpi_communicator("bench", [f"process:{p}" for p in range(W)], list(range(W)), timeout=300)


def median_time(fn, reps):
    times = []
    for _ in range(reps):
        lib.MPI_Barrier(world)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


size = 4096
if ME == 0:
    print(f"{W} processes, fp32 sum; median of repetitions")
    print(f"{'bytes':>12} {'tessera ms':>11} {'MPI_Allreduce ms':>17} {'ratio':>7}")
while size <= max_mib * 2**20:
    n = size // 4
    a = np.random.default_rng(ME).standard_normal(n).astype(np.float32)
    x = tessera.tensor(a)
    out = np.empty_like(a)
    reps = 20 if size <= 2**20 else 5
    t_tessera = median_time(lambda: comm.allreduce(ME, x), reps)
    t_mpi = median_time(lambda: lib.MPI_Allreduce(a.ctypes.data, out.ctypes.data, n, mpi_float, mpi_sum, world), reps)
    if ME == 0:
        print(f"{size:>12} {t_tessera * 1e3:>11.3f} {t_mpi * 1e3:>17.3f} {t_tessera / t_mpi:>7.2f}", flush=True)
    size *= 4
