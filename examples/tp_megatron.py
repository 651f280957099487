"""Tensor parallelism (TP): a Megatron MLP block and attention block over a tp axis.

Written once, for one device and global shapes; the weights' layouts decide
the parallelism (the global view, docs/design/0007-sharding.md):

- MLP: W1 split by columns (each device computes its slice of the hidden
  units, gelu is elementwise), W2 split by rows (each device holds a term of
  the output): one allreduce.
- Attention: Wq, Wk and Wv split by columns, which splits the heads (a head's
  dh columns sit together), so scores, softmax and the weighted sum stay on
  the device that owns the head; Wo split by rows: one allreduce.

The training step differentiates the global program; every gradient comes
back sharded like its weight. One device runs the same functions on plain
tensors; the results agree within rounding (a split contraction sums its tp
parts in rank order, one device sums in its own blocked order).

Run: PYTHONPATH=build-dev/pydev python examples/tp_megatron.py
"""

from __future__ import annotations

import numpy as np

import tessera
from tessera import dist, ops

COL = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
ROW = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
HEADS = 4


def mlp_block(x, w1, w2):
    return x + ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


def attention_block(x, wq, wk, wv, wo):
    """Multi-head self-attention with its residual; x: [S, D], wq/wk/wv: [D, HEADS * dh], wo: [HEADS * dh, D]."""
    s, width = x.shape[0], wq.shape[1]
    dh = width // HEADS

    def heads(h):  # [S, HEADS * dh] -> [HEADS, S, dh]
        return ops.transpose(ops.reshape(h, (s, HEADS, dh)), (1, 0, 2))

    q, k, v = heads(ops.matmul(x, wq)), heads(ops.matmul(x, wk)), heads(ops.matmul(x, wv))
    scores = ops.matmul(q, ops.transpose(k, (0, 2, 1))) * float(1.0 / np.sqrt(dh))
    o = ops.matmul(ops.softmax_safe(scores, axis=-1), v)  # [HEADS, S, dh]
    o = ops.reshape(ops.transpose(o, (1, 0, 2)), (s, width))
    return x + ops.matmul(o, wo)


def layer_loss(x, wq, wk, wv, wo, w1, w2):
    y = mlp_block(attention_block(x, wq, wk, wv, wo), w1, w2)
    return ops.mean(y * y)


mlp = tessera.jit(mlp_block)
attention = tessera.jit(attention_block)
train_step = tessera.jit(tessera.value_and_grad(layer_loss, argnums=(1, 2, 3, 4, 5, 6)))
# The reference: the same program on one device, eagerly (nothing more to compile).
one_device_step = tessera.value_and_grad(layer_loss, argnums=(1, 2, 3, 4, 5, 6))

# The layout of each weight, in layer_loss's order.
LAYOUTS = {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "w1": COL, "w2": ROW}


def problem(seq=8, width=16, hidden=32, seed=0):
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    x = rng.standard_normal((seq, width)).astype(np.float32)
    return x, {"wq": w(width, width), "wk": w(width, width), "wv": w(width, width), "wo": w(width, width),
               "w1": w(width, hidden), "w2": w(hidden, width)}


def sharded(x, weights, tp=4):
    """x replicated and each weight in its layout on a tp axis of `tp` virtual devices."""
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(tp)], axes=("tp",), shape=(tp,))
    return dist.tensor(x, mesh=mesh), {n: dist.tensor(w, layout=LAYOUTS[n], mesh=mesh) for n, w in weights.items()}


def collectives(fn):
    """How many of each collective the partitioned per-device function runs."""
    text = fn.inspect_ir("graph")
    return {op: text.count(f"graph.{op} ") for op in ("allreduce", "all_gather", "reduce_scatter", "all_to_all")}


def main():
    x, weights = problem()
    X, W = sharded(x, weights)
    host = {n: tessera.tensor(w) for n, w in weights.items()}  # one device, run eagerly
    y_mlp = mlp(X, W["w1"], W["w2"]).numpy()
    n_mlp = collectives(mlp)  # of the signature just called: the partitioned one
    y_att = attention(X, W["wq"], W["wk"], W["wv"], W["wo"]).numpy()
    n_att = collectives(attention)
    assert n_mlp["allreduce"] == n_att["allreduce"] == 1, (n_mlp, n_att)
    ref_mlp = mlp_block(tessera.tensor(x), host["w1"], host["w2"]).numpy()
    ref_att = attention_block(tessera.tensor(x), host["wq"], host["wk"], host["wv"], host["wo"]).numpy()
    np.testing.assert_allclose(y_mlp, ref_mlp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_att, ref_att, rtol=1e-5, atol=1e-5)
    names = list(LAYOUTS)
    loss, grads = train_step(X, *[W[n] for n in names])
    ref_loss, ref_grads = one_device_step(tessera.tensor(x), *[host[n] for n in names])
    err = max(float(np.max(np.abs(g.numpy() - r.numpy()))) for g, r in zip(grads, ref_grads))
    assert err <= 1e-5, err
    print(f"TP on 4 virtual devices: MLP {n_mlp['allreduce']} allreduce, attention "
          f"{n_att['allreduce']} allreduce; loss {float(loss.numpy()):.6f} "
          f"(one device {float(ref_loss.numpy()):.6f}); gradient layouts "
          f"{dict(zip(names, (g.layout for g in grads)))}; max |grad diff| {err:.1e}")
    print("tp_megatron: ok")


if __name__ == "__main__":
    main()
