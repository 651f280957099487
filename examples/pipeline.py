"""Pipeline parallelism (PP): GPipe and 1F1B as per-rank action lists over a pp axis.

A model of `stages` layers, y = gelu(x @ W_s), is cut one layer per device
of the mesh axis "pp", and the batch into microbatches. A schedule is one
list of actions per rank, which that rank runs in order:

    Action("recv", mb, "act", src)   the input of microbatch mb, from stage src
    Action("fwd", mb)                this stage forward on mb (its input is kept)
    Action("send", mb, "act", dst)   mb's output, on to stage dst
    Action("recv", mb, "grad", src)  the gradient of mb's output, from stage src
    Action("bwd", mb)                this stage backward on mb (the forward is recomputed)
    Action("send", mb, "grad", dst)  the gradient of mb's input, back to stage dst

GPipe runs every forward, then every backward; 1F1B starts backwards as soon
as the last stage can, so rank r keeps at most `stages - r` microbatch inputs
alive instead of all of them. Sends are buffered (tessera.send returns at
once) and each ordered pair of stages has a FIFO mailbox, so a schedule only
needs each rank's recvs in the order its peer sent.

Gradients: each stage's weight gradient is the sum of its microbatches'
gradients in microbatch order (0, 1, ...), whichever order the schedule ran
them in. Both schedules therefore give the same bits, the bits of running
the same per-stage functions one microbatch after another on one device.
The unpipelined model (one function over the whole batch) agrees within
rounding: its matmuls sum over the whole batch at once.

The stage functions run eagerly (each op a prebuilt kernel, the autodiff
transforms on the reference executor), so the example starts at once;
wrapping them in tessera.jit compiles them and changes nothing else.

Run: PYTHONPATH=build-dev/pydev python examples/pipeline.py
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

import tessera
from tessera import dist, ops

Action = namedtuple("Action", ["op", "mb", "what", "peer"], defaults=(None, None))


# --- Schedules --------------------------------------------------------------

def _forward(rank, stages, mb):
    acts = [Action("recv", mb, "act", rank - 1)] if rank > 0 else []
    acts.append(Action("fwd", mb))
    if rank < stages - 1:
        acts.append(Action("send", mb, "act", rank + 1))
    return acts


def _backward(rank, stages, mb):
    acts = [Action("recv", mb, "grad", rank + 1)] if rank < stages - 1 else []
    acts.append(Action("bwd", mb))
    if rank > 0:
        acts.append(Action("send", mb, "grad", rank - 1))
    return acts


def gpipe_schedule(stages: int, microbatches: int) -> list:
    """Every rank: all forwards (microbatch order), then all backwards (reverse order)."""
    return [[a for mb in range(microbatches) for a in _forward(r, stages, mb)] +
            [a for mb in reversed(range(microbatches)) for a in _backward(r, stages, mb)]
            for r in range(stages)]


def one_f_one_b_schedule(stages: int, microbatches: int) -> list:
    """Every rank: `stages - rank - 1` warm-up forwards, then one forward and one
    backward in turn, then the remaining backwards (all in microbatch order)."""
    out = []
    for r in range(stages):
        warmup = min(stages - r - 1, microbatches)
        acts = [a for mb in range(warmup) for a in _forward(r, stages, mb)]
        for i in range(microbatches - warmup):
            acts += _forward(r, stages, warmup + i) + _backward(r, stages, i)
        for mb in range(microbatches - warmup, microbatches):
            acts += _backward(r, stages, mb)
        out.append(acts)
    return out


def in_flight(actions) -> int:
    """The most microbatches a rank holds between their forward and their backward."""
    live, peak = set(), 0
    for a in actions:
        if a.op == "fwd":
            live.add(a.mb)
            peak = max(peak, len(live))
        elif a.op == "bwd":
            live.discard(a.mb)
    return peak


def simulate(schedule) -> int:
    """Runs a schedule's communication on paper: buffered sends, blocking recvs,
    one FIFO mailbox per ordered pair. Returns the number of rounds; raises
    ValueError on a recv that does not match its mailbox's oldest message,
    on a deadlock, or on messages left unreceived."""
    boxes = {}
    at = [0] * len(schedule)
    rounds = 0
    while any(i < len(acts) for i, acts in zip(at, schedule)):
        rounds += 1
        moved = False
        for r, acts in enumerate(schedule):
            while at[r] < len(acts):
                a = acts[at[r]]
                if a.op == "send":
                    boxes.setdefault((r, a.peer), []).append((a.what, a.mb))
                elif a.op == "recv":
                    box = boxes.get((a.peer, r))
                    if not box:
                        break  # waits for its peer
                    got = box.pop(0)
                    if got != (a.what, a.mb):
                        raise ValueError(f"rank {r} expects {a.what} of microbatch {a.mb} from rank {a.peer}, "
                                         f"whose oldest message to it is {got[0]} of microbatch {got[1]}")
                at[r] += 1
                moved = True
        if not moved:
            stuck = {r: acts[at[r]] for r, acts in enumerate(schedule) if at[r] < len(acts)}
            raise ValueError(f"the schedule deadlocks: waiting ranks {stuck}")
    left = {k: v for k, v in boxes.items() if v}
    if left:
        raise ValueError(f"messages sent but never received: {left}")
    return rounds


# --- The model --------------------------------------------------------------

def layer(x, w):
    return ops.gelu(ops.matmul(x, w))


def microbatch_loss(x, w, t, scale):
    """The last stage with the loss: mean squared error, times 1/microbatches
    so that the microbatches' losses and gradients add up to the batch's."""
    d = layer(x, w) - t
    return ops.mean(d * d) * scale


# What each stage runs (eagerly; see the module's docstring).
stage_forward = layer
last_forward = microbatch_loss
last_backward = tessera.value_and_grad(microbatch_loss, argnums=(0, 1))


def stage_backward(x, w, dy):
    """(dx, dw) of one stage for the output gradient dy (its forward recomputed)."""
    _, pullback = tessera.vjp(layer, x, w)
    return pullback(dy)


def sum_in_order(values):
    """Sums in list order: the fixed accumulation order of microbatch gradients."""
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def split_microbatches(a, m):
    """Rows of the numpy array `a` in m equal microbatches, as tensors."""
    rows = a.shape[0] // m
    return [tessera.tensor(np.ascontiguousarray(a[i * rows:(i + 1) * rows])) for i in range(m)]


def run_actions(actions, shape, forward, backward, first_input, axis="pp"):
    """Runs one rank's action list; messages are fp32 tensors of `shape`.

    forward(mb, x) is the stage's output (what "send act" sends; the last
    stage's stays here), backward(mb, x, dy) is (gradient of the input,
    gradients of the weights), dy None on the last stage; first_input(mb) is
    the first stage's input. Returns ({mb: weight gradients}, {mb: outputs
    never sent}, the most microbatch inputs held at once)."""
    inputs, outputs, out_grads, in_grads, grads = {}, {}, {}, {}, {}
    peak = 0
    for a in actions:
        if a.op == "recv":
            got = tessera.recv(axis, src=a.peer, shape=shape, dtype="fp32")
            (inputs if a.what == "act" else out_grads)[a.mb] = got
        elif a.op == "fwd":
            if a.mb not in inputs:
                inputs[a.mb] = first_input(a.mb)
            peak = max(peak, len(inputs))
            outputs[a.mb] = forward(a.mb, inputs[a.mb])
        elif a.op == "send":
            tessera.send(outputs.pop(a.mb) if a.what == "act" else in_grads.pop(a.mb), axis, dst=a.peer)
        elif a.op == "bwd":
            in_grads[a.mb], grads[a.mb] = backward(a.mb, inputs.pop(a.mb), out_grads.pop(a.mb, None))
        else:
            raise ValueError(f"unknown action {a}")
    return grads, outputs, peak


def run_stage(w, x, t, schedule, microbatches):
    """One rank of the pipeline. Returns (the loss on the last stage else None,
    this stage's weight gradient, the most microbatch inputs it held at once)."""
    rank, stages = dist.axis_index("pp"), dist.axis_size("pp")
    last = rank == stages - 1
    w = ops.reshape(w, w.shape[1:])  # this stage's [1, D, D] part of the stacked weights
    xs, ts = split_microbatches(x, microbatches), split_microbatches(t, microbatches)
    scale = tessera.tensor(np.float32(1.0 / microbatches))

    def forward(mb, x_mb):
        return last_forward(x_mb, w, ts[mb], scale) if last else stage_forward(x_mb, w)

    def backward(mb, x_mb, dy):
        if last:
            _, (dx, dw) = last_backward(x_mb, w, ts[mb], scale)
            return dx, dw
        return stage_backward(x_mb, w, dy)

    shape = (x.shape[0] // microbatches, x.shape[1])
    grads, kept, peak = run_actions(schedule[rank], shape, forward, backward, lambda mb: xs[mb])
    grad = sum_in_order([grads[mb] for mb in range(microbatches)])
    loss = sum_in_order([kept[mb] for mb in range(microbatches)]) if last else None
    return loss, grad, peak


def pipeline(weights, x, t, microbatches, schedule_fn=one_f_one_b_schedule):
    """One step's loss and every stage's weight gradient, pipelined over a pp
    axis of len(weights) virtual devices; also the inputs each rank held at once."""
    stages = len(weights)
    schedule = schedule_fn(stages, microbatches)
    simulate(schedule)  # refuses a schedule that would deadlock or mismatch before running it
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(stages)], axes=("pp",), shape=(stages,))
    W = dist.tensor(np.stack(weights), layout=dist.ShardSpec(partition=(0,), mesh_axes=("pp",)), mesh=mesh)
    outs = tessera.index_launch(axis="pp")(run_stage)(W.parts("pp"), x, t, schedule, microbatches)
    loss = outs[-1][0].numpy()
    return loss, [o[1].numpy() for o in outs], [o[2] for o in outs]


