"""A transformer block and a physics-informed network trained in one graph.

One loss adds two models:
- a pre-norm transformer block on a batch of token sequences (layernorm,
  flash attention with a causal mask, a GELU MLP, residuals), regressing
  targets;
- a PINN for u'' = -pi^2 sin(pi x) on [0, 1] with u(0) = u(1) = 0 (solution
  sin(pi x)): a tanh MLP u(x) whose second derivative comes from two nested
  `tessera.grad`s of u, so the training gradient is a third derivative.

`tessera.jit(tessera.value_and_grad(loss))` traces the whole step once: the
attention backward, the layernorm and GELU backward passes and the PINN's
higher-order derivatives are one Graph IR function, compiled into fused
kernels for the device of the inputs. Each step is an SGD update.

Run (CPU; `--device cuda:0` on a GPU, `--check` to compare the device's
losses and weights with the CPU's bit for bit):

    PYTHONPATH=build-dev/pydev python examples/transformer_pinn.py [--steps 5]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import tessera
from tessera import ops

B, S, D, HEADS, HIDDEN = 2, 16, 128, 1, 256  # flash_attn takes head dims of 64, 128 or 256
PINN_WIDTH, PINN_POINTS = 32, 64


def layernorm(x, g, b):
    return ops.layernorm_safe(x, g, b, eps=1e-5)


def transformer_block(p, x):
    """x [B, S, D] -> [B, S, D], pre-norm, one attention head of width D."""
    h = layernorm(x, p["ln1_g"], p["ln1_b"])
    q = ops.reshape(ops.matmul(h, p["wq"]), (B, HEADS, S, D))
    k = ops.reshape(ops.matmul(h, p["wk"]), (B, HEADS, S, D))
    v = ops.reshape(ops.matmul(h, p["wv"]), (B, HEADS, S, D))
    a = ops.reshape(ops.flash_attn(q, k, v, causal=True), (B, S, D))
    x = x + ops.matmul(a, p["wo"])
    h = layernorm(x, p["ln2_g"], p["ln2_b"])
    return x + ops.matmul(ops.gelu(ops.matmul(h, p["w1"]) + p["b1"]), p["w2"]) + p["b2"]


def pinn_net(w1, b1, w2, b2, x):
    """u at the points x [P, 1]: [P, 1]."""
    return ops.matmul(ops.tanh(ops.matmul(x, w1) + b1), w2) + b2


def pinn_u(w1, b1, w2, b2, x):
    """u at the points x, summed: the sum's gradient in x is u'(x) pointwise."""
    return ops.sum(pinn_net(w1, b1, w2, b2, x))


def pinn_loss(w1, b1, w2, b2, x, boundary):
    du = tessera.grad(pinn_u, argnums=4)
    d2u = tessera.grad(lambda *a: ops.sum(du(*a)), argnums=4)(w1, b1, w2, b2, x)
    residual = d2u + (math.pi ** 2) * ops.sin(math.pi * x)
    u_b = pinn_net(w1, b1, w2, b2, boundary)
    return ops.mean(residual * residual) + ops.mean(u_b * u_b)


TRANSFORMER = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2"]
PINN = ["pw1", "pb1", "pw2", "pb2"]
NAMES = TRANSFORMER + PINN


def loss(*args):
    params = dict(zip(NAMES, args[:len(NAMES)]))
    x, target, points, boundary = args[len(NAMES):]
    d = transformer_block(params, x) - target
    fit = ops.mean(d * d)
    physics = pinn_loss(*(params[n] for n in PINN), points, boundary)
    return fit + 0.01 * physics


def make_step_fn():
    """The compiled step: the loss and its gradients in every parameter. A new one compiles again,
    under the knobs (environment) of its first call."""
    return tessera.jit(tessera.value_and_grad(loss, argnums=tuple(range(len(NAMES)))))


step_fn = make_step_fn()


def initial(seed=0):
    """Parameters and data as float32 numpy arrays."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    p = {
        "ln1_g": np.ones(D, np.float32), "ln1_b": np.zeros(D, np.float32),
        "wq": w(D, D, scale=D ** -0.5), "wk": w(D, D, scale=D ** -0.5), "wv": w(D, D, scale=D ** -0.5),
        "wo": w(D, D, scale=D ** -0.5),
        "ln2_g": np.ones(D, np.float32), "ln2_b": np.zeros(D, np.float32),
        "w1": w(D, HIDDEN, scale=D ** -0.5), "b1": np.zeros(HIDDEN, np.float32),
        "w2": w(HIDDEN, D, scale=HIDDEN ** -0.5), "b2": np.zeros(D, np.float32),
        "pw1": w(1, PINN_WIDTH, scale=1.0), "pb1": w(PINN_WIDTH, scale=0.5),
        "pw2": w(PINN_WIDTH, 1, scale=PINN_WIDTH ** -0.5), "pb2": np.zeros(1, np.float32),
    }
    data = {
        "x": w(B, S, D, scale=1.0),
        "target": w(B, S, D, scale=1.0),
        "points": np.linspace(0.0, 1.0, PINN_POINTS, dtype=np.float32).reshape(PINN_POINTS, 1),
        "boundary": np.array([[0.0], [1.0]], np.float32),
    }
    return p, data


def train(steps=5, lr=0.05, device="cpu"):
    """Runs `steps` SGD steps on `device`; returns the losses and the final parameters (numpy)."""
    p, data = initial()
    params = [tessera.tensor(p[n]).to(device) for n in NAMES]
    inputs = [tessera.tensor(data[n]).to(device) for n in ("x", "target", "points", "boundary")]
    lr_t = tessera.tensor(np.float32(lr)).to(device)
    losses = []
    for _ in range(steps):
        value, grads = step_fn(*params, *inputs)
        losses.append(float(value.to("cpu").numpy()))
        params = [w - lr_t * g for w, g in zip(params, grads)]
    return losses, {n: w.to("cpu").numpy() for n, w in zip(NAMES, params)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--check", action="store_true", help="compare the device's run with the CPU's, bit for bit")
    a = ap.parse_args()
    if a.check and a.device == "cpu":
        ap.error("--check compares a device's run with the CPU's: give --device too (such as cuda:0)")
    losses, params = train(a.steps, device=a.device)
    kernels = len(step_fn.executable().kernels)
    print(f"{a.device}: {kernels} kernels; loss per step: " + ", ".join(f"{v:.6f}" for v in losses))
    if a.check:
        # No tensor core runs in this fp32 step (fp32 attention takes the same blocked kernels,
        # exact fp32 products in the same order, on both), so the CPU should give the same bits.
        cpu_losses, cpu_params = train(a.steps, device="cpu")
        same = [n for n in NAMES if np.array_equal(params[n].view(np.uint32), cpu_params[n].view(np.uint32))]
        print(f"losses equal to the CPU's bits: {losses == cpu_losses}; "
              f"parameters equal: {len(same)} of {len(NAMES)}")
        for n in NAMES:
            if n not in same:
                d = np.abs(params[n].astype(np.float64) - cpu_params[n])
                scale = max(float(np.abs(cpu_params[n]).max()), 1e-30)
                print(f"  {n}: {int((d > 0).sum())} of {d.size} elements differ, max |diff| / max |w| {d.max() / scale:.2e}")


if __name__ == "__main__":
    main()
