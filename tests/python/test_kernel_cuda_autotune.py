"""Autotuning kernels launched on CUDA tensors from Python: ``k[grid](...)`` with
tensors on cuda:0 searches the autotune space with the CUDA backend (candidates
timed with CUDA events), reports progress as the CPU search does, runs the
winner once on the caller's output, and caches the choice per device: a
second launch is silent, host arguments of the same shapes get a search of
their own. ``k.autotune(...)`` returns the choice without launching. The
results are checked against numpy float64 with the bound of sequential fp32
accumulation (kernel_helpers.fp32_gemm_bound). Skipped without a GPU."""

# Kernel bodies below name the kernel language's built-ins (tile, tshared, shape
# symbols, ...): Python only compiles them; the C++ front end reads their text.
import re

import numpy as np
import pytest

import tessera
from tessera import _C
from kernel_helpers import cdiv, fp32_gemm_bound, kernel_cache  # noqa: F401

pytestmark = [
    pytest.mark.usefixtures("kernel_cache"),
    pytest.mark.skipif(not _C._cuda_available(), reason=f"no CUDA device: {_C._cuda_unavailable_reason()}"),
]


@tessera.kernel.autotune(space=dict(BM=[32, 64], BN=[32, 64], BK=[16]), tile=(128,), shared=32 * 1024)
def gemm_on_gpu(A: tessera.f32["M", "K"], B: tessera.f32["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a = tshared.alloc[f32]((BM, BK))
    b = tshared.alloc[f32]((BK, BN))
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=2):
        cp_async.shared.global_(a, A[bm:bm + BM, k:k + BK])
        cp_async.shared.global_(b, B[k:k + BK, bn:bn + BN])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)


def grid_for(m, n):
    return lambda c: cdiv(m, c["BM"]) * cdiv(n, c["BN"])


def nan_output(m, n):
    return tessera.tensor(np.full((m, n), np.nan, dtype=np.float32)).to("cuda:0")


def test_autotuned_gemm_on_cuda_tensors(rng, capfd, monkeypatch):
    monkeypatch.delenv("TESSERA_LOG", raising=False)
    m, n, k = 100, 70, 50
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    da, db = tessera.tensor(a).to("cuda:0"), tessera.tensor(b).to("cuda:0")
    c = nan_output(m, n)
    gemm_on_gpu[grid_for(m, n)](da, db, c)

    err = capfd.readouterr().err
    assert "autotune gemm_on_gpu: timing 4 candidates (BM, BN, BK)" in err
    assert len(re.findall(r"autotune gemm_on_gpu \[\d/4\] .*: [\d.]+ ms \(compiled in", err)) == 4, err
    chose = re.search(r"autotune gemm_on_gpu: chose ((?:\w+=\d+ ?)+) \(", err)
    assert chose, err
    chosen = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in chose.group(1).split()}
    assert chosen["BM"] in (32, 64) and chosen["BN"] in (32, 64) and chosen["BK"] == 16

    got = c.numpy()
    assert not np.isnan(got).any(), "elements left unwritten"
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert (np.abs(got - a64 @ b64) <= fp32_gemm_bound(a64, b64)).all()

    # What a plain launch of the winner leaves, bit for bit.
    plain = nan_output(m, n)
    gemm_on_gpu.jit(**chosen)[grid_for(m, n)](da, db, plain)
    np.testing.assert_array_equal(plain.numpy(), got)

    # The same shapes again: the choice is remembered, nothing is searched or printed.
    again = nan_output(m, n)
    gemm_on_gpu[grid_for(m, n)](da, db, again)
    np.testing.assert_array_equal(again.numpy(), got)
    assert gemm_on_gpu.autotune(da, db, again, grid=grid_for(m, n)) == chosen
    assert "autotune" not in capfd.readouterr().err

    # Host arrays of the same shapes are tuned on the CPU, a search of their own.
    assert set(gemm_on_gpu.autotune(a, b, np.zeros((m, n), np.float32), grid=grid_for(m, n))) == {"BM", "BN", "BK"}
    assert "timing 4 candidates" in capfd.readouterr().err


def test_autotune_on_cuda_tensors_does_not_launch(rng, monkeypatch):
    monkeypatch.setenv("TESSERA_LOG", "quiet")
    m, n, k = 40, 33, 20
    da = tessera.tensor(rng.uniform(-1, 1, (m, k)).astype(np.float32)).to("cuda:0")
    db = tessera.tensor(rng.uniform(-1, 1, (k, n)).astype(np.float32)).to("cuda:0")
    c = nan_output(m, n)
    choice = gemm_on_gpu.autotune(da, db, c, grid=grid_for(m, n))
    assert choice["BM"] in (32, 64) and choice["BN"] in (32, 64) and choice["BK"] == 16
    assert np.isnan(c.numpy()).all()  # the search ran on copies; the caller's output is untouched
