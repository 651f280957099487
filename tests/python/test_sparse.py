"""tessera.sparse and the sparse ops (spmm, spmv, sddmm): construction and validation, results
against scipy.sparse on fresh random inputs, the compiled kernels against the reference executor bit
for bit, gradients against JAX in float64, determinism, and the CUDA kernels' source through nvcc.

Tolerances (results compared with scipy's float64 product of the same, already rounded, inputs;
|A| @ |B| bounds the magnitude of each element's terms):
- fp32: |C - ref| <= 1e-5 * (|A| @ |B|): at most ~40 terms per row here, each fma rounding by 2^-24.
- bf16: |C - ref| <= 2^-8 * |ref| + 1e-5 * (|A| @ |B|): fp32 accumulation, then one rounding to bf16.
"""

import secrets
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

import tessera
from kernel_helpers import cuda_ptx_of
from tessera import _C

SEED = secrets.randbits(32)  # fresh inputs every run; the seed is in every failure message


def rng(k=0):
    return np.random.default_rng([SEED, k])


def random_csr(m, k, density, dtype=np.float32, salt=0):
    return sp.random(m, k, density=density, format="csr", random_state=rng(salt).integers(1 << 31), dtype=dtype)


def bf16_round(a):
    return tessera.tensor(a, dtype="bf16").numpy().astype(np.float64)


def close(got, ref, bound, tol, what):
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert np.all(err <= tol(ref, bound)), f"{what}: max error {err.max():.3g} (seed {SEED})"


# ---- construction ------------------------------------------------------------------------------

def test_csr_from_arrays_and_properties():
    a = tessera.sparse.csr(np.array([0, 2, 2, 3], np.int32), np.array([0, 3, 1], np.int32), [1.0, 2.0, 3.0], (3, 4))
    assert a.shape == (3, 4) and a.nnz == 3 and a.dtype.storage.name == "fp64"  # as tessera.tensor([1.0])
    np.testing.assert_array_equal(a.to_dense().numpy(), [[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]])
    p = tessera.domain.SparseCSR([0, 2, 2, 3], [0, 3, 1], (3, 4))
    assert p.nnz == 3 and p.shape == (3, 4)
    np.testing.assert_array_equal(p.transpose().indptr, [0, 1, 2, 2, 3])


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "fp16", "bf16"])
@pytest.mark.parametrize("fmt", ["csr", "coo", "bsr", "csc"])
def test_from_scipy_and_to_dense(fmt, dtype):
    A = random_csr(12, 8, 0.3, np.float64, salt=1)
    if fmt == "bsr":
        A = A.tobsr(blocksize=(2, 4))
    else:
        A = A.asformat(fmt)
    a = tessera.sparse.from_scipy(A, dtype=dtype)
    assert a.format == ("csr" if fmt == "csc" else fmt) and a.shape == (12, 8) and a.dtype.storage.name == dtype
    want = tessera.tensor(A.toarray(), dtype=dtype).numpy()
    np.testing.assert_array_equal(a.to_dense().numpy(), want)
    np.testing.assert_array_equal(a.tocsr().to_dense().numpy(), want)


def test_conversions_between_formats():
    A = random_csr(8, 12, 0.3, salt=2)
    a = tessera.sparse.from_scipy(A)
    dense = A.toarray()
    coo = a.tocoo()
    assert coo.format == "coo" and coo.nnz == A.nnz
    np.testing.assert_array_equal(coo.tocsr().to_dense().numpy(), dense)
    b = a.tobsr((2, 3))
    assert b.format == "bsr" and b.blocksize == (2, 3)
    np.testing.assert_array_equal(b.to_dense().numpy(), dense)
    np.testing.assert_array_equal(b.tocsr().to_dense().numpy(), dense)
    # COO entries in any order: the CSR form gathers the values into row-major order.
    r, c = A.nonzero()
    order = rng(3).permutation(len(r))
    shuffled = tessera.sparse.coo(r[order], c[order], np.asarray(A[r, c]).ravel()[order], A.shape)
    np.testing.assert_array_equal(shuffled.to_dense().numpy(), dense)


def test_int64_indices_and_empty_matrices():
    a = tessera.sparse.csr(np.array([0, 1], np.int64), np.array([2], np.int64), [5.0], (1, 3))
    assert a.pattern.index_dtype == np.int64
    np.testing.assert_array_equal(tessera.ops.spmm(a, np.ones((3, 2), np.float32)).numpy(), [[5, 5]])
    e = tessera.sparse.csr([0, 0, 0], [], np.zeros(0, np.float32), (2, 3))
    np.testing.assert_array_equal(tessera.ops.spmm(e, np.ones((3, 2), np.float32)).numpy(), np.zeros((2, 2)))