# --- One device -------------------------------------------------------------

def sequential(weights, x, t, microbatches):
    """The same per-stage functions, one microbatch after another on one device."""
    ws = [tessera.tensor(w) for w in weights]
    scale = tessera.tensor(np.float32(1.0 / microbatches))
    losses, dws = [], [[] for _ in ws]
    for x_mb, t_mb in zip(split_microbatches(x, microbatches), split_microbatches(t, microbatches)):
        inputs = [x_mb]
        for w in ws[:-1]:
            inputs.append(stage_forward(inputs[-1], w))
        loss, (dy, dw) = last_backward(inputs[-1], ws[-1], t_mb, scale)
        losses.append(loss)
        dws[-1].append(dw)
        for s in reversed(range(len(ws) - 1)):
            dy, dw = stage_backward(inputs[s], ws[s], dy)
            dws[s].append(dw)
    return sum_in_order(losses).numpy(), [sum_in_order(g).numpy() for g in dws]


def model_loss(x, t, *ws):
    for w in ws:
        x = layer(x, w)
    d = x - t
    return ops.mean(d * d)


def unpipelined(weights, x, t):
    """The whole model as one function over the whole batch on one device."""
    f = tessera.value_and_grad(model_loss, argnums=tuple(range(2, 2 + len(weights))))
    loss, grads = f(tessera.tensor(x), tessera.tensor(t), *[tessera.tensor(w) for w in weights])
    return loss.numpy(), [g.numpy() for g in grads]


def problem(stages=4, batch=32, width=16, seed=0):
    rng = np.random.default_rng(seed)
    weights = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(stages)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    t = rng.standard_normal((batch, width)).astype(np.float32)
    return weights, x, t


def main():
    weights, x, t = problem()
    microbatches = 8
    ref_loss, ref_grads = unpipelined(weights, x, t)
    for name, fn in (("GPipe", gpipe_schedule), ("1F1B", one_f_one_b_schedule)):
        loss, grads, peaks = pipeline(weights, x, t, microbatches, fn)
        err = max(float(np.max(np.abs(g - r))) for g, r in zip(grads, ref_grads))
        print(f"{name}: 4 stages x {microbatches} microbatches, loss {float(loss):.6f} "
              f"(one device {float(ref_loss):.6f}), max |grad diff| {err:.2e}, inputs held per rank {peaks}")
        assert abs(float(loss) - float(ref_loss)) <= 1e-5 * abs(float(ref_loss)) and err <= 1e-5
    print("pipeline: ok")


if __name__ == "__main__":
    main()
