"""The mpi collective backend (tessera/dist/mpi.h, tessera.dist._mpi).

Programs in tests/python/mpi_programs run under ``mpirun -np 1``, ``2`` and
``4 --oversubscribe``: every collective checked bit for bit against the
local backend, partitioned @jit steps, an eager op and an index launch over
a mesh spread across processes checked against one process, and the fault
cases (a rank that raises, fails a member, exits, sleeps past the timeout,
calls another collective): each must end within the timeout with a
CollectiveError naming the culprit and a non-zero exit status. Skipped, with
the reason, where mpirun or libmpi is absent."""

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import _C, dist
from tessera.errors import ArgumentError

PROGRAMS = Path(__file__).parent / "mpi_programs"
MPIRUN = shutil.which("mpirun")
PROBE = _C.mpi_probe()
needs_mpirun = pytest.mark.skipif(
    MPIRUN is None or not PROBE["available"],
    reason=f"needs Open MPI (mpirun: {MPIRUN or 'absent'}; libmpi: {PROBE['reason'] or 'available'}); "
           f"scripts/setup.sh installs openmpi-bin and libopenmpi-dev")


def mpirun(np_, *args, timeout=30.0, env=None, limit=240):
    """Runs ``mpirun -np np_ python args...``; (exit status, output, seconds)."""
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             TESSERA_COLLECTIVE_TIMEOUT=str(timeout), OMPI_MCA_btl_vader_single_copy_mechanism="none")
    e.update(env or {})
    start = time.monotonic()
    p = subprocess.run([MPIRUN, "--oversubscribe", "-np", str(np_), sys.executable, *map(str, args)], env=e,
                       capture_output=True, text=True, timeout=limit)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


def test_outside_mpirun_this_is_process_0_of_1():
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        pytest.skip("the test suite itself runs under mpirun")
    assert (dist.rank(), dist.world_size()) == (0, 1)
    m = dist.mesh(devices=["cpu:0", "cpu:1", "cpu:2"], axes=("x",), shape=(3,))
    assert dist.local_devices(m) == ["cpu:0", "cpu:1", "cpu:2"]
    with m:
        assert dist.local_devices() == ["cpu:0", "cpu:1", "cpu:2"]


def test_tessera_info_says_whether_mpi_is_available():
    report = _C.info_report()
    line = next(l for l in report.splitlines() if l.strip().startswith("mpi:"))
    if PROBE["available"]:
        assert "available (" in line and "CUDA-aware: " in line and PROBE["version"] in line
    else:
        assert "unavailable: " in line and PROBE["reason"] in line


