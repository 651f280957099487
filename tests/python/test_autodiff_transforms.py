"""Every transform against JAX in float64: grad (argnums int / tuple, has_aux, pytrees),
value_and_grad, vjp, jvp, jacfwd, jacrev, hvp and their compositions, eagerly, on @jit functions and
inside @jit; and the errors."""

import numpy as np
import pytest

import tessera
from tessera import ops

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def t(a):
    return tessera.tensor(np.asarray(a, np.float64))


def close(got, want, rtol=1e-10):
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float64), np.asarray(want), rtol=rtol, atol=1e-12)


def f(x, y):
    return ops.sum(ops.tanh(x * y) + ops.exp(x) / (1.0 + y * y))


def fj(x, y):
    return jnp.sum(jnp.tanh(x * y) + jnp.exp(x) / (1.0 + y * y))


def vec(x, y):  # R^n x R^n -> R^n
    return ops.tanh(x) * y + x * x


def vecj(x, y):
    return jnp.tanh(x) * y + x * x


@pytest.fixture
def xy(rng):
    return rng.standard_normal(5), rng.standard_normal(5)


def test_grad_argnums_int_and_negative(xy):
    x, y = xy
    close(tessera.grad(f)(t(x), t(y)), jax.grad(fj)(x, y))
    close(tessera.grad(f, argnums=1)(t(x), t(y)), jax.grad(fj, argnums=1)(x, y))
    close(tessera.grad(f, argnums=-1)(t(x), t(y)), jax.grad(fj, argnums=1)(x, y))


def test_grad_argnums_tuple_keeps_order(xy):
    x, y = xy
    gy, gx = tessera.grad(f, argnums=(1, 0))(t(x), t(y))
    wy, wx = jax.grad(fj, argnums=(1, 0))(x, y)
    close(gy, wy)
    close(gx, wx)


def test_value_and_grad_and_has_aux(xy):
    x, y = xy

    def g(x, y):
        return f(x, y), {"double": x * 2.0, "y": y}

    (value, aux), grads = tessera.value_and_grad(g, argnums=(0, 1), has_aux=True)(t(x), t(y))
    close(value, fj(x, y))
    close(aux["double"], 2 * x)
    close(aux["y"], y)
    for a, e in zip(grads, jax.grad(fj, argnums=(0, 1))(x, y)):
        close(a, e)
    g2, aux2 = tessera.grad(g, has_aux=True)(t(x), t(y))
    close(g2, jax.grad(fj)(x, y))
    close(aux2["double"], 2 * x)


def test_grad_of_pytree_argument_with_static_leaves(rng):
    w = {"a": rng.standard_normal(3), "b": [rng.standard_normal(3), rng.standard_normal(3)]}

    def loss(p, n):
        acc = p["a"]
        for _ in range(n):  # a static int argument
            acc = acc * p["b"][0] + p["b"][1]
        return ops.sum(acc * acc)

    def lossj(p, n):
        acc = p["a"]
        for _ in range(n):
            acc = acc * p["b"][0] + p["b"][1]
        return jnp.sum(acc * acc)

    got = tessera.grad(loss)({"a": t(w["a"]), "b": [t(w["b"][0]), t(w["b"][1])]}, 3)
    want = jax.grad(lossj)(w, 3)
    close(got["a"], want["a"])
    close(got["b"][0], want["b"][0])
    close(got["b"][1], want["b"][1])


def test_vjp_with_vector_output(xy):
    x, y = xy
    ct = np.linspace(-1, 1, 5)
    out, pullback = tessera.vjp(vec, t(x), t(y))
    wout, wpull = jax.vjp(vecj, x, y)
    close(out, wout)
    for a, e in zip(pullback(t(ct)), wpull(ct)):
        close(a, e)
    # The pullback can be called again with another cotangent.
    for a, e in zip(pullback(t(ct * 3)), wpull(ct * 3)):
        close(a, e)


def test_jvp(xy):
    x, y = xy
    tx, ty = np.cos(x), np.ones(5)
    out, tan = tessera.jvp(vec, (t(x), t(y)), (t(tx), t(ty)))
    wout, wtan = jax.jvp(vecj, (x, y), (tx, ty))
    close(out, wout)
    close(tan, wtan)


