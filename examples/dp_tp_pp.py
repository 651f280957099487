"""dp x tp x pp in one program: a 2-stage pipeline of Megatron MLP blocks on 8 virtual devices.

Mesh dp=2 x tp=2 x pp=2. One index launch over all three axes runs the
same function on every device; each device knows its coordinates and has a
communicator per axis:

- pp: stage `pp` of the model, y = x + gelu(x @ W1) @ W2, driven by the
  1F1B action list of examples/pipeline.py; activations and their gradients
  go between stages with tessera.send / tessera.recv.
- tp: within a stage, W1 is split by columns and W2 by rows over tp. The
  forward allreduces the block's output terms over tp; the backward
  allreduces the input gradient's terms (the residual adds the rest).
- dp: the batch is split over dp; after the pipeline has run every
  microbatch, each weight gradient is allreduced over dp and scaled by 1/dp.

The loss is the mean squared error of the whole batch. The reference is the
same two blocks as one function on one device, differentiated whole; loss
and gradients agree within rounding (tp sums its terms in rank order, dp sums
its replicas in rank order, microbatch gradients add in microbatch order).

Run: PYTHONPATH=build-dev/pydev python examples/dp_tp_pp.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

import tessera
from tessera import dist, ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import one_f_one_b_schedule, run_actions, simulate, split_microbatches, sum_in_order  # noqa: E402

DP, TP, PP = 2, 2, 2


def block_term(x, w1, w2):
    """This tp member's term of the block's MLP (its columns of W1, rows of W2)."""
    return ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


@tessera.jit
def block_forward(x, w1, w2):
    return x + tessera.allreduce(block_term(x, w1, w2), axis="tp")


@tessera.jit
def block_backward(x, w1, w2, dy):
    """(dx, dw1, dw2): dx is the residual's dy plus the tp terms' gradients, allreduced."""
    _, pullback = tessera.vjp(block_term, x, w1, w2)
    dx_term, dw1, dw2 = pullback(dy)
    return dy + tessera.allreduce(dx_term, axis="tp"), dw1, dw2


def mse(y, t, scale):
    d = y - t
    return ops.mean(d * d) * scale


loss_and_dy = tessera.value_and_grad(mse, argnums=0)  # eager: on the last stage only


def device(x, t, w1_stages, w2_stages, microbatches):
    """Every device: its dp shard of the batch, its stage's tp slice of the weights.
    Returns (the dp-mean loss on the last stage else None, dw1, dw2 of its slice)."""
    tp, pp = dist.axis_index("tp"), dist.axis_index("pp")
    dp_size, stages = dist.axis_size("dp"), dist.axis_size("pp")
    last = pp == stages - 1
    w1 = tessera.tensor(np.ascontiguousarray(np.array_split(w1_stages[pp], dist.axis_size("tp"), axis=1)[tp]))
    w2 = tessera.tensor(np.ascontiguousarray(np.array_split(w2_stages[pp], dist.axis_size("tp"), axis=0)[tp]))
    xs, ts = split_microbatches(x.numpy(), microbatches), split_microbatches(t.numpy(), microbatches)
    scale = tessera.tensor(np.float32(1.0 / microbatches))
    dys = {}

    def forward(mb, x_mb):
        y = block_forward(x_mb, w1, w2)
        if not last:
            return y
        loss, dys[mb] = loss_and_dy(y, ts[mb], scale)
        return loss

    def backward(mb, x_mb, dy):
        dx, dw1, dw2 = block_backward(x_mb, w1, w2, dys.pop(mb) if last else dy)
        return dx, (dw1, dw2)

    shape = (xs[0].shape[0], x.shape[1])
    grads, kept, _ = run_actions(one_f_one_b_schedule(stages, microbatches)[pp], shape, forward, backward,
                                 lambda mb: xs[mb])
    inv = 1.0 / dp_size
    dw1 = tessera.allreduce(sum_in_order([grads[mb][0] for mb in range(microbatches)]), axis="dp") * inv
    dw2 = tessera.allreduce(sum_in_order([grads[mb][1] for mb in range(microbatches)]), axis="dp") * inv
    loss = None
    if last:
        loss = float((tessera.allreduce(sum_in_order([kept[mb] for mb in range(microbatches)]), axis="dp") * inv)
                     .numpy())
    return loss, dw1.numpy(), dw2.numpy()


def train_step_gradients(x, t, w1_stages, w2_stages, microbatches=4):
    """Loss and full gradients [stage][...] of the dp x tp x pp program, gathered from its devices."""
    simulate(one_f_one_b_schedule(PP, microbatches))
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(DP * TP * PP)], axes=("dp", "tp", "pp"),
                     shape=(DP, TP, PP))
    batch = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))
    X, T = dist.tensor(x, layout=batch, mesh=mesh), dist.tensor(t, layout=batch, mesh=mesh)
    outs = tessera.index_launch(axis=("dp", "tp", "pp"))(device)(X.parts("dp"), T.parts("dp"), w1_stages,
                                                                  w2_stages, microbatches)
    at = {mesh.coords(r): o for r, o in enumerate(outs)}  # results come in mesh order
    for (_, tp, pp), (_, g1, g2) in at.items():  # the dp replicas hold the same bits after the allreduce
        assert np.array_equal(g1, at[(0, tp, pp)][1]) and np.array_equal(g2, at[(0, tp, pp)][2])
    loss = at[(0, 0, PP - 1)][0]
    g1 = [np.concatenate([at[(0, tp, s)][1] for tp in range(TP)], axis=1) for s in range(PP)]
    g2 = [np.concatenate([at[(0, tp, s)][2] for tp in range(TP)], axis=0) for s in range(PP)]
    return loss, g1, g2


def model_loss(x, t, w1a, w2a, w1b, w2b):
    for w1, w2 in ((w1a, w2a), (w1b, w2b)):
        x = x + block_term(x, w1, w2)
    d = x - t
    return ops.mean(d * d)


def one_device(x, t, w1_stages, w2_stages):
    """The two blocks as one function, differentiated whole (eager, on one device)."""
    f = tessera.value_and_grad(model_loss, argnums=(2, 3, 4, 5))
    loss, (g1a, g2a, g1b, g2b) = f(*[tessera.tensor(a) for a in (x, t, w1_stages[0], w2_stages[0], w1_stages[1],
                                                                   w2_stages[1])])
    return float(loss.numpy()), [g1a.numpy(), g1b.numpy()], [g2a.numpy(), g2b.numpy()]


def problem(batch=16, width=8, hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    t = rng.standard_normal((batch, width)).astype(np.float32)
    w1 = (rng.standard_normal((PP, width, hidden)) / np.sqrt(width)).astype(np.float32)
    w2 = (rng.standard_normal((PP, hidden, width)) / np.sqrt(hidden)).astype(np.float32)
    return x, t, w1, w2


def main():
    x, t, w1, w2 = problem()
    loss, g1, g2 = train_step_gradients(x, t, w1, w2)
    ref_loss, r1, r2 = one_device(x, t, w1, w2)
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(g1 + g2, r1 + r2))
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss) and err <= 1e-5, (loss, ref_loss, err)
    print(f"dp=2 x tp=2 x pp=2 on 8 virtual devices, 1F1B over 4 microbatches: loss {loss:.6f} "
          f"(one device {ref_loss:.6f}), max |grad diff| {err:.1e}")
    print("dp_tp_pp: ok")


if __name__ == "__main__":
    main()
