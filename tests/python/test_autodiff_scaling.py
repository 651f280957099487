"""Loss scaling (@loss_scale policies), GradScaler on forced overflow, and Region["reduce_sum"]
gradient accumulation."""

import numpy as np
import pytest

import tessera
from tessera import ops


def t(a, dtype="fp32"):
    return tessera.tensor(np.asarray(a, np.float64), dtype=dtype)


def as64(x):
    return np.asarray(x.numpy(), np.float64)


# --- @loss_scale ----------------------------------------------------------------------------------

def test_loss_scale_policy_unscales_the_gradients(rng):
    x = rng.standard_normal(8).astype(np.float32)
    plain = tessera.grad(lambda x: ops.sum(x * x * x))(t(x))
    scaled = tessera.grad(lambda x: ops.cast(ops.sum(x * x * x), tessera.fp32 @ tessera.loss_scale(1024.0)))(t(x))
    # Scaling by a power of two and dividing it out again is exact in binary floating point.
    np.testing.assert_array_equal(as64(scaled), as64(plain))
    np.testing.assert_allclose(as64(plain), 3 * x.astype(np.float64) ** 2, rtol=1e-6)


def test_loss_scale_on_a_bf16_loss(rng):
    """A bf16 loss with a loss scale: fp32 gradients, unscaled."""
    x = t(rng.standard_normal(4) * 1e-3, "bf16 @accum(fp32)")
    w = 2.0**-100  # exact in bf16

    def loss(x):
        return ops.cast(ops.sum(x * w), tessera.bf16 @ tessera.accum(tessera.fp32) @ tessera.loss_scale(2.0**20))

    g = tessera.grad(loss)(x)
    assert str(g.dtype) == "fp32"
    np.testing.assert_array_equal(as64(g), w)


def test_overflow_stays_inf_after_unscaling():
    x = t([1.0, 2.0])
    g = tessera.grad(lambda x: ops.cast(ops.sum(x * 1e35), tessera.fp32 @ tessera.loss_scale(2.0**20)))(x)
    assert np.all(np.isinf(as64(g))), "an overflowed backward pass must stay inf so a GradScaler sees it"


def test_has_aux_honours_the_loss_scale(rng):
    x = rng.standard_normal(3).astype(np.float32)
    g, aux = tessera.grad(lambda x: (ops.cast(ops.sum(x * x), tessera.fp32 @ tessera.loss_scale(64.0)), x * 2.0),
                          has_aux=True)(t(x))
    np.testing.assert_allclose(as64(g), 2 * x.astype(np.float64), rtol=1e-6)
    np.testing.assert_allclose(as64(aux), 2 * x.astype(np.float64), rtol=1e-6)


# --- GradScaler ------------------------------------------------------------------------------------

def train(scaler, w, steps, factor):
    """SGD on sum(w * factor): the gradient is `factor`, which overflows fp32 once scaled enough."""
    history = []
    for _ in range(steps):
        loss_fn = lambda w: scaler.scale(ops.sum(w * factor))  # noqa: E731
        _, grads = tessera.value_and_grad(loss_fn)(w)
        new_w = scaler.step(lambda g: w - g * 1e-36, grads)
        history.append((new_w is not None, scaler.scale_value))
        if new_w is not None:
            w = new_w
    return w, history


def test_grad_scaler_skips_and_backs_off_on_overflow():
    scaler = tessera.GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=1000)
    w = t(np.ones(3))
    # factor * scale > fp32 max (3.4e38) while scale > ~3400: 2**16 -> 2**11 takes 5 skipped steps.
    w, history = train(scaler, w, 7, 1e35)
    assert history[:5] == [(False, 2.0**15), (False, 2.0**14), (False, 2.0**13), (False, 2.0**12), (False, 2.0**11)]
    assert history[5] == (True, 2.0**11) and history[6] == (True, 2.0**11)
    assert scaler.skipped_steps == 5 and scaler.good_steps == 2
    np.testing.assert_allclose(as64(w), 1.0 - 2 * 1e35 * 1e-36, rtol=1e-6)


def test_grad_scaler_grows_after_growth_interval_good_steps():
    scaler = tessera.GradScaler(init_scale=4.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    w = t(np.ones(2))
    _, history = train(scaler, w, 7, 1.0)
    assert [s for _, s in history] == [4.0, 4.0, 8.0, 8.0, 8.0, 16.0, 16.0]
    assert all(ok for ok, _ in history)


def test_grad_scaler_step_without_optimizer_and_nan():
    scaler = tessera.GradScaler(init_scale=8.0, growth_interval=2)
    assert scaler.step({"a": t([np.nan, 1.0])}) is None and scaler.scale_value == 4.0
    g = {"a": t([1.0, 2.0])}
    assert scaler.step(g) is g and scaler.good_steps == 1


def test_grad_scaler_arguments():
    with pytest.raises(tessera.ArgumentError, match="backoff_factor"):
        tessera.GradScaler(backoff_factor=1.5)
    with pytest.raises(tessera.ArgumentError, match="init_scale"):
        tessera.GradScaler(init_scale=float("inf"))


# --- Region["reduce_sum"] ------------------------------------------------------------------------

def test_reduce_sum_region_accumulates_with_plus_equals(rng):
    def loss(w: tessera.Region["reduce_sum"], x: tessera.Region["read"]):
        return ops.sum(ops.matmul(x, w) ** 2.0)

    w = t(rng.standard_normal((3, 2)), "fp64")
    acc = tessera.tensor(np.zeros((3, 2)))
    g = tessera.grad(loss, accumulate={0: acc})
    batches = [rng.standard_normal((4, 3)) for _ in range(3)]
    for xb in batches:
        out = g(w, t(xb, "fp64"))
        assert out is acc
    want = sum(2 * xb.T @ (xb @ as64(w)) for xb in batches)
    np.testing.assert_allclose(as64(acc), want, rtol=1e-12)


def test_accumulate_needs_the_reduce_sum_privilege(rng):
    def loss(w, x: tessera.Region["read"]):
        return ops.sum(w * x)

    with pytest.raises(tessera.PrivilegeError, match="parameter 'w' of loss\\(\\) is not annotated"):
        tessera.grad(loss, accumulate={0: tessera.tensor(np.zeros(2))})(t([1.0, 2.0]), t([3.0, 4.0]))


def test_write_region_has_no_gradient():
    @tessera.jit
    def step(w: tessera.Region["read"], y: tessera.Region["write"]):
        return ops.sum(w * 2.0)

    with pytest.raises(tessera.PrivilegeError, match="Region\\['write'\\]"):
        tessera.grad(step, argnums=1)(t([1.0]), t([0.0]))
    np.testing.assert_allclose(as64(tessera.grad(step)(t([1.0]), t([0.0]))), [2.0])


def test_region_annotation_is_accepted_by_jit_and_checked():
    @tessera.jit
    def f(x: tessera.Region["read"], y: tessera.Region["reduce_sum"]):
        y += x * 2.0

    y = t([1.0])
    f(t([1.0]), y)
    np.testing.assert_allclose(as64(y), [3.0])

    @tessera.jit
    def reads(x: tessera.Region["read"], y: tessera.Region["reduce_sum"]):
        return y + x * 2.0

    with pytest.raises(tessera.PrivilegeError, match="'y' is tessera.Region\\['reduce_sum'\\]; it is read"):
        reads(t([1.0]), t([1.0]))
    with pytest.raises(tessera.PrivilegeError, match="unknown privilege"):
        tessera.Region["readwrite"]