def test_jacfwd_and_jacrev_shapes_and_values(rng):
    a = rng.standard_normal((2, 3))
    w = rng.standard_normal((3, 4))

    def g(a, w):
        return ops.tanh(ops.matmul(a, w))

    def gj(a, w):
        return jnp.tanh(a @ w)

    for ours, theirs in ((tessera.jacfwd, jax.jacfwd), (tessera.jacrev, jax.jacrev)):
        j = ours(g)(t(a), t(w))
        assert j.shape == (2, 4, 2, 3)
        close(j, theirs(gj)(a, w))
        ja, jw = ours(g, argnums=(0, 1))(t(a), t(w))
        wa, ww = theirs(gj, argnums=(0, 1))(a, w)
        assert jw.shape == (2, 4, 3, 4)
        close(ja, wa)
        close(jw, ww)


def test_hvp(xy):
    x, y = xy
    v = np.linspace(0.5, -0.5, 5)
    got = tessera.hvp(lambda x: f(x, t(y)), (t(x),), (t(v),))
    want = jax.jvp(jax.grad(lambda x: fj(x, y)), (x,), (v,))[1]
    close(got, want)


def test_grad_of_grad(rng):
    x = rng.standard_normal(())

    def h(x):
        return ops.tanh(x) * ops.exp(x * 0.5)

    def hj(x):
        return jnp.tanh(x) * jnp.exp(x * 0.5)

    close(tessera.grad(tessera.grad(h))(t(x)), jax.grad(jax.grad(hj))(x))
    close(tessera.grad(tessera.grad(tessera.grad(h)))(t(x)), jax.grad(jax.grad(jax.grad(hj)))(x), rtol=1e-9)


def test_jvp_of_grad(xy):
    x, y = xy
    v = np.cos(x)
    _, got = tessera.jvp(tessera.grad(f), (t(x), t(y)), (t(v), t(np.zeros(5))))
    _, want = jax.jvp(jax.grad(fj), (x, y), (v, np.zeros(5)))
    close(got, want)


def test_jacfwd_of_jacrev_is_the_hessian(rng):
    x = rng.standard_normal(3)

    def s(x):
        return ops.sum(ops.tanh(x) * x * x)

    def sj(x):
        return jnp.sum(jnp.tanh(x) * x * x)

    hess = tessera.jacfwd(tessera.jacrev(s))(t(x))
    assert hess.shape == (3, 3)
    close(hess, jax.hessian(sj)(x), rtol=1e-9)


def test_grad_of_a_jit_function(xy):
    x, y = xy
    jf = tessera.jit(f)
    close(tessera.grad(jf, argnums=1)(t(x), t(y)), jax.grad(fj, argnums=1)(x, y))
    assert jf.trace_count == 0, "the @jit body is traced into the gradient's trace, not separately"
    close(jf(t(x), t(y)), fj(x, y))


def test_grad_inside_jit_with_a_closure(xy):
    x, y = xy

    @tessera.jit
    def step(x, y):
        # y is a traced value of the enclosing function, closed over by the differentiated function.
        g = tessera.grad(lambda a: f(a, y))(x)
        return x - 0.1 * g

    close(step(t(x), t(y)), x - 0.1 * jax.grad(fj)(x, y))
    ir = step.graph_ir
    assert ir.count("func @") == 1, "the transformed functions are spliced in, not left behind:\n" + ir
    close(step(t(y), t(x)), y - 0.1 * jax.grad(fj)(y, x))
    assert step.trace_count == 1


def test_jit_of_grad_of_grad(rng):
    x = rng.standard_normal(4)
    g2 = tessera.jit(tessera.grad(lambda x: ops.sum(tessera.grad(lambda z: ops.sum(ops.tanh(z) ** 3.0))(x))))
    want = jax.grad(lambda x: jnp.sum(jax.grad(lambda z: jnp.sum(jnp.tanh(z) ** 3.0))(x)))(x)
    close(g2(t(x)), want)


def test_integer_arguments_get_zero_gradient(rng):
    x = rng.standard_normal(3)
    n = tessera.tensor(np.array([1, 2, 3], np.int32))
    gx, gn = tessera.grad(lambda x, n: ops.sum(x * ops.cast(n, "fp64")), argnums=(0, 1))(t(x), n)
    close(gx, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(gn.numpy(), np.float64), 0.0)


# --- errors -----------------------------------------------------------------------------------------