def test_a_missing_libmpi_is_reported_not_fatal(tmp_path):
    code = ("from tessera import _C; p = _C.mpi_probe(); print(p['available'], p['reason']); "
            "import tessera; print('info ok' if 'mpi:         unavailable' in _C.info_report() else 'no line')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, TESSERA_MPI_LIBRARY="libmpi-that-does-not-exist.so.40"))
    assert out.returncode == 0, out.stderr
    assert "False libmpi-that-does-not-exist.so.40 could not be loaded" in out.stdout
    assert "info ok" in out.stdout


def test_mesh_sizes_must_divide_over_the_processes():
    with pytest.raises(ArgumentError, match="multiple of the process count"):
        _C.mpi_owner(0, 6, 4)
    assert [_C.mpi_owner(r, 8, 4) for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_mpi_backend_in_one_process_gives_the_local_bits():
    # Every member in this process: the same message exchange, filed without MPI.
    n = 3
    members = [f"cpu:{i}" for i in range(n)]
    rng = np.random.default_rng(0)
    xs = [tessera.tensor(rng.standard_normal((5, 7)) * 3, "bf16") for _ in range(n)]

    def on(comm, fn):
        out = [None] * n
        ts = [threading.Thread(target=lambda r=r: out.__setitem__(r, fn(comm, r))) for r in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    for fn in (lambda c, r: c.allreduce(r, xs[r], "sum", "tree"), lambda c, r: c.reduce_scatter(r, xs[r], 1),
               lambda c, r: c.all_gather(r, xs[r], 0), lambda c, r: c.all_to_all(r, xs[r], 1, 0),
               lambda c, r: c.broadcast(r, xs[r], 2)):
        got = on(_C.mpi_communicator("x", members, [0] * n, timeout=30), fn)
        want = on(_C.local_communicator("x", members, timeout=30), fn)
        for g, w in zip(got, want):
            assert g is not None and g.shape == w.shape
            np.testing.assert_array_equal(g.codes(), w.codes())


def test_a_group_across_processes_cannot_take_the_local_backend(monkeypatch):
    from tessera.dist import _backend, _mpi
    monkeypatch.setattr(_mpi, "world_size", lambda: 2)
    monkeypatch.setattr(_mpi, "rank", lambda: 0)
    m = dist.mesh(devices=["cpu:0", "cpu:1"], axes=("x",), shape=(2,), backend="local")
    with pytest.raises(ArgumentError, match="driven by several MPI processes"):
        _backend.chosen(list(m.devices), m)
    assert _backend.chosen(list(m.devices), dist.mesh(devices=["cpu:0", "cpu:1"], axes=("x",), shape=(2,))) == "mpi"


def ok_lines(out):
    return [l for l in out.splitlines() if l.startswith("ok ")]


@needs_mpirun
@pytest.mark.parametrize("np_,members", [(1, 4), (2, 4), (4, 4), (4, 8)])
def test_every_collective_gives_the_local_backends_bits(np_, members):
    rc, out, _ = mpirun(np_, PROGRAMS / "collectives.py", members)
    assert rc == 0, out
    lines = ok_lines(out)
    assert len(lines) == 52 and lines[-1] == "ok send/recv", out


@needs_mpirun
def test_jit_steps_eager_ops_and_launches_over_processes_match_one_process(tmp_path):
    one, two, four = tmp_path / "one.npz", tmp_path / "two.npz", tmp_path / "four.npz"
    p = subprocess.run([sys.executable, PROGRAMS / "tp_step.py", one], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for np_, path in ((2, two), (4, four)):
        rc, out, _ = mpirun(np_, PROGRAMS / "tp_step.py", path)
        assert rc == 0, out
        assert f"from {np_} process(es)" in out
        want, got = np.load(one), np.load(path)
        assert sorted(want) == sorted(got) == ["dp_step", "eager_gemm", "kernel_launch", "launch_allreduce", "tp_mlp",
                                               "tp_mlp_again"]
        for k in want:
            assert want[k].dtype == got[k].dtype and want[k].shape == got[k].shape, k
            np.testing.assert_array_equal(want[k].view(np.uint32), got[k].view(np.uint32), err_msg=k)


FAULTS = {
    "raise": r"CollectiveError: .*allreduce #2 over mesh axis 'tp': member cpu:2 \(rank 2, MPI process 1\) is gone: "
             r"its MPI process 1 failed \(it raised RuntimeError: boom on purpose\)",
    "fail": r"CollectiveError: .*member cpu:2 \(rank 2, MPI process 1\) failed: ValueError: member failed on purpose",
    "exit": r"CollectiveError: .*member cpu:2 \(rank 2, MPI process 1\) is gone: its MPI process 1 exited without "
            r"taking part",
    # Whichever member of each process meets the other first is named: process 0 holds cpu:0 and cpu:1,
    # process 1 cpu:2 and cpu:3.
    "mismatch": r"members disagree on the operation \(allreduce vs all_gather\): cpu:[01] called allreduce of \[3, 5\] "
                r"fp32 \(sum\), cpu:[23] called all_gather of \[3, 5\] fp32 \(dim 0\)",
}


@needs_mpirun
@pytest.mark.parametrize("mode", sorted(FAULTS))
def test_a_faulty_rank_makes_the_others_raise_naming_it(mode):
    rc, out, seconds = mpirun(2, PROGRAMS / "faults.py", mode, timeout=20)
    assert rc != 0, out
    # Process 0 raised (not timed out): the notice came at once.
    assert re.search(r"process 0 caught after \d+\.\d s", out), out
    assert re.search(FAULTS[mode], out), out
    assert "timed out" not in out and seconds < 20, out
    if mode == "mismatch":  # both sides saw it
        assert "process 1 caught after" in out, out


@needs_mpirun
def test_a_rank_that_sleeps_past_the_timeout_is_named_with_the_flight_record():
    rc, out, seconds = mpirun(2, PROGRAMS / "faults.py", "sleep", 4, timeout=1.5)
    assert rc != 0, out
    assert re.search(r"process 0 caught after 1\.\d s: .*allreduce #2 over mesh axis 'tp': timed out after 1\.5 s "
                     r"\(TESSERA_COLLECTIVE_TIMEOUT\) waiting for cpu:2 \(rank 2, MPI process 1\)", out), out
    assert "flight recorder of MPI process 0" in out
    assert re.search(r"allreduce #1 over mesh axis 'tp' by cpu:0, allreduce of \[3, 5\] fp32 \(sum\): done", out)
    assert re.search(r"allreduce #2 over mesh axis 'tp' by cpu:[01], .*: timed out", out)
    # The sleeper learns it when it wakes, instead of waiting in its turn.
    assert re.search(r"process 1 caught after 0\.\d s: .*member cpu:[01] \(rank [01], MPI process 0\) failed: timed out",
                     out), out
    assert seconds < 30, out


@needs_mpirun
def test_a_mesh_that_does_not_divide_over_the_processes_is_an_argument_error():
    code = ("import tessera\nfrom tessera import dist\n"
            "m = dist.mesh(devices=[f'cpu:{i}' for i in range(6)], axes=('x',), shape=(6,))\n"
            "try:\n    dist.local_devices(m)\nexcept tessera.ArgumentError as e:\n    print('argument error:', e)\n"
            "# Fewer devices than processes: every process drives the whole mesh.\n"
            "small = dist.mesh(devices=['cpu:0', 'cpu:1'], axes=('x',), shape=(2,))\n"
            "print('small mesh on process', dist.rank(), dist.local_devices(small))\n")
    rc, out, _ = mpirun(4, "-c", code)
    assert rc == 0, out
    assert out.count("argument error:") == 4 and "a mesh of 6 devices cannot be spread over 4 MPI processes" in out
    assert out.count("['cpu:0', 'cpu:1']") == 4, out


EXAMPLES = Path(__file__).parents[2] / "examples"


@needs_mpirun
@pytest.mark.parametrize("example,np_", [("dp_training", 2), ("tp_megatron", 2), ("pipeline", 2), ("moe", 2),
                                         ("dp_tp_pp", 4), ("quickstart", 2)])
def test_the_examples_run_unchanged_under_mpirun(example, np_):
    # Each checks itself against one device and prints "<name>: ok" (the quickstart its summary).
    rc, out, _ = mpirun(np_, EXAMPLES / f"{example}.py", timeout=120, limit=600)
    assert rc == 0, out
    want = "called 4 times" if example == "quickstart" else f"{example}: ok"
    assert out.count(want) == np_, out
