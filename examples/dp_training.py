"""Data parallelism (DP): a small MLP trained with its batch split over a dp axis.

Every replica holds the whole model and a quarter of the batch. Each step it
computes its shard's loss and gradients, allreduces the gradients over dp
(a sum, then times 1/dp: the mean of the shards' gradients, which is the
gradient of the whole batch's mean loss) and takes the same SGD step, so
the replicas stay identical.

Two references on one device:
- the same per-shard gradient function on each shard of the batch, summed in
  rank order: the allreduce's order, so the weights after training are
  bitwise those of the data-parallel run;
- the whole batch at once: equal within rounding (the gradient's matmul
  sums over the whole batch in its own order).

Run: PYTHONPATH=build-dev/pydev python examples/dp_training.py
"""

from __future__ import annotations

import numpy as np

import tessera
from tessera import dist, ops


def mlp(x, w1, w2):
    return ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


def loss_fn(w1, w2, x, t):
    d = mlp(x, w1, w2) - t
    return ops.mean(d * d)


# Compiled once (for the shard's shapes) and run by every replica.
grad_step = tessera.jit(tessera.value_and_grad(loss_fn, argnums=(0, 1)))


def sgd(w, g, lr):
    return w - lr * g


def replica(x, t, w1, w2, steps, lr):
    """One dp member: its batch shard, its copy of the weights. Returns the
    (dp-mean) loss of every step and the final weights."""
    dp = dist.axis_size("dp")
    w1, w2, lr = tessera.tensor(w1), tessera.tensor(w2), tessera.tensor(np.float32(lr))
    losses = []
    for _ in range(steps):
        loss, (g1, g2) = grad_step(w1, w2, x, t)
        # The only communication: one allreduce per gradient (and one for the loss we print).
        g1 = tessera.allreduce(g1, axis="dp") * (1.0 / dp)
        g2 = tessera.allreduce(g2, axis="dp") * (1.0 / dp)
        losses.append(float((tessera.allreduce(loss, axis="dp") * (1.0 / dp)).numpy()))
        w1, w2 = sgd(w1, g1, lr), sgd(w2, g2, lr)
    return losses, w1.numpy(), w2.numpy()


def dp_train(x, t, w1, w2, steps=3, lr=0.1, dp=4):
    """Trains on a dp axis of `dp` virtual devices; returns every replica's (losses, w1, w2)."""
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(dp)], axes=("dp",), shape=(dp,))
    batch = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))
    X = dist.tensor(x, layout=batch, mesh=mesh)
    T = dist.tensor(t, layout=batch, mesh=mesh)
    return tessera.index_launch(axis="dp")(replica)(X.parts("dp"), T.parts("dp"), w1, w2, steps, lr)


def rank_order_reference(x, t, w1, w2, steps=3, lr=0.1, dp=4):
    """One device: the shards' gradients one after another, summed in rank order."""
    xs, ts = np.array_split(x, dp), np.array_split(t, dp)
    w1, w2, lr = tessera.tensor(w1), tessera.tensor(w2), tessera.tensor(np.float32(lr))
    for _ in range(steps):
        grads = [grad_step(w1, w2, tessera.tensor(xs[r]), tessera.tensor(ts[r]))[1] for r in range(dp)]
        g1, g2 = grads[0]
        for r in range(1, dp):  # ((g0 + g1) + g2) + g3, in fp32 as the allreduce adds
            g1, g2 = g1 + grads[r][0], g2 + grads[r][1]
        w1, w2 = sgd(w1, g1 * (1.0 / dp), lr), sgd(w2, g2 * (1.0 / dp), lr)
    return w1.numpy(), w2.numpy()


def whole_batch_reference(x, t, w1, w2, steps=3, lr=0.1):
    """One device, the whole batch in one gradient call (eager: nothing to compile)."""
    eager_grad_step = tessera.value_and_grad(loss_fn, argnums=(0, 1))
    x, t = tessera.tensor(x), tessera.tensor(t)
    w1, w2, lr = tessera.tensor(w1), tessera.tensor(w2), tessera.tensor(np.float32(lr))
    losses = []
    for _ in range(steps):
        loss, (g1, g2) = eager_grad_step(w1, w2, x, t)
        losses.append(float(loss.numpy()))
        w1, w2 = sgd(w1, g1, lr), sgd(w2, g2, lr)
    return losses, w1.numpy(), w2.numpy()


# --- Bitwise across dp sizes ---------------------------------------------------
#
# The recipe above is bitwise across runs and backends, not across dp sizes:
# each replica's gradient sums over its own shard of the batch, so a dp of 2
# adds other partial sums than a dp of 4. Fixing the microbatches makes the
# bits independent of dp: the batch is cut into `microbatches` (a power of
# two) equal pieces whatever dp is, every piece's gradient is the same
# compiled call on the same shapes, and the pieces' gradients are added in
# one pairwise tree: tessera.dist.tree_sum inside a replica, then a `tree`
# allreduce across replicas (chosen by the Mapper below), whose pairing
# continues the same tree. So dp = 1, 2, 4 (any power of two dividing
# `microbatches`) give the same losses and weights, bit for bit.


