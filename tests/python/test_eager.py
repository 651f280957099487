"""Eager tessera.ops calls on compiled kernels (the default): canonical forms
(collapsed shapes, shape patterns), agreement with the reference executor and
with @jit, kernels prebuilt at build time, and the ops no kernel covers yet."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import ops
from tessera.errors import ReferenceExecutorWarning


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.delenv("TESSERA_EAGER", raising=False)
    monkeypatch.delenv("TESSERA_BACKEND", raising=False)


def _both(monkeypatch, fn, *args):
    """fn(*args) eagerly on compiled kernels and on the reference executor."""
    monkeypatch.delenv("TESSERA_EAGER", raising=False)
    got = fn(*args)
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    want = fn(*args)
    monkeypatch.delenv("TESSERA_EAGER")
    return got, want


def _t(rng, shape, policy="fp32"):
    return tessera.tensor(rng.standard_normal(shape) * 3, policy)


@pytest.mark.parametrize("shapes", [
    [(3, 4, 5), (3, 4, 5)],
    [(3, 4, 5), (5,)],
    [(3, 4, 5), (4, 1)],
    [(3, 1, 5), (1, 4, 5)],
    [(2, 3, 4, 5), (3, 1, 1)],
    [(7,), ()],
    [(), (6, 2)],
    [(1, 1), (1,)],
    [(4, 0, 3), (3,)],
])
@pytest.mark.parametrize("policy", ["fp32", "bf16"])
def test_elementwise_broadcasts_equal_the_reference_bitwise(monkeypatch, shapes, policy):
    rng = np.random.default_rng(len(shapes[0]) * 10 + len(shapes[1]))
    a, b = (_t(rng, s, policy) for s in shapes)
    for fn in (lambda x, y: x * y + x, lambda x, y: ops.maximum(x, y), lambda x, y: ops.where(x > y, x, ops.exp(y))):
        got, want = _both(monkeypatch, fn, a, b)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.codes(), want.codes())


@pytest.mark.parametrize("axes", [None, (0,), (1,), (2,), (-1,), (0, 1), (1, 2), (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reductions_equal_jit_bitwise_and_the_reference_closely(monkeypatch, axes, keepdims, op):
    """Collapsed eager reductions sum in the canonical order of the original
    call: the same bits as @jit (which never collapses)."""
    rng = np.random.default_rng(3)
    x = _t(rng, (6, 1, 300, 5)[:3] if axes != (0, 2) else (6, 300, 5))
    fn = lambda v: getattr(ops, op)(v, axis=axes, keepdims=keepdims)
    got, want = _both(monkeypatch, fn, x)
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    jitted = tessera.jit(fn)(x)
    assert got.shape == want.shape == jitted.shape
    np.testing.assert_array_equal(got.codes(), jitted.codes())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["softmax_safe", "logsumexp", "layernorm_safe", "rmsnorm_safe"])
def test_row_normalizations_fold_leading_dims(monkeypatch, op):
    rng = np.random.default_rng(5)
    x = _t(rng, (2, 3, 40))
    fn = lambda v: getattr(ops, op)(v)
    got, want = _both(monkeypatch, fn, x)
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    np.testing.assert_array_equal(got.codes(), tessera.jit(fn)(x).codes())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_one_kernel_serves_every_shape_of_a_pattern(compiled):
    rng = np.random.default_rng(6)
    ops.add(_t(rng, (33, 65)), _t(rng, (33, 65)))
    before = tessera._C._eager_cache_size()
    ops.add(_t(rng, (7,)), _t(rng, (7,)))            # any rank of equal shapes: one dim
    ops.add(_t(rng, (4, 5, 6)), _t(rng, (4, 5, 6)))
    ops.matmul(_t(rng, (8, 16)), _t(rng, (16, 4)))
    after_matmul = tessera._C._eager_cache_size()
    ops.matmul(_t(rng, (16, 16)), _t(rng, (16, 16)))  # equal sizes need not share a symbol
    ops.matmul(_t(rng, (3, 5)), _t(rng, (5, 9)))
    assert tessera._C._eager_cache_size() == after_matmul <= before + 1


def test_reference_choice_runs_nothing_compiled(monkeypatch):
    rng = np.random.default_rng(7)
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    before = tessera._C._eager_cache_size()
    ops.tanh(_t(rng, (3, 91)) * 0.5 - 17.0)
    assert tessera._C._eager_cache_size() == before
    monkeypatch.delenv("TESSERA_EAGER")
    monkeypatch.setenv("TESSERA_BACKEND", "reference")  # the global choice covers eager ops too
    ops.tanh(_t(rng, (3, 91)) * 0.5 - 17.0)
    assert tessera._C._eager_cache_size() == before
    monkeypatch.setenv("TESSERA_EAGER", "fast")
    with pytest.raises(tessera.errors.TesseraError, match="TESSERA_EAGER is 'fast'"):
        ops.tanh(_t(rng, (2,)))


def test_an_op_without_a_kernel_says_so_and_runs_on_the_reference(compiled, monkeypatch):
    """No template normalizes with an fp8 accumulator: the eager call warns,
    naming the op and why, and gives the reference's result."""
    a = np.array([[0.5, 1.0, 1.5, -2.0], [3.0, 4.0, -6.0, 0.0]])
    x = tessera.tensor(a, "fp8_e4m3 @accum(fp8_e4m3)")
    with pytest.warns(ReferenceExecutorWarning, match=r"graph\.softmax_safe.*accumulation type fp8_e4m3"):
        got = ops.softmax_safe(x, axis=1)
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    want = ops.softmax_safe(x, axis=1)
    np.testing.assert_array_equal(np.asarray(got.codes()), np.asarray(want.codes()))


