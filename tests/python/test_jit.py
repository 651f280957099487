"""@tessera.jit: tracing, caching per signature, annotations, constraints, errors at user lines."""

import numpy as np
import pytest

import tessera
from tessera import ops

F32 = tessera.fp32


def test_second_call_same_signature_does_not_retrace(rng):
    @tessera.jit
    def f(x, y):
        return ops.relu(x * y + 1.0)

    a = tessera.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    b = tessera.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    out1 = f(a, b)
    assert f.trace_count == 1
    out2 = f(b, a)
    assert f.trace_count == 1 and f.cache_size == 1
    np.testing.assert_array_equal(out1.numpy(), out2.numpy())
    c = tessera.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    f(c, c)
    assert f.trace_count == 2, "a new shape must retrace"
    f(tessera.tensor(np.ones((4, 3), np.float16)), tessera.tensor(np.ones((4, 3), np.float16)))
    assert f.trace_count == 3, "a new dtype must retrace"


def test_positional_keyword_and_array_calls_share_one_trace(rng):
    # Positional tensors take the fast call path (no signature binding); keywords, numpy arrays
    # and a default argument take the general one. All must find the same traced signature.
    @tessera.jit
    def f(x, y):
        return x * y + 1.0

    a, b = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(2))
    ta, tb = tessera.tensor(a), tessera.tensor(b)
    want = a * b + np.float32(1.0)
    for call in (lambda: f(ta, tb), lambda: f(x=ta, y=tb), lambda: f(ta, y=tb), lambda: f(a, b), lambda: f(ta, tb)):
        np.testing.assert_array_equal(call().numpy(), want)
    assert f.trace_count == 1 and f.cache_size == 1

    @tessera.jit
    def g(x, scale=2.0):
        return x * scale

    np.testing.assert_array_equal(g(ta).numpy(), a * np.float32(2.0))
    np.testing.assert_array_equal(g(ta, 3.0).numpy(), a * np.float32(3.0))
    assert g.trace_count == 2  # the static default and 3.0 are two signatures


def test_eager_and_jit_agree_bitwise(rng):
    def body(x, w, b):
        h = ops.matmul(x, w) + b
        return ops.softmax_safe(ops.gelu(h), axis=-1), ops.sum(h, axis=0)

    policy = tessera.bf16 @ tessera.accum(tessera.fp32)
    x = tessera.tensor(rng.standard_normal((8, 16)), dtype=policy)
    w = tessera.tensor(rng.standard_normal((16, 4)), dtype=policy)
    b = tessera.tensor(rng.standard_normal((4,)), dtype=policy)
    eager = body(x, w, b)
    jitted = tessera.jit(body)(x, w, b)
    for e, j in zip(eager, jitted):
        np.testing.assert_array_equal(e.codes(), j.codes())


def test_python_control_flow_unrolls(rng):
    @tessera.jit
    def f(x, n):
        for _ in range(n):
            x = x * 2.0
        return x

    x = tessera.tensor(np.array([1.0, -3.0], np.float32))
    np.testing.assert_array_equal(f(x, 3).numpy(), [8.0, -24.0])
    assert f.graph_ir.count("graph.mul") == 3
    np.testing.assert_array_equal(f(x, 1).numpy(), [2.0, -6.0])
    assert f.trace_count == 2, "a new static argument must retrace"


def test_annotations_bind_symbols_and_show_in_ir(rng):
    @tessera.jit
    def f(x: tessera.Tensor["B", "D", F32], w: tessera.Tensor["D", "E", F32]):
        return ops.matmul(x, w)

    x = rng.standard_normal((3, 5)).astype(np.float32)
    w = rng.standard_normal((5, 2)).astype(np.float32)
    out = f(x, w)  # numpy arrays convert to the annotated policy
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64) @ w, rtol=1e-5)
    ir = f.graph_ir
    assert "tensor<[B, D] fp32 @accum(fp32)>" in ir and "tensor<[B, E] fp32 @accum(fp32)>" in ir
    with pytest.raises(tessera.ShapeError) as e:
        f(x, rng.standard_normal((4, 2)).astype(np.float32))
    msg = str(e.value)
    assert "'w'" in msg and "'D'" in msg and "4" in msg and "5" in msg and "'x'" in msg


def test_annotation_policy_mismatch_is_a_dtype_error():
    @tessera.jit
    def f(x: tessera.Tensor["N", tessera.fp8_e4m3 @ tessera.accum(tessera.fp32)]):
        return x * 2.0

    with pytest.raises(tessera.DtypeError, match="'x'.*fp32.*fp8_e4m3"):
        f(tessera.tensor(np.ones(4, np.float32)))
    out = f(np.array([1.0, 2.0, 3.0, 448.0]))  # numpy input is converted to the annotated policy
    assert out.dtype == tessera.fp8_e4m3


def test_rank_mismatch_names_argument():
    @tessera.jit
    def f(x: tessera.Tensor["B", "D", F32]):
        return x

    with pytest.raises(tessera.ShapeError, match="'x'.*rank 1"):
        f(np.ones(3, np.float32))


def test_require_divisible_checked_at_trace_time():
    @tessera.jit
    def f(a: tessera.Tensor["M", "K", F32]):
        tessera.require(tessera.constraint.Divisible("K", 64))
        return a + a

    f(np.ones((2, 128), np.float32))
    with pytest.raises(tessera.ShapeError) as e:
        f(np.ones((2, 100), np.float32))
    assert "K = 100" in str(e.value) and "64" in str(e.value)
    assert e.value.code == "TE2003"
    assert e.value.file == __file__