class TreeMapper(tessera.Mapper):
    """Pairwise (tree) reductions: the pairing tessera.dist.tree_sum uses inside a replica."""

    def choose_collective(self, kind, size):
        return "tree"


def bitwise_replica(x, t, w1, w2, steps, lr, microbatches):
    dp = dist.axis_size("dp")
    local = microbatches // dp
    rows = x.shape[0] // local
    device = x.device
    w1, w2 = tessera.tensor(w1).to(device), tessera.tensor(w2).to(device)
    lr = tessera.tensor(np.float32(lr)).to(device)
    scale = 1.0 / microbatches  # a power of two: the mean is exact scaling of the sum
    pieces = [(x[i * rows:(i + 1) * rows], t[i * rows:(i + 1) * rows]) for i in range(local)]
    losses = []
    for _ in range(steps):
        # Every piece's (loss, g1, g2), added in the tree.
        loss, g1, g2 = dist.tree_sum([(r[0], *r[1]) for r in (grad_step(w1, w2, xi, ti) for xi, ti in pieces)])
        g1 = tessera.allreduce(g1, axis="dp") * scale
        g2 = tessera.allreduce(g2, axis="dp") * scale
        losses.append(float((tessera.allreduce(loss, axis="dp") * scale).numpy()))
        w1, w2 = sgd(w1, g1, lr), sgd(w2, g2, lr)
    return losses, w1.numpy(), w2.numpy()


def dp_train_bitwise(x, t, w1, w2, steps=3, lr=0.1, dp=4, microbatches=4, devices=None):
    """Trains with `microbatches` fixed pieces of the batch on a dp axis of `dp`
    devices (virtual CPU devices unless `devices` names them); returns every
    replica's (losses, w1, w2), the same bits for every dp dividing `microbatches`."""
    if microbatches % dp or microbatches & (microbatches - 1) or x.shape[0] % microbatches:
        raise ValueError(f"dp ({dp}) must divide microbatches ({microbatches}), a power of two dividing the "
                         f"batch ({x.shape[0]})")
    devices = devices or [f"cpu:{i}" for i in range(dp)]
    mesh = dist.mesh(devices=devices[:dp], axes=("dp",), shape=(dp,))
    batch = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))
    X = dist.tensor(x, layout=batch, mesh=mesh)
    T = dist.tensor(t, layout=batch, mesh=mesh)
    previous = tessera.runtime.get_mapper()
    tessera.runtime.set_mapper(TreeMapper())
    try:
        return tessera.index_launch(axis="dp")(bitwise_replica)(X.parts("dp"), T.parts("dp"), w1, w2, steps, lr,
                                                                microbatches)
    finally:
        tessera.runtime.set_mapper(previous)


def problem(batch=32, d_in=8, hidden=16, d_out=4, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, d_in)).astype(np.float32),
            rng.standard_normal((batch, d_out)).astype(np.float32),
            (rng.standard_normal((d_in, hidden)) / np.sqrt(d_in)).astype(np.float32),
            (rng.standard_normal((hidden, d_out)) / np.sqrt(hidden)).astype(np.float32))


def main():
    x, t, w1, w2 = problem()
    outs = dp_train(x, t, w1, w2)
    losses, n1, n2 = outs[0]
    r1, r2 = rank_order_reference(x, t, w1, w2)
    assert all(np.array_equal(o[1], n1) and np.array_equal(o[2], n2) for o in outs), "replicas diverged"
    assert np.array_equal(n1, r1) and np.array_equal(n2, r2), "not the rank-order bits"
    ref_losses, f1, f2 = whole_batch_reference(x, t, w1, w2)
    err = max(float(np.max(np.abs(n1 - f1))), float(np.max(np.abs(n2 - f2))))
    assert err <= 1e-5 and np.allclose(losses, ref_losses, rtol=1e-5)
    print(f"DP on 4 virtual devices, 3 SGD steps: losses {[round(v, 5) for v in losses]}; weights bitwise equal "
          f"to the rank-order sum on one device; max |diff| to the whole-batch step {err:.1e}")
    runs = {dp: dp_train_bitwise(x, t, w1, w2, steps=3, dp=dp)[0] for dp in (1, 2, 4)}
    assert all(runs[dp][0] == runs[1][0] and np.array_equal(runs[dp][1], runs[1][1]) and
               np.array_equal(runs[dp][2], runs[1][2]) for dp in (2, 4)), "not bitwise across dp sizes"
    print("DP with 4 fixed microbatches: losses and weights bitwise equal at dp = 1, 2 and 4")
    print("dp_training: ok")


if __name__ == "__main__":
    main()
