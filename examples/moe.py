"""Expert parallelism (EP): a top-2 mixture of experts with all_to_all over an ep axis.

Each of the P devices of the mesh axis "ep" holds T/P of the tokens and
E/P of the E experts (device j owns experts j*E/P .. (j+1)*E/P - 1). Per
device:

1. Gate: probabilities softmax(x @ Wg + b) over the experts; each token picks
   its k = 2 most probable experts (ties: the lower index) with weights
   renormalized to sum to 1.
2. Dispatch: a buffer [P, E/P, T/P, D] whose block [j, e, i] holds token i
   when it picked expert e of device j, zeros elsewhere; one all_to_all sends
   block j to device j.
3. Experts: each device runs its experts on what it received, batched over
   its experts ([E/P, P * T/P, D] rows), gelu MLP per expert.
4. Return: the same all_to_all brings every result back to its token's device.
5. Combine: each token's output is w_0 * y_0 + w_1 * y_1, in choice order.

Capacity rule: an expert takes at most T/P tokens from each device, the
device's whole share, because a token picks an expert at most once. So no
token is ever dropped, whatever the routing (all tokens on one expert
included); the price is padding: the buffers have room for every token at
every expert. The reference runs every expert on every token on one device
(a dense mixture) and combines with the same routing; it agrees within
rounding (matmuls over different row counts).

Everything runs eagerly (each op a prebuilt kernel): nothing to compile.

Run: PYTHONPATH=build-dev/pydev python examples/moe.py
"""

from __future__ import annotations

import numpy as np

import tessera
from tessera import dist, ops

K = 2


def gate(x, wg, b):
    return ops.softmax_safe(ops.matmul(x, wg) + b, axis=-1)


def route(probs, k=K):
    """Top-k experts per token (ties: lower index first) and their renormalized weights."""
    choice = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(probs, choice, axis=1)
    return choice, (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def expert_mlp(x, w1, w2):
    return ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


def local_experts(buf, w1, w2):
    """buf [P, L, T, D] (block [s, e] from device s for local expert e); w1 [L, D, F], w2 [L, F, D]."""
    p, n_local, t, d = buf.shape
    rows = ops.reshape(ops.transpose(buf, (1, 0, 2, 3)), (n_local, p * t, d))  # every source's rows per expert
    y = expert_mlp(rows, w1, w2)  # batched over the local experts
    return ops.transpose(ops.reshape(y, (n_local, p, t, d)), (1, 0, 2, 3))


def combine(results, choice, weights):
    """sum_c weights[:, c] * results[c]: choice 0 first, in float32 (the same code for both paths)."""
    out = weights[:, 0:1] * results[0]
    for c in range(1, choice.shape[1]):
        out = out + weights[:, c:c + 1] * results[c]
    return out


def moe_shard(x, wg, b, w1, w2):
    """One ep member: its tokens x [T/P, D] and its experts w1 [E/P, D, F], w2 [E/P, F, D]."""
    p = dist.axis_size("ep")
    n_local = w1.shape[0]
    tokens, width = x.shape
    choice, weights = route(gate(x, wg, b).numpy())
    owner, local = choice // n_local, choice % n_local
    buf = np.zeros((p, n_local, tokens, width), np.float32)
    rows = np.arange(tokens)
    xs = x.numpy()
    for c in range(choice.shape[1]):
        buf[owner[:, c], local[:, c], rows] = xs  # a token picks an expert at most once: no slot is taken twice
    received = tessera.all_to_all(tessera.tensor(buf), axis="ep", split_dim=0, concat_dim=0)
    done = local_experts(received, w1, w2)
    back = tessera.all_to_all(done, axis="ep", split_dim=0, concat_dim=0).numpy()
    results = [back[owner[:, c], local[:, c], rows] for c in range(choice.shape[1])]
    return combine(results, choice, weights)


def moe(x, wg, b, w1, w2, ep=4):
    """The mixture over an ep axis of `ep` virtual devices: tokens and experts split over it."""
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(ep)], axes=("ep",), shape=(ep,))
    split = dist.ShardSpec(partition=("row",), mesh_axes=("ep",))
    X = dist.tensor(x, layout=split, mesh=mesh)
    W1 = dist.tensor(w1, layout=split, mesh=mesh)  # dim 0: experts
    W2 = dist.tensor(w2, layout=split, mesh=mesh)
    outs = tessera.index_launch(axis="ep")(moe_shard)(X.parts("ep"), tessera.tensor(wg), tessera.tensor(b),
                                                       W1.parts("ep"), W2.parts("ep"))
    return np.concatenate(outs)


def dense_reference(x, wg, b, w1, w2):
    """One device: every expert on every token, combined with the same top-k routing."""
    xt = tessera.tensor(x)
    choice, weights = route(gate(xt, tessera.tensor(wg), tessera.tensor(b)).numpy())
    ys = np.stack([expert_mlp(xt, tessera.tensor(w1[e]), tessera.tensor(w2[e])).numpy() for e in range(len(w1))])
    rows = np.arange(len(x))
    return combine([ys[choice[:, c], rows] for c in range(choice.shape[1])], choice, weights)


def problem(tokens=32, width=8, hidden=16, experts=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, width)).astype(np.float32)
    wg = rng.standard_normal((width, experts)).astype(np.float32)
    w1 = (rng.standard_normal((experts, width, hidden)) / np.sqrt(width)).astype(np.float32)
    w2 = (rng.standard_normal((experts, hidden, width)) / np.sqrt(hidden)).astype(np.float32)
    return x, wg, np.zeros(experts, np.float32), w1, w2


def main():
    x, wg, b, w1, w2 = problem()
    y = moe(x, wg, b, w1, w2)
    ref = dense_reference(x, wg, b, w1, w2)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    loads = np.bincount(route(gate(tessera.tensor(x), tessera.tensor(wg), tessera.tensor(b)).numpy())[0].ravel(),
                        minlength=len(w1))
    print(f"EP: {len(x)} tokens, {len(w1)} experts on 4 virtual devices, top-{K}; tokens per expert "
          f"{loads.tolist()}; max |diff| to the dense mixture {float(np.max(np.abs(y - ref))):.1e}")
    print("moe: ok")


if __name__ == "__main__":
    main()