BAD = [
    (([0, 1, 2], [0, 1], (3, 3)), "indptr has length 3, but a matrix of 3 rows needs 4"),
    (([1, 1, 2, 2], [0, 1], (3, 3)), "indptr[0] is 1"),
    (([0, 2, 1, 2], [0, 1], (3, 3)), "indptr decreases at position 2"),
    (([0, 1, 1, 1], [0, 1], (3, 3)), "indptr[3] is 1 but there are 2 column indices"),
    (([0, 1, 2, 2], [0, 3], (3, 3)), "indices[1] = 3 (row 1) is outside [0, 3)"),
    (([0, 1, 2, 2], [0, -1], (3, 3)), "indices[1] = -1 (row 1) is outside [0, 3)"),
    (([0, 0, 2, 2], [2, 1], (3, 3)), "row 1 has column 1 out of order (unsorted): indices[0] = 2, indices[1] = 1"),
    (([0, 3, 3, 3], [0, 2, 2], (3, 3)), "row 0 has column 2 twice (a duplicate entry): indices[1] = 2, indices[2] = 2"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_malformed_patterns_name_the_position(args, message):
    indptr, indices, shape = args
    with pytest.raises(tessera.ArgumentError) as e:
        tessera.domain.SparseCSR(indptr, indices, shape)
    assert message in str(e.value)
    with pytest.raises(tessera.ArgumentError) as e:
        tessera.sparse.csr(indptr, indices, np.ones(len(indices), np.float32), shape)
    assert message in str(e.value)


def test_other_construction_errors():
    with pytest.raises(tessera.ShapeError, match=r"values have shape \[2\] but the pattern needs \[3\]"):
        tessera.sparse.csr([0, 3], [0, 1, 2], [1.0, 2.0], (1, 3))
    with pytest.raises(tessera.DtypeError, match="indices must be integers"):
        tessera.sparse.csr([0, 1], [0.5], [1.0], (1, 3))
    with pytest.raises(tessera.ArgumentError, match=r"entries 0 and 2 are both at \(1, 2\)"):
        tessera.sparse.coo([1, 0, 1], [2, 0, 2], [1.0, 2.0, 3.0], (2, 3))
    with pytest.raises(tessera.ArgumentError, match=r"cols\[1\] = 5 is outside \[0, 3\)"):
        tessera.sparse.coo([0, 1], [0, 5], [1.0, 2.0], (2, 3))
    with pytest.raises(tessera.ShapeError, match="block size"):
        tessera.sparse.bsr([0, 1], [0], np.ones((1, 2, 2)), (3, 4))
    with pytest.raises(tessera.ShapeError, match=r"B must be \[3, N\]"):
        tessera.ops.spmm(tessera.sparse.csr([0, 1], [0], [1.0], (1, 3)), np.ones((2, 2), np.float32))
    with pytest.raises(tessera.ArgumentError, match="must be a tessera.sparse matrix"):
        tessera.ops.spmm(np.eye(3), np.eye(3))


# ---- results against scipy --------------------------------------------------------------------

FP32 = lambda ref, bound: 1e-5 * bound + 1e-30  # noqa: E731
BF16 = lambda ref, bound: 2.0 ** -8 * np.abs(ref) + 1e-5 * bound + 1e-30  # noqa: E731


@pytest.mark.parametrize("density", [0.01, 0.1])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_spmm_spmv_sddmm_against_scipy(density, dtype):
    m, k, n = 96, 400, 24
    A = random_csr(m, k, density, np.float64, salt=10)
    A.data = rng(11).standard_normal(A.nnz)
    B = rng(12).standard_normal((k, n))
    rnd = bf16_round if dtype == "bf16" else (lambda x: np.asarray(x, np.float32).astype(np.float64))
    A.data = rnd(A.data)
    B = rnd(B)
    tol = BF16 if dtype == "bf16" else FP32
    a = tessera.sparse.from_scipy(A, dtype=dtype)
    b = tessera.tensor(B, dtype=dtype)
    absA = abs(A)
    close(tessera.ops.spmm(a, b).numpy(), A @ B, absA @ np.abs(B), tol, f"spmm {dtype} density {density}")
    x = B[:, 0]
    close(tessera.ops.spmv(a, tessera.tensor(x, dtype=dtype)).numpy(), A @ x, absA @ np.abs(x), tol, "spmv")
    X = rnd(rng(13).standard_normal((m, 16)))
    Y = rnd(rng(14).standard_normal((16, k)))
    s = tessera.ops.sddmm(tessera.tensor(X, dtype=dtype), tessera.tensor(Y, dtype=dtype), a.pattern)
    rows, cols = A.nonzero()
    ref = np.einsum("jd,dj->j", X[rows], Y[:, cols])
    bound = np.einsum("jd,dj->j", np.abs(X[rows]), np.abs(Y[:, cols]))
    close(s.values.numpy(), ref, bound, tol, "sddmm")
    assert s.pattern is a.pattern


@pytest.mark.parametrize("runs", [None, "4"])
@pytest.mark.parametrize("n", [1, 9, 64, 150])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp64"])
def test_compiled_kernels_equal_the_reference_executor(dtype, n, runs, monkeypatch):
    # n: one column (spmv's case: the row's chain in one register), one
    # short strip of spmm's 64 columns per lane on the CPU, one full strip,
    # and two full strips and a short one; 200 rows make several groups of
    # strips (the grid holds the rows' strips, not every element). With
    # TESSERA_SPMM_VECTOR=4, CUDA's form: a lane per run of 4 outputs in
    # registers, b's 4 values one vector load, a short last run (9, 150)
    # element by element.
    if runs:
        monkeypatch.setenv("TESSERA_SPMM_VECTOR", runs)
    A = random_csr(200, 60, 0.1, salt=20)
    a = tessera.sparse.from_scipy(A, dtype=dtype)
    b = tessera.tensor(rng(21).standard_normal((60, n)), dtype=dtype)
    X = tessera.tensor(rng(22).standard_normal((200, 33)), dtype=dtype)
    Y = tessera.tensor(rng(23).standard_normal((33, 60)), dtype=dtype)
    compiled = [tessera.ops.spmm(a, b).numpy(), tessera.ops.sddmm(X, Y, a).values.numpy()]
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    reference = [tessera.ops.spmm(a, b).numpy(), tessera.ops.sddmm(X, Y, a).values.numpy()]
    for c, r in zip(compiled, reference):
        assert c.tobytes() == r.tobytes(), f"seed {SEED}"


def test_jit_runs_the_sparse_template():
    A = random_csr(30, 20, 0.2, salt=30)
    a = tessera.sparse.from_scipy(A)

    @tessera.jit
    def f(v, b):
        return tessera.ops.spmm(tessera.sparse.CSR(a.pattern, v), b) * 2.0

    b = rng(31).standard_normal((20, 5)).astype(np.float32)
    out = f(a.values, tessera.tensor(b))
    close(out.numpy(), 2 * (A @ b.astype(np.float64)), 2 * (abs(A) @ np.abs(b)), FP32, "jit spmm")
    kernels = f.executable().kernels
    assert any(k["family"] == "sparse" and k["variant"] == "tile" for k in kernels), kernels


# ---- gradients ----------------------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def test_spmm_and_spmv_gradients_against_jax():
    jax = _jax()
    jnp = jax.numpy
    A = random_csr(25, 18, 0.2, np.float64, salt=40)
    rows, cols = A.nonzero()
    B = rng(41).standard_normal((18, 6))
    x = rng(42).standard_normal(18)
    pattern = tessera.sparse.from_scipy(A).pattern

    def loss_t(v, b, xv):
        s = tessera.sparse.CSR(pattern, v)
        return tessera.ops.sum(tessera.ops.tanh(tessera.ops.spmm(s, b))) + tessera.ops.sum(tessera.ops.spmv(s, xv) ** 2)

    def loss_j(v, b, xv):
        d = jnp.zeros(A.shape).at[rows, cols].set(v)
        return jnp.sum(jnp.tanh(d @ b)) + jnp.sum((d @ xv) ** 2)

    args = (A.data, B, x)
    want = jax.grad(loss_j, argnums=(0, 1, 2))(*args)
    for fn in (tessera.grad(loss_t, argnums=(0, 1, 2)), tessera.jit(tessera.grad(loss_t, argnums=(0, 1, 2)))):
        got = fn(*[tessera.tensor(np.asarray(t)) for t in args])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-12, atol=1e-12)
    value, _ = tessera.value_and_grad(loss_t)(*[tessera.tensor(np.asarray(t)) for t in args])
    np.testing.assert_allclose(value.item(), float(loss_j(*args)), rtol=1e-12)


def test_sddmm_gradients_against_jax():
    jax = _jax()
    jnp = jax.numpy
    A = random_csr(14, 22, 0.25, np.float64, salt=50)
    rows, cols = A.nonzero()
    X = rng(51).standard_normal((14, 7))
    Y = rng(52).standard_normal((7, 22))
    w = rng(53).standard_normal(A.nnz)

    def loss_t(x, y):
        return tessera.ops.sum(tessera.ops.sddmm(x, y, A_t.pattern).values ** 3 * tessera.tensor(w))

    def loss_j(x, y):
        return jnp.sum((x @ y)[rows, cols] ** 3 * w)

    A_t = tessera.sparse.from_scipy(A)
    want = jax.grad(loss_j, argnums=(0, 1))(X, Y)
    got = tessera.jit(tessera.grad(loss_t, argnums=(0, 1)))(tessera.tensor(X), tessera.tensor(Y))
    for g, ww in zip(got, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(ww), rtol=1e-11, atol=1e-11)


def test_spmm_gradient_against_finite_differences():
    A = random_csr(6, 5, 0.4, np.float64, salt=60)
    pattern = tessera.sparse.from_scipy(A).pattern
    B = rng(61).standard_normal((5, 3))

    def loss(v):
        return tessera.ops.sum(tessera.ops.exp(tessera.ops.spmm(tessera.sparse.CSR(pattern, v), tessera.tensor(B))))

    g = tessera.grad(loss)(tessera.tensor(A.data)).numpy()
    h = 1e-6
    for j in range(A.nnz):
        e = np.zeros(A.nnz)
        e[j] = h
        fd = (loss(tessera.tensor(A.data + e)).item() - loss(tessera.tensor(A.data - e)).item()) / (2 * h)
        assert abs(fd - g[j]) <= 1e-6 * max(1.0, abs(fd)), (j, fd, g[j])


# ---- determinism --------------------------------------------------------------------------------

def test_bitwise_determinism_over_ten_runs():
    A = random_csr(64, 128, 0.1, salt=70)
    pattern = tessera.sparse.from_scipy(A).pattern
    v = tessera.tensor(A.data)
    b = tessera.tensor(rng(71).standard_normal((128, 16)).astype(np.float32))
    grad = tessera.jit(tessera.grad(lambda v, b: tessera.ops.sum(tessera.ops.spmm(tessera.sparse.CSR(pattern, v), b) ** 2),
                                    argnums=(0, 1)))
    runs = []
    for _ in range(10):
        gv, gb = grad(v, b)
        runs.append(tessera.ops.spmm(tessera.sparse.CSR(pattern, v), b).numpy().tobytes() + gv.numpy().tobytes()
                    + gb.numpy().tobytes())
    assert len(set(runs)) == 1


# ---- GPU -----------------------------------------------------------------------------------------

@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gpu_equals_cpu_bitwise(dtype):
    # 32 columns: whole runs of 16 bytes of b per lane (4 fp32, 8 bf16); 37: a short last run.
    A = random_csr(200, 300, 0.05, salt=80)
    a = tessera.sparse.from_scipy(A, dtype=dtype)
    for n in (32, 37):
        b = tessera.tensor(rng(81).standard_normal((300, n)), dtype=dtype)
        cpu = tessera.ops.spmm(a, b).numpy()
        gpu = tessera.ops.spmm(a.to("cuda:0"), b.to("cuda:0"))
        assert gpu.device == "cuda:0"
        runs = {gpu.numpy().tobytes()} | {tessera.ops.spmm(a.to("cuda:0"), b.to("cuda:0")).numpy().tobytes()
                                          for _ in range(9)}
        assert runs == {cpu.tobytes()}, n
    X = tessera.tensor(rng(82).standard_normal((200, 16)), dtype=dtype)
    Y = tessera.tensor(rng(83).standard_normal((16, 300)), dtype=dtype)
    s_cpu = tessera.ops.sddmm(X, Y, a).values.numpy()
    s_gpu = tessera.ops.sddmm(X.to("cuda:0"), Y.to("cuda:0"), a).values.numpy()
    assert s_cpu.tobytes() == s_gpu.tobytes()


CUDA_TIR = """
func @f(%v: tensor<[Z] bf16>, %b: tensor<[K, N] bf16>, %x: tensor<[M, D] fp32>, %y: tensor<[D, K] fp32>,
        %s: tensor<[M] int32>, %e: tensor<[M] int32>, %c: tensor<[Z] int32>, %ts: tensor<[K] int32>,
        %te: tensor<[K] int32>, %tc: tensor<[Z] int32>, %tp: tensor<[Z] int32>, %ti: tensor<[Z] int32>)
    -> (tensor<[M, N] bf16>, tensor<[Z] fp32>) {
  %0 = graph.spmm %v, %b, %s, %e, %c, %ts, %te, %tc, %tp, %ti : tensor<[M, N] bf16>
  %1 = graph.sddmm %x, %y, %s, %e, %c, %ts, %te, %tc, %tp, %ti : tensor<[Z] fp32>
  return %0, %1
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_source_of_the_sparse_kernels_compiles(tmp_path):
    # No GPU needed: the CUDA backend's emitted source goes through nvcc to PTX (device code only, as
    # NVRTC compiles it at run time), with the device headers from the source tree.
    ptx, _ = cuda_ptx_of(tmp_path, CUDA_TIR, kernels=2)
    for text in ptx:
        assert "fma.rn.f32" in text
