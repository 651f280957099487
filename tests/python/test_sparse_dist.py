"""Sparse matrices distributed by rows (tessera/sparse/_dist.py): shards of a
scipy matrix's rows on virtual devices, a per-shard spmm in an index launch
checked against scipy, SparseCSR domains through tessera.array.from_domain,
and the layouts that cannot apply."""

import numpy as np
import pytest
import scipy.sparse as sp

import tessera
from tessera import dist
from tessera.errors import ArgumentError


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


def random_csr(m, k, density, seed):
    a = sp.random(m, k, density=density, format="csr", random_state=seed, dtype=np.float64).astype(np.float32)
    a.sort_indices()
    return a


def test_rows_split_like_dense_tensors_and_gather_back():
    a = random_csr(10, 7, 0.4, 0)
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))
    A = dist.tensor(tessera.sparse.from_scipy(a), layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    assert isinstance(A, tessera.sparse.DistCSR)
    parts = A.parts("tp")
    assert [p.shape for p in parts] == [(3, 7), (3, 7), (2, 7), (2, 7)]  # numpy.array_split of 10 rows
    assert sum(p.nnz for p in parts) == a.nnz == A.nnz
    for p, rows in zip(parts, np.array_split(np.arange(10), 4)):
        np.testing.assert_array_equal(np.asarray(p.to_dense().numpy()), a.toarray()[rows])
    np.testing.assert_array_equal(A.numpy(), a.toarray())
    np.testing.assert_array_equal(A.to_dense().numpy(), a.toarray())


def test_a_per_shard_spmm_in_an_index_launch_matches_scipy():
    a = random_csr(37, 19, 0.1, 1)
    b = np.random.default_rng(2).standard_normal((19, 5)).astype(np.float32)
    m = dist.mesh(devices=cpus(3), axes=("tp",), shape=(3,))
    A = dist.tensor(tessera.sparse.from_scipy(a), layout=dist.Block(mesh_axes=("tp",)), mesh=m)
    B = dist.tensor(b, mesh=m)  # replicated
    outs = tessera.index_launch(axis="tp")(lambda ap, bp: tessera.ops.spmm(ap, bp))(A.parts("tp"), B.parts("tp"))
    got = np.concatenate([o.numpy() for o in outs], axis=0)
    want = (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_replicas_along_the_other_mesh_axis():
    a = random_csr(8, 6, 0.5, 3)
    m = dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2))
    A = dist.tensor(tessera.sparse.from_scipy(a), layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    assert [p.shape for p in A.parts("tp")] == [(4, 6), (4, 6)]
    # Along dp every part holds the same rows (those of tp coordinate 0).
    dp = A.parts("dp")
    np.testing.assert_array_equal(np.asarray(dp[0].to_dense().numpy()), np.asarray(dp[1].to_dense().numpy()))
    np.testing.assert_array_equal(A.numpy(), a.toarray())


def test_sparse_csr_domains_through_from_domain():
    a = random_csr(9, 4, 0.5, 4)
    D = tessera.domain.SparseCSR(a.indptr, a.indices, a.shape)
    with dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,)):
        X = tessera.array.from_domain(D, dtype="bf16", distribution=dist.Block(mesh_axes=("tp",)))
    assert X.shape == (9, 4) and X.nnz == a.nnz
    assert [p.shape for p in X.parts("tp")] == [(5, 4), (4, 4)]
    assert str(X.parts("tp")[0].values.dtype) == "bf16"
    np.testing.assert_array_equal(X.numpy(), np.zeros((9, 4)))
    m = dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,))
    R = tessera.array.from_domain(D, distribution=dist.Replicated(), mesh=m)
    assert [p.shape for p in R.parts("tp")] == [(9, 4), (9, 4)]


def test_layouts_that_cannot_apply_are_argument_errors():
    a = tessera.sparse.from_scipy(random_csr(6, 6, 0.5, 5))
    m = dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,))
    with pytest.raises(ArgumentError, match="distributes by rows only"):
        dist.tensor(a, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    with pytest.raises(ArgumentError, match="not cyclically"):
        dist.tensor(a, layout=dist.Cyclic(mesh_axes=("tp",)), mesh=m)
    with pytest.raises(ArgumentError, match="dtype= does not apply"):
        dist.tensor(a, layout=dist.Block(mesh_axes=("tp",)), mesh=m, dtype="bf16")
    with pytest.raises(ArgumentError, match="no axis 'dp'"):
        dist.tensor(a, layout=dist.Block(mesh_axes=("tp",)), mesh=m).parts("dp")
    with pytest.raises(ArgumentError, match="Rect or SparseCSR"):
        tessera.array.from_domain((3, 3), mesh=m)


def test_spmm_of_a_row_distributed_matrix_gives_a_row_distributed_result():
    a = random_csr(13, 9, 0.3, 6)
    b = np.random.default_rng(7).standard_normal((9, 4)).astype(np.float32)
    m = dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2))
    A = dist.tensor(tessera.sparse.from_scipy(a), layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    C = tessera.ops.spmm(A, b)
    assert isinstance(C, dist.DistTensor) and C.shape == (13, 4)
    assert [s.shape for s in C.parts("tp")] == [(7, 4), (6, 4)]
    np.testing.assert_allclose(C.numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    # Each shard is the per-shard product: the same bits as the undistributed spmm's rows.
    whole = tessera.ops.spmm(tessera.sparse.from_scipy(a), b).numpy()
    np.testing.assert_array_equal(C.numpy(), whole)
    split = dist.tensor(b, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)
    with pytest.raises(ArgumentError, match="B must be replicated"):
        tessera.ops.spmm(A, split)