_COMMON_CALLS = """
import numpy as np, tessera
from tessera import ops
rng = np.random.default_rng(0)
for p in ("fp32", "bf16", "fp16"):
    x = tessera.tensor(rng.standard_normal((64, 48)), p)
    w = tessera.tensor(rng.standard_normal((48, 32)), p)
    g = tessera.tensor(rng.standard_normal(48), p)
    y = ops.relu(x) * 2.0 + ops.exp(x) - x / 3.0
    y = ops.sum(y, axis=-1) + ops.mean(x)
    y = ops.matmul(x, w)
    y = ops.layernorm_safe(x, g, g) + ops.softmax_safe(x) + ops.rmsnorm_safe(x, g)
    y = ops.cast(ops.tanh(x), "fp32") if p != "fp32" else ops.tanh(x)
x = tessera.tensor(rng.standard_normal((64, 48)), "fp32")
y = ops.where(x > 0.5, x, 0.0) + x * tessera.tensor(rng.standard_normal(48), "fp32")
"""


def test_common_eager_ops_compile_nothing_on_a_fresh_install(tmp_path):
    """The common families were compiled when Tessera was built: with an
    empty kernel cache, these calls load them and run the host compiler
    never."""
    prebuilt = Path(tessera.__file__).parent / "prebuilt" / "cpu"
    assert prebuilt.is_dir() and any(prebuilt.glob("*.so")), f"no prebuilt kernels in {prebuilt}"
    env = dict(os.environ, TESSERA_CACHE_DIR=str(tmp_path))
    env.pop("TESSERA_EAGER", None)
    env.pop("TESSERA_BACKEND", None)
    run = subprocess.run([sys.executable, "-c", _COMMON_CALLS], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    compiled_now = sorted(p.name for p in tmp_path.rglob("*.so"))
    assert compiled_now == [], f"compiled on first use: {compiled_now}"


_NEW_KERNEL = """
import numpy as np, tessera
f = tessera.jit(lambda x: tessera.ops.tanh(x) * 3.0 + x)
x = tessera.tensor(np.linspace(-2, 2, 15).reshape(3, 5), "fp32")
print(repr(np.asarray(f(x)).tolist()))
"""


@pytest.mark.skipif("clang" in os.environ.get("TESSERA_CXX", ""), reason="clang++ reads no .gch files")
def test_a_fresh_install_compiles_new_kernels_with_the_prebuilt_precompiled_headers(tmp_path):
    """The package carries the host tile headers precompiled for its own
    compiler and flags: a kernel compiled with an empty cache builds no .gch
    of its own and gives the same values as one compiled without it."""
    prebuilt = Path(tessera.__file__).parent / "prebuilt" / "cpu"
    gch = list(prebuilt.glob("pch-*/tessera_cpu/tessera_cpu.h.gch"))
    assert len(gch) == 1, f"expected one precompiled header in {prebuilt}, found {gch}"
    results = []
    for pch in ("1", "0"):
        cache = tmp_path / pch
        env = dict(os.environ, TESSERA_CACHE_DIR=str(cache), TESSERA_CPU_PCH=pch)
        run = subprocess.run([sys.executable, "-c", _NEW_KERNEL], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert list(cache.rglob("*.so")), "the kernel was not compiled into the empty cache"
        assert list(cache.rglob("*.gch")) == []
        results.append(run.stdout)
    assert results[0] == results[1]


@pytest.mark.parametrize("policy", ["fp16 @accum(fp16)", "bf16 @accum(bf16)", "fp16 @accum(fp32)"])
@pytest.mark.parametrize("length", [7, 300, 1000])
def test_narrow_accumulation_normalizations_equal_the_reference_bitwise(monkeypatch, policy, length):
    """Every intermediate rounds to the accumulation type where the reference
    rounds it, also when that type is fp16 or bf16."""
    rng = np.random.default_rng(length)
    x = _t(rng, (3, length), policy)
    g = _t(rng, (length,), policy)
    for fn in (ops.softmax_safe, lambda v: ops.logsumexp(v, axis=-1), lambda v: ops.layernorm_safe(v, g, g),
               lambda v: ops.rmsnorm_safe(v, g)):
        got, want = _both(monkeypatch, fn, x)
        np.testing.assert_array_equal(got.codes(), want.codes())


def _edge_rows(rng, n):
    return [np.full(n, 3.0), np.full(n, -2.5), rng.standard_normal(n) * 1e38, rng.standard_normal(n) * 1e-40,
            rng.standard_normal(n) * 1e-30 + 1e5, np.append(rng.standard_normal(n - 1), np.inf),
            np.append(rng.standard_normal(n - 1), np.nan), -np.abs(rng.standard_normal(n)) - 7,
            np.abs(rng.standard_normal(n)) + 7, np.zeros(n)]


@pytest.mark.parametrize("policy", ["fp32", "bf16", "fp16 @accum(fp16)", "fp32 @accum(fp64)"])
def test_layernorm_edge_rows_equal_the_reference_bitwise(monkeypatch, policy):
    """Constant, huge, tiny, offset, one-signed, non-finite and zero rows:
    the compiled layernorm takes max |x - mean| from the row's extremes."""
    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 17, 300):
        for row in _edge_rows(rng, n)[: (10 if n > 1 else 5)]:
            x = tessera.tensor(np.tile(row, (2, 1)), policy)
            g = tessera.tensor(rng.standard_normal(n), policy)
            for fn in (ops.layernorm_safe, lambda v: ops.layernorm_safe(v, g, g)):
                got, want = _both(monkeypatch, fn, x)
                np.testing.assert_array_equal(got.codes(), want.codes())


def test_erf_matches_math_erf_in_double_and_bf16(rng):
    """ops.erf: within a few ulps of math.erf in fp64; bf16 (tile.narrow_unary,
    expanded to the double formula on the CPU) within one bf16 step."""
    import math

    x = np.concatenate([rng.standard_normal(400) * 3.0, [0.0, -0.0, 1e-300, 6.0, -40.0, np.inf, -np.inf]])
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(ops.erf(tessera.tensor(x, "fp64")).numpy(), want, rtol=1e-15, atol=0)
    xb = tessera.tensor(x, "bf16 @accum(fp32)")
    xv = xb.numpy().astype(np.float64)
    got = ops.erf(xb).numpy().astype(np.float64)
    np.testing.assert_allclose(got, [math.erf(v) for v in xv], rtol=2.0**-8, atol=0)
    assert np.isnan(ops.erf(tessera.tensor([np.nan], "fp32")).numpy()).all()


@pytest.mark.parametrize("backend", ["compiled", "reference"])
def test_eager_grad_leaves_the_loss_out(monkeypatch, backend):
    """An eager grad runs its staged value-and-gradient function without the value: the loss (a
    sum over every element) and the forward ops only it needs are not run, on compiled kernels and
    on the reference executor. The gradient keeps jit(grad)'s bits; value_and_grad still returns
    the value."""
    monkeypatch.setenv("TESSERA_EAGER", backend)
    from tessera.autodiff import _stage

    rng = np.random.default_rng(5)
    x = tessera.tensor(rng.standard_normal((6, 40)).astype(np.float32))
    g = tessera.tensor(rng.standard_normal((6, 40)).astype(np.float32))
    f = lambda a, w: ops.sum(ops.rmsnorm_safe(a, axis=-1, eps=1e-6) * w)  # noqa: E731
    calls = []
    run = _stage._execute

    def spy(module, fname, tensors, wanted=None):
        calls.append(wanted)
        return run(module, fname, tensors, wanted)

    monkeypatch.setattr(_stage, "_execute", spy)
    got = tessera.grad(f)(x, g)
    assert calls == [[False, True]]
    np.testing.assert_array_equal(got.codes(), tessera.jit(tessera.grad(f))(x, g).codes())
    value, again = tessera.value_and_grad(f)(x, g)
    assert calls[-1] is None
    np.testing.assert_array_equal(again.codes(), got.codes())
    np.testing.assert_array_equal(value.codes(), tessera.jit(f)(x, g).codes())


def test_long_eager_sums_split_with_one_compile_per_superblock_count(compiled, monkeypatch):
    """An eager sum or mean of a long float tensor to few outputs splits as a
    jit's does (docs/design/0036): superblock sums with the count as an
    attribute, then their in-order total, the reference's bits. Lengths with
    the same superblock count share the kernels; another count compiles the
    superblock sums again (the total's pattern is shared)."""
    rng = np.random.default_rng(11)
    x, c = _t(rng, (3, 70001)), _t(rng, (70001, 5), "bf16 @accum(fp32)")
    got = [ops.sum(x), ops.mean(x, axis=-1, keepdims=True), ops.sum(c, axis=0), ops.mean(c, axis=0)]
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    want = [ops.sum(x), ops.mean(x, axis=-1, keepdims=True), ops.sum(c, axis=0), ops.mean(c, axis=0)]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.policy == w.policy
        assert np.asarray(g.codes()).tobytes() == np.asarray(w.codes()).tobytes()
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    before = tessera._C._eager_cache_size()
    ops.mean(_t(rng, (4, 80000)), axis=-1)           # rows of two superblocks, as 70001: shared
    assert tessera._C._eager_cache_size() == before
    ops.mean(_t(rng, (4, 140000)), axis=-1)          # three: the superblock sums compile again
    assert tessera._C._eager_cache_size() == before + 1
    monkeypatch.setenv("TESSERA_SPLIT_SUMS", "0")    # whole: the mean's own kernel
    ops.mean(_t(rng, (4, 140000)), axis=-1)
    assert tessera._C._eager_cache_size() == before + 2
    np.testing.assert_allclose(got[0].numpy(), x.numpy().astype(np.float64).sum(), rtol=1e-5)


@pytest.mark.parametrize("knob", ["TESSERA_COLUMN_STRANDS", "TESSERA_COLUMN_VECTOR"])
def test_eager_column_sums_compile_again_under_another_column_knob(compiled, monkeypatch, knob):
    """The column-sum knobs (docs/design/0038) are part of the eager kernel cache's key: a call under
    another setting compiles its own kernel (the same bits: every form keeps the canonical order), and
    a bad value is an error naming the knob rather than a cached kernel run quietly."""
    rng = np.random.default_rng(12)
    c = _t(rng, (600, 64), "bf16 @accum(fp32)")
    first = ops.sum(c, axis=0)
    before = tessera._C._eager_cache_size()
    monkeypatch.setenv(knob, "1")
    again = ops.sum(c, axis=0)
    assert tessera._C._eager_cache_size() == before + 1
    assert np.asarray(again.codes()).tobytes() == np.asarray(first.codes()).tobytes()
    monkeypatch.setenv(knob, "3")
    with pytest.raises(tessera.errors.ArgumentError, match=knob + " is '3'"):
        ops.sum(c, axis=0)


def test_repeated_calls_recall_their_form_and_keep_the_references_bits(compiled, monkeypatch):
    """A call that repeats an earlier call's op, attributes, operand shapes and policies finds its
    kernel without building the canonical form again (docs/design/0048). Interleaved repeats over
    other axes, another policy, another shape and a transposed operand each give the reference's bits."""
    rng = np.random.default_rng(48)
    x = _t(rng, (6, 40))
    xb = _t(rng, (6, 40), "bf16 @accum(fp32)")
    xt = ops.transpose(_t(rng, (40, 6)))
    x5 = _t(rng, (5, 40))
    calls = [
        lambda: ops.sum(x, axis=0), lambda: ops.sum(x, axis=1), lambda: ops.sum(xb, axis=0),
        lambda: ops.sum(x5, axis=0), lambda: ops.sum(xt, axis=0),
        lambda: ops.add(x, x[0]), lambda: ops.softmax_safe(x), lambda: ops.softmax_safe(xb),
    ]
    for _ in range(3):
        for call in calls:
            got, want = _both(monkeypatch, call)
            assert got.shape == want.shape
            assert np.asarray(got.codes()).tobytes() == np.asarray(want.codes()).tobytes()
    before = tessera._C._eager_cache_size()
    for call in calls:
        call()
    assert tessera._C._eager_cache_size() == before