def test_trace_errors_point_at_user_line():
    @tessera.jit
    def f(x, y):
        z = x + 1.0
        return ops.matmul(z, y)  # the failing line

    x = tessera.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(tessera.ShapeError) as e:
        f(x, x)
    import inspect
    lines, start = inspect.getsourcelines(f.fn)
    expected_line = start + [i for i, line in enumerate(lines) if "failing line" in line][0]
    assert e.value.file == __file__
    assert e.value.line == expected_line
    assert f"{__file__}:{expected_line}" in str(e.value)


def test_inspect_ir_levels():
    @tessera.jit
    def f(x: tessera.Tensor["N", F32]):
        return ops.exp(x)

    text = f.inspect_ir("graph")  # traced from the annotations, no call needed
    assert "graph.exp" in text and "func @f" in text
    # The lower levels come from the same trace (symbolic N), without a call either.
    assert 'schedule.kernel %x {buffers = [-1], domain = shape<[N]>, family = "elementwise"' in f.inspect_ir("schedule")
    # fp32 exp is tile.narrow_unary at the Tile IR level (certified on CUDA);
    # the CPU backend expands it into the double formula.
    assert 'tile.narrow_unary %' in f.inspect_ir("tile") and 'fn = "exp"' in f.inspect_ir("tile")
    assert "tessera::elementary::exp" in f.inspect_ir("target")
    with pytest.raises(tessera.ArgumentError):
        f.inspect_ir("ptx")
    # PTX is a CUDA executable's (test_jit_cuda.py); on the CPU it is an error that says so.
    with pytest.raises(tessera.ArgumentError, match="runs on cpu"):
        f.inspect_ir("target", ptx=True)
    with pytest.raises(tessera.ArgumentError, match="applies to level"):
        f.inspect_ir("tile", ptx=True)


def test_traced_values_cannot_be_read():
    @tessera.jit
    def f(x):
        if x.sum() > 0:  # data-dependent Python control flow
            return x
        return -x

    with pytest.raises(tessera.CompileError, match="control flow"):
        f(tessera.tensor(np.ones(3, np.float32)))


def test_canonicalization_runs_and_keeps_results(rng):
    @tessera.jit
    def f(x):
        y = ops.transpose(ops.transpose(x))
        return -(-y) + ops.exp(x) + ops.exp(x)

    x = tessera.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    out = f(x)
    ir = f.graph_ir
    assert "graph.transpose" not in ir and "graph.neg" not in ir
    assert ir.count("graph.exp") == 1
    raw = f.inspect_ir("graph", optimized=False)
    assert raw.count("graph.exp") == 2
    xv = x.numpy().astype(np.float64)
    expected = (xv + 2 * np.exp(xv).astype(np.float32)).astype(np.float32)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_jit_options():
    @tessera.jit(capture_graph=True, deterministic=True)
    def f(x):
        return x + x

    np.testing.assert_array_equal(f(tessera.tensor(np.ones(2, np.float32))).numpy(), [2.0, 2.0])
    # target="cuda" is accepted (tests/python/test_jit_cuda.py runs it).
    assert tessera.jit(target="cuda")(lambda x: x).options["target"] == "cuda"
    with pytest.raises(tessera.ArgumentError):
        tessera.jit(target="tpu")(lambda x: x)


def test_capture_graph_on_the_cpu_runs_plain_launches():
    # The CPU has no graphs (its launches are function calls): capture_graph changes nothing there,
    # and an executable's run_graph says it needs a CUDA executable.
    f = tessera.jit(capture_graph=True)(lambda x: x * 2.0 + 1.0)
    x = tessera.tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(f(x).numpy(), np.arange(4, dtype=np.float32) * 2 + 1)
    assert f.executable().graphs == 0
    with pytest.raises(tessera.ArgumentError, match="needs a CUDA executable"):
        f.executable().run_graph([x])


def test_tensors_passed_through_varargs_and_kwargs_are_arguments():
    # Elements of *args and **kwargs are traced like named parameters: new values reuse the trace
    # (they are not baked in as constants), and other values in them are static.
    @tessera.jit
    def f(*xs, **kw):
        return xs[0] * kw["scale"] + xs[1] * kw["b"]

    a = tessera.tensor(np.arange(3, dtype=np.float32))
    b = tessera.tensor(np.ones(3, np.float32))
    np.testing.assert_array_equal(f(a, b, scale=2.0, b=b).numpy(), np.arange(3) * 2.0 + 1.0)
    c = tessera.tensor(np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(f(c, b, scale=2.0, b=c).numpy(), np.full(3, 15.0))  # 5 * 2 + 1 * 5
    assert f.trace_count == 1
    header = f.inspect_ir("graph").splitlines()[0]
    assert "%xs_0" in header and "%xs_1" in header and "%kw_b" in header, header
    f(c, b, scale=3.0, b=c)  # a new static value: a new trace
    assert f.trace_count == 2


def test_jit_of_grad_traces_once_for_new_values():
    g = tessera.jit(tessera.grad(lambda x, y: ops.sum(x * y)))
    x = tessera.tensor(np.arange(4, dtype=np.float32))
    y = tessera.tensor(np.ones(4, np.float32))
    np.testing.assert_array_equal(g(x, y).numpy(), np.ones(4))
    np.testing.assert_array_equal(g(x, x).numpy(), np.arange(4))
    assert g.trace_count == 1


def test_jit_flags_must_be_bools():
    with pytest.raises(tessera.ArgumentError, match="capture_graph must be True or False, got 'yes'"):
        tessera.jit(capture_graph="yes")(lambda x: x)
    with pytest.raises(tessera.ArgumentError, match="deterministic must be True or False"):
        tessera.jit(deterministic=1)(lambda x: x)