def test_grad_of_non_scalar_output_is_an_error(xy):
    x, y = xy
    with pytest.raises(tessera.ShapeError, match=r"scalar \(rank-0\) output.*\(5,\)"):
        tessera.grad(vec)(t(x), t(y))


def test_bad_argnums(xy):
    x, y = xy
    with pytest.raises(tessera.ArgumentError, match="argnums 2 is out of range: f\\(\\) was called with 2"):
        tessera.grad(f, argnums=2)(t(x), t(y))
    with pytest.raises(tessera.ArgumentError, match="argnums must be an int or a non-empty tuple"):
        tessera.grad(f, argnums="x")(t(x), t(y))
    with pytest.raises(tessera.ArgumentError, match="names argument 0 twice"):
        tessera.grad(f, argnums=(0, -2))(t(x), t(y))
    with pytest.raises(tessera.ArgumentError, match="argument 1 of f\\(\\) is int"):
        tessera.grad(f, argnums=1)(t(x), 3)


def test_has_aux_needs_a_pair(xy):
    x, y = xy
    with pytest.raises(tessera.ArgumentError, match="must return a pair"):
        tessera.grad(f, has_aux=True)(t(x), t(y))


def test_every_graph_op_has_both_rules():
    """Differentiating an op without a rule is an error naming the op (C++ tests cover the message);
    every Graph IR op has both rules, and ops of other dialects have none. graph.shard_slice is written
    only by the partitioner, after autodiff ran on the global program, and graph.lookup and
    graph.fft_passes, graph.superblock_sums, graph.superblock_total, graph.block_sums and
    graph.block_total only by the compiled pipeline (docs/design/0030, 0034, 0036, 0039): they have none."""
    after_autodiff = ("graph.shard_slice", "graph.lookup", "graph.fft_passes", "graph.superblock_sums",
                      "graph.superblock_total", "graph.block_sums", "graph.block_total")
    graph_ops = [n for n in tessera._C.op_names() if n.startswith("graph.") and n not in after_autodiff]
    for n in after_autodiff:
        assert not tessera.autodiff.has_vjp(n)
    assert graph_ops
    assert [n for n in graph_ops if not tessera.autodiff.has_vjp(n)] == []
    assert [n for n in graph_ops if not tessera.autodiff.has_jvp(n)] == []
    assert not tessera.autodiff.has_vjp("tile.exp")


def test_an_error_raised_by_a_rule_reaches_the_caller():
    code = """
import numpy as np, tessera
from tessera import ops
def rule(o, r, c, a):
    raise ValueError("rule for exp failed")
tessera.autodiff.register_vjp("exp", rule)
try:
    tessera.grad(lambda x: ops.sum(ops.exp(x)))(tessera.tensor(np.ones(2)))
except ValueError as e:
    print("ERR", e)
"""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERR rule for exp failed" in out.stdout, out.stdout + out.stderr


def test_eager_transforms_run_compiled_eager_kernels_with_the_reference_bits(monkeypatch):
    # Outside @jit a transform runs its staged function op by op on compiled eager kernels (the
    # reference executor is not called), with the reference executor's bits; TESSERA_EAGER=reference
    # runs the same function on the oracle.
    from tessera import _C
    rng = np.random.default_rng(5)
    x, y = (tessera.tensor(rng.standard_normal((3, 17)).astype(np.float32)) for _ in range(2))

    def h(x, y):
        return ops.sum(ops.softmax_safe(x * y, axis=-1) * ops.tanh(y + 0.5))

    monkeypatch.delenv("TESSERA_EAGER", raising=False)
    monkeypatch.delenv("TESSERA_BACKEND", raising=False)
    reference_execute = _C.IRModule.execute

    def not_the_oracle(*args, **kwargs):
        raise AssertionError("an eager transform ran the reference executor")
    monkeypatch.setattr(_C.IRModule, "execute", not_the_oracle)
    compiled = [g.numpy() for g in tessera.grad(h, argnums=(0, 1))(x, y)]
    tangent = tessera.jvp(h, (x, y), (y, x))[1].numpy()
    monkeypatch.setattr(_C.IRModule, "execute", reference_execute)
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    reference = [g.numpy() for g in tessera.grad(h, argnums=(0, 1))(x, y)]
    assert [g.tobytes() for g in compiled] == [g.tobytes() for g in reference]
    assert tessera.jvp(h, (x, y), (y, x))[1].numpy().tobytes() == tangent.tobytes()
