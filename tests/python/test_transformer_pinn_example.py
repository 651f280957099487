"""examples/transformer_pinn.py: a transformer block and a PINN (a third derivative of its
network) trained in one jit(value_and_grad). Its gradients are checked against float64 JAX, its
loss falls, and on a GPU its steps give the CPU's bits."""

import importlib.util
import math
import pathlib

import numpy as np
import pytest

from tessera import _C

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transformer_pinn.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("transformer_pinn_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jax_loss(jnp, jax, ex):
    """The example's loss in jax.numpy: plain attention with a causal mask, layernorm, exact GELU,
    and the PINN's u'' by two nested jax.grad calls."""
    def layernorm(x, g, b):
        c = x - x.mean(-1, keepdims=True)
        return c / jnp.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * g + b

    def block(p, x):
        h = layernorm(x, p["ln1_g"], p["ln1_b"])
        q, k, v = (h @ p[n] for n in ("wq", "wk", "wv"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(ex.D)
        s = jnp.where(np.tril(np.ones((ex.S, ex.S), bool)), s, -jnp.inf)
        x = x + (jax.nn.softmax(s, -1) @ v) @ p["wo"]
        h = layernorm(x, p["ln2_g"], p["ln2_b"])
        return x + jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False) @ p["w2"] + p["b2"]

    def u(p, x):  # one point
        return (jnp.tanh(x * p["pw1"][0] + p["pb1"]) @ p["pw2"][:, 0] + p["pb2"][0])

    def loss(p, x, target, points, boundary):
        d = block(p, x) - target
        d2u = jax.vmap(jax.grad(jax.grad(u, argnums=1), argnums=1), in_axes=(None, 0))(p, points[:, 0])
        residual = d2u + math.pi ** 2 * jnp.sin(math.pi * points[:, 0])
        u_b = jax.vmap(u, in_axes=(None, 0))(p, boundary[:, 0])
        return (d * d).mean() + 0.01 * ((residual * residual).mean() + (u_b * u_b).mean())

    return loss


def test_example_gradients_match_float64_jax_and_training_lowers_the_loss(example):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    import tessera

    p, data = example.initial()
    params = [tessera.tensor(p[n]) for n in example.NAMES]
    inputs = [tessera.tensor(data[n]) for n in ("x", "target", "points", "boundary")]
    value, grads = example.step_fn(*params, *inputs)

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        p64 = {n: jnp.asarray(p[n], jnp.float64) for n in example.NAMES}
        d64 = [jnp.asarray(data[n], jnp.float64) for n in ("x", "target", "points", "boundary")]
        ref_value, ref_grads = jax.value_and_grad(jax_loss(jnp, jax, example))(p64, *d64)
        ref_value = float(ref_value)
        ref_grads = {n: np.asarray(g) for n, g in ref_grads.items()}
    finally:
        jax.config.update("jax_enable_x64", previous)

    assert abs(float(value.numpy()) - ref_value) <= 1e-5 * abs(ref_value)
    for name, g in zip(example.NAMES, grads):
        ref = ref_grads[name]
        got = np.asarray(g.numpy(), np.float64)
        assert got.shape == ref.shape, name
        # fp32 throughout (the PINN's third derivative included): within 1e-4 of the gradient's
        # largest entry.
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max(), err_msg=name)

    losses, _ = example.train(steps=3)
    assert losses[0] == pytest.approx(float(value.numpy()))
    assert losses[2] < losses[1] < losses[0]


@pytest.mark.skipif(not _C._cuda_available(), reason="no CUDA device")
def test_example_steps_on_the_gpu_give_the_cpus_bits(example, monkeypatch):
    """No tensor core runs in this fp32 step, so cuda:0 reproduces the CPU bit for bit, with no
    knob: fp32 attention takes the blocked kernels on both (exact fp32 products, the same order;
    docs/design/0052)."""
    monkeypatch.delenv("TESSERA_ATTENTION_BLOCKED", raising=False)
    gpu_losses, gpu_params = example.train(steps=2, device="cuda:0")
    monkeypatch.setattr(example, "step_fn", example.make_step_fn())
    cpu_losses, cpu_params = example.train(steps=2)
    assert gpu_losses == cpu_losses
    for name in example.NAMES:
        assert np.array_equal(gpu_params[name].view(np.uint32), cpu_params[name].view(np.uint32)), name
