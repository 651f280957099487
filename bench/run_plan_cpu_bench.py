"""Host cost of a compiled CPU call with and without run plans (docs/design/0048),
one core, one thread, in one run.

    .venv/bin/python bench/run_plan_cpu_bench.py [--core N]

For each function, microseconds per `Executable.run` call (kernels included)
walking the steps every time (TESSERA_RUN_PLANS=0) and replaying the run plan
(the default), then the same through the `@jit` call, and eager
`tessera.ops.add(x, x)` next to numpy's `x + x` on the same 64 elements.
Functions: `x * 2 + 1` on 64 fp32 elements (1 kernel); the gradient of a
2-layer MLP ([8, 16] x [16, 16], 5 kernels); a PINN-shaped step (gradients
of a loss that reads du/dx, 64 points, width 32).
"""

import os

from one_core import per_call_us  # one core, one thread for every side
import numpy as np

import tessera

ops = tessera.ops


def walked(fn):
    os.environ["TESSERA_RUN_PLANS"] = "0"
    try:
        return per_call_us(fn)
    finally:
        del os.environ["TESSERA_RUN_PLANS"]


def mlp(x, w1, w2):
    return ops.sum(ops.relu(ops.matmul(ops.relu(ops.matmul(x, w1)), w2)))


def pinn_loss(w1, b1, w2, b2, x):
    def u(w1, b1, w2, b2, x):
        return ops.sum(ops.matmul(ops.tanh(ops.matmul(x, w1) + b1), w2) + b2)
    du = tessera.grad(u, argnums=4)(w1, b1, w2, b2, x)
    return ops.sum(du * du)


def main():
    rng = np.random.default_rng(0)

    def t(*shape):
        return tessera.tensor((rng.standard_normal(shape) * 0.3).astype(np.float32))

    cases = [
        ("x * 2 + 1, 64 elements", lambda x: x * 2.0 + 1.0, [t(64)]),
        ("grad MLP [8,16]x[16,16]", tessera.grad(mlp, argnums=(1, 2)), [t(8, 16), t(16, 16), t(16, 16)]),
        ("PINN step, 64 points", tessera.grad(pinn_loss, argnums=(0, 1, 2, 3)), [t(1, 32), t(32), t(32, 1), t(1), t(64, 1)]),
    ]
    print(f"{'function':<26} {'kernels':>7} {'walk us':>8} {'plan us':>8} {'walk/plan':>9} {'jit call us':>11}")
    for name, fn, args in cases:
        f = tessera.jit(fn)
        f(*args)
        exe = f.executable()
        walk = walked(lambda: exe.run(args))
        plan = per_call_us(lambda: exe.run(args))
        assert exe.run_plans == 1, exe.plan_refusals
        call = per_call_us(lambda: f(*args))
        print(f"{name:<26} {len(exe.kernels):7d} {walk:8.2f} {plan:8.2f} {walk / plan:8.2f}x {call:11.2f}")
    x = t(64)
    xn = x.numpy()
    eager = per_call_us(lambda: ops.add(x, x), calls=20000)
    numpy = per_call_us(lambda: xn + xn, calls=20000)
    print(f"eager tessera.ops.add(x, x): {eager:.2f} us; numpy x + x: {numpy:.2f} us ({eager / numpy:.1f}x numpy's time)")


if __name__ == "__main__":
    main()
