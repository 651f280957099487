"""Parallelism on virtual devices: point-to-point messages (tessera.send / recv)
and their failure modes, launches over several mesh axes, and the examples
(examples/dp_training.py, tp_megatron.py, pipeline.py, moe.py, dp_tp_pp.py)
against the same computation on one device.

Tolerances: results are compared bitwise where both sides add in the same
order (the dp allreduce against a rank-order sum on one device; pipeline
schedules against each other and against the same stages run one
microbatch after another). Elsewhere the order differs (a split
contraction summed in rank order against one device's blocked sum, or the
whole batch at once against microbatches): 1e-5 against the one-device
program in fp32, 1e-4 against numpy in float64.
"""

import os
import sys
import time
from math import erf

import numpy as np
import pytest

import tessera
from tessera import dist
from tessera.errors import ArgumentError, CollectiveError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import dp_tp_pp  # noqa: E402
import dp_training  # noqa: E402
import moe  # noqa: E402
import pipeline  # noqa: E402
import tp_megatron  # noqa: E402
from pipeline import Action  # noqa: E402


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


def pp_mesh(n):
    return dist.mesh(devices=cpus(n), axes=("pp",), shape=(n,))


def f32(*shape, value=0.0):
    return tessera.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + np.float32(value))


# --- send / recv ------------------------------------------------------------

def test_sends_are_buffered_fifo_per_pair_and_copy_their_tensor():
    def body(_):
        r, n = dist.axis_index("pp"), dist.axis_size("pp")
        x = f32(2, 3, value=100 * r)
        # Every member sends twice around the ring before receiving: sends that
        # waited for their recv would deadlock here.
        tessera.send(x, "pp", dst=(r + 1) % n)
        x.numpy()[...] = -1.0  # the message is a copy made at the send
        tessera.send(f32(2, 3, value=100 * r + 50), axis="pp", dst=(r + 1) % n)
        first = tessera.recv("pp", src=(r - 1) % n, shape=(2, 3), dtype="fp32")
        second = tessera.recv("pp", src=(r - 1) % n, like=first)
        return first.numpy(), second.numpy()

    outs = tessera.index_launch(axis="pp", mesh=pp_mesh(3))(body)(None)
    for r, (first, second) in enumerate(outs):
        src = (r - 1) % 3
        np.testing.assert_array_equal(first, f32(2, 3, value=100 * src).numpy())
        np.testing.assert_array_equal(second, f32(2, 3, value=100 * src + 50).numpy())


def test_messages_keep_their_encoding_and_policy():
    a = np.array([1.5, -0.0, np.nan, 3.0e38], np.float32)

    def body(_):
        if dist.axis_index("pp") == 0:
            tessera.send(tessera.tensor(a, "bf16"), "pp", dst=1)
            tessera.send(tessera.tensor(np.array([7, -3], np.int32)), "pp", dst=1)
            return None
        got = tessera.recv("pp", src=0, shape=(4,), dtype="bf16")
        ints = tessera.recv("pp", src=0, shape=(2,), dtype="int32")
        return got, ints

    _, (got, ints) = tessera.index_launch(axis="pp", mesh=pp_mesh(2))(body)(None)
    want = tessera.tensor(a, "bf16")
    assert str(got.dtype) == "bf16"
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # NaN compares equal in assert_array_equal
    np.testing.assert_array_equal(ints.numpy(), [7, -3])


def test_a_recv_from_a_failed_peer_raises_naming_it_and_the_call():
    seen = []

    def body(_):
        if dist.axis_index("pp") == 0:
            raise ValueError("stage 0 broke")
        try:
            return tessera.recv("pp", src=0, shape=(2,), dtype="fp32")
        except CollectiveError as e:
            seen.append(str(e))
            raise

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="stage 0 broke") as info:  # the cause, not the receiver's error
        tessera.index_launch(axis="pp", mesh=pp_mesh(2))(body)(None)
    assert time.monotonic() - t0 < 10
    assert any("cpu:0 (index 0 of the index launch over mesh axis 'pp')" in n for n in info.value.__notes__)
    assert len(seen) == 1
    assert "recv #1 from cpu:0 to cpu:1 over mesh axis 'pp'" in seen[0]
    assert "member cpu:0 (rank 0) failed: ValueError: stage 0 broke" in seen[0]


def test_a_recv_that_gets_no_message_times_out_naming_the_source(monkeypatch):
    monkeypatch.setenv("TESSERA_COLLECTIVE_TIMEOUT", "0.5")

    def body(_):
        if dist.axis_index("pp") == 0:
            tessera.send(f32(2), "pp", dst=1)  # one message where two are awaited
            return None
        tessera.recv("pp", src=0, shape=(2,))
        return tessera.recv("pp", src=0, shape=(2,))

    t0 = time.monotonic()
    with pytest.raises(CollectiveError, match=r"recv #2 from cpu:0 to cpu:1 over mesh axis 'pp': timed out after "
                                              r"0\.5.* s \(TESSERA_COLLECTIVE_TIMEOUT\) waiting for cpu:0 \(rank 0\), "
                                              r"which has sent 1 message\(s\) to cpu:1"):
        tessera.index_launch(axis="pp", mesh=pp_mesh(2))(body)(None)
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("shape, dtype, difference", [
    ((2, 4), "fp32", r"the size of dim 1 \(3 sent vs 4 expected\): cpu:0 sent \[2, 3\] fp32 @accum\(fp32\), cpu:1 "
                     r"expects \[2, 4\] fp32 @accum\(fp32\)"),
    ((6,), "fp32", r"the rank \(2 sent vs 1 expected\)"),
    ((2, 3), "fp16", r"the dtype \(fp32 sent vs fp16 expected\)"),
])
def test_a_message_of_another_shape_or_dtype_names_the_difference(shape, dtype, difference):
    def body(_):
        if dist.axis_index("pp") == 0:
            tessera.send(f32(2, 3), "pp", dst=1)
            return None
        return tessera.recv("pp", src=0, shape=shape, dtype=dtype)

    with pytest.raises(CollectiveError, match=r"recv #1 from cpu:0 to cpu:1 over mesh axis 'pp': the message "
                                              r"differs from what recv expects in " + difference):
        tessera.index_launch(axis="pp", mesh=pp_mesh(2))(body)(None)


def test_send_and_recv_argument_errors():
    x = f32(2)
    with pytest.raises(ArgumentError, match="tessera.send runs per shard"):
        tessera.send(x, "pp", dst=1)
    with pytest.raises(ArgumentError, match="tessera.recv runs per shard"):
        tessera.recv("pp", src=0, shape=(2,))

    def bad(case):
        if case == "dst":
            tessera.send(x, "pp", dst=2)
        elif case == "src":
            tessera.recv("pp", src=-1, shape=(2,))
        elif case == "axis":
            tessera.send(x, "tp", dst=0)
        elif case == "shape":
            tessera.recv("pp", src=0)
        elif case == "jit":
            tessera.jit(lambda y: tessera.recv("pp", src=0, like=y))(x)

    for case, message in [("dst", r"tessera.send: dst=2 is not a member of mesh axis 'pp' \(indices 0..1\)"),
                          ("src", r"tessera.recv: src=-1 is not a member"),
                          ("axis", r"tessera.send: this shard runs in an index launch over mesh axis 'pp', not "
                                   r"'tp'"),
                          ("shape", r"tessera.recv: give the expected message's shape="),
                          ("jit", r"tessera.recv has no Graph IR op")]:
        with pytest.raises(ArgumentError, match=message):
            tessera.index_launch(axis="pp", mesh=pp_mesh(2))(bad)(case)


# --- launches over several axes ---------------------------------------------

def test_a_launch_over_several_axes_binds_a_communicator_per_group():
    mesh = dist.mesh(devices=cpus(8), axes=("dp", "tp", "pp"), shape=(2, 2, 2))
    X = dist.tensor(np.arange(4, dtype=np.float32).reshape(2, 2), mesh=mesh,
                    layout=dist.ShardSpec(partition=("row",), mesh_axes=("dp",)))

    def body(x):
        d, t, p = (dist.axis_index(a) for a in ("dp", "tp", "pp"))
        me = tessera.tensor(np.array([100 * d + 10 * t + p], np.float32))
        return ((d, t, p), x.numpy().tolist(), [float(tessera.allreduce(me, axis=a).numpy()[0])
                                                 for a in ("dp", "tp", "pp")])

    outs = tessera.index_launch(axis=("dp", "tp", "pp"))(body)(X.parts("dp"))
    for rank, ((d, t, p), x, sums) in enumerate(outs):
        assert mesh.coords(rank) == (d, t, p)  # results in mesh order
        assert x == [[2.0 * d, 2.0 * d + 1]]  # parts along dp by the dp coordinate
        assert sums == [100 + 2 * (10 * t + p), 200 * d + 10 + 2 * p, 2 * (100 * d + 10 * t) + 1]
    # A launch over a subset of the axes holds the others at coordinate 0.
    sub = tessera.index_launch(axis=("tp", "pp"), mesh=mesh)(lambda _: dist.axis_index("pp"))(None)
    assert sub == [0, 1, 0, 1]
    with pytest.raises(ArgumentError, match="has no axis 'ep'"):
        tessera.index_launch(axis=("dp", "ep"), mesh=mesh)(lambda _: None)(None)
    with pytest.raises(ArgumentError, match="names an axis twice"):
        tessera.index_launch(axis=("dp", "dp"), mesh=mesh)(lambda _: None)(None)


def test_a_failing_shard_of_a_several_axes_launch_releases_its_groups():
    mesh = dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2))

    def body(_):
        if (dist.axis_index("dp"), dist.axis_index("tp")) == (1, 0):
            raise ValueError("device 2 broke")
        one = tessera.tensor(np.ones(2, np.float32))
        return tessera.allreduce(one, axis="tp"), tessera.allreduce(one, axis="dp")

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="device 2 broke") as info:
        tessera.index_launch(axis=("dp", "tp"), mesh=mesh)(body)(None)
    assert time.monotonic() - t0 < 10  # its tp and dp peers were released, not left to time out
    assert any("cpu:2 (dp=1, tp=0 in the index launch over mesh axes ('dp', 'tp'))" in n
               for n in info.value.__notes__)


# --- DP ---------------------------------------------------------------------

def test_dp_training_is_bitwise_the_rank_order_sum_and_close_to_the_whole_batch():
    x, t, w1, w2 = dp_training.problem()
    outs = dp_training.dp_train(x, t, w1, w2, steps=3)
    losses, n1, n2 = outs[0]
    for o in outs[1:]:
        assert o[0] == losses
        np.testing.assert_array_equal(o[1], n1)
        np.testing.assert_array_equal(o[2], n2)
    r1, r2 = dp_training.rank_order_reference(x, t, w1, w2, steps=3)
    np.testing.assert_array_equal(n1, r1)
    np.testing.assert_array_equal(n2, r2)
    ref_losses, f1, f2 = dp_training.whole_batch_reference(x, t, w1, w2, steps=3)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(n1, f1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(n2, f2, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(n1, w1) and losses[-1] < losses[0]  # it trained


def test_dp_training_with_fixed_microbatches_is_bitwise_across_dp_sizes():
    x, t, w1, w2 = dp_training.problem()
    runs = {dp: dp_training.dp_train_bitwise(x, t, w1, w2, steps=20, dp=dp, microbatches=4) for dp in (1, 2, 4)}
    losses, n1, n2 = runs[1][0]
    for dp in (2, 4):
        for replica in runs[dp]:
            assert replica[0] == losses
            np.testing.assert_array_equal(replica[1], n1)
            np.testing.assert_array_equal(replica[2], n2)
    # The same training as the whole batch at once, within rounding.
    ref_losses, f1, f2 = dp_training.whole_batch_reference(x, t, w1, w2, steps=20)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(n1, f1, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match="must divide microbatches"):
        dp_training.dp_train_bitwise(x, t, w1, w2, steps=1, dp=8, microbatches=4)


def test_tree_sum_pairs_neighbours_level_by_level():
    vals = [tessera.tensor(np.float32(v)) for v in (1e8, 1.0, -1e8, 1.0, 3.0)]
    # ((a + b) + (c + d)) + e, each addition in fp32.
    f = np.float32
    want = ((f(1e8) + f(1.0)) + (f(-1e8) + f(1.0))) + f(3.0)
    assert float(dist.tree_sum(vals).numpy()) == float(want)
    pairs = dist.tree_sum([(vals[0], vals[1]), (vals[2], vals[3])])
    assert [float(p.numpy()) for p in pairs] == [float(f(1e8) + f(-1e8)), 2.0]
    with pytest.raises(tessera.ArgumentError, match="no values"):
        dist.tree_sum([])


# --- TP ---------------------------------------------------------------------

def gelu64(h):
    return 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))


def attention64(x, w):
    x = x.astype(np.float64)
    s, width = x.shape
    dh = width // tp_megatron.HEADS

    def heads(h):
        return h.reshape(s, tp_megatron.HEADS, dh).transpose(1, 0, 2)

    q, k, v = heads(x @ w["wq"]), heads(x @ w["wk"]), heads(x @ w["wv"])
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v
    return x + o.transpose(1, 0, 2).reshape(s, width) @ w["wo"]


def test_tp_megatron_mlp_and_attention_match_one_device_with_one_allreduce_each():
    x, w = tp_megatron.problem()
    X, W = tp_megatron.sharded(x, w)
    y_mlp = tp_megatron.mlp(X, W["w1"], W["w2"])
    assert tp_megatron.collectives(tp_megatron.mlp) == {"allreduce": 1, "all_gather": 0, "reduce_scatter": 0,
                                                        "all_to_all": 0}
    y_att = tp_megatron.attention(X, W["wq"], W["wk"], W["wv"], W["wo"])
    assert tp_megatron.collectives(tp_megatron.attention) == {"allreduce": 1, "all_gather": 0, "reduce_scatter": 0,
                                                              "all_to_all": 0}
    host = {n: tessera.tensor(a) for n, a in w.items()}
    # One device: the same functions on plain tensors.
    np.testing.assert_allclose(y_mlp.numpy(), tp_megatron.mlp_block(tessera.tensor(x), host["w1"],
                                                                     host["w2"]).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_att.numpy(), tp_megatron.attention_block(tessera.tensor(x), host["wq"], host["wk"],
                                                                          host["wv"], host["wo"]).numpy(),
                               rtol=1e-5, atol=1e-5)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y_mlp.numpy(), x64 + gelu64(x64 @ w["w1"]) @ w["w2"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y_att.numpy(), attention64(x, w), rtol=1e-4, atol=1e-4)


def test_tp_training_step_gradients_are_sharded_like_their_weights():
    x, w = tp_megatron.problem(seed=1)
    X, W = tp_megatron.sharded(x, w)
    names = list(tp_megatron.LAYOUTS)
    loss, grads = tp_megatron.train_step(X, *[W[n] for n in names])
    assert [g.layout for g in grads] == ["[-, tp]", "[-, tp]", "[-, tp]", "[tp, -]", "[-, tp]", "[tp, -]"]
    ref_loss, ref_grads = tp_megatron.one_device_step(tessera.tensor(x), *[tessera.tensor(w[n]) for n in names])
    np.testing.assert_allclose(loss.numpy(), ref_loss.numpy(), rtol=1e-5)
    for g, r in zip(grads, ref_grads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-5)


# --- PP ---------------------------------------------------------------------

@pytest.mark.parametrize("stages, microbatches", [(1, 3), (2, 1), (3, 5), (4, 4), (4, 8)])
def test_schedules_run_each_microbatch_forward_then_backward_once_per_rank(stages, microbatches):
    for fn in (pipeline.gpipe_schedule, pipeline.one_f_one_b_schedule):
        schedule = fn(stages, microbatches)
        assert len(schedule) == stages
        for r, acts in enumerate(schedule):
            computed = [(a.op, a.mb) for a in acts if a.op in ("fwd", "bwd")]
            assert sorted(computed) == sorted([("fwd", m) for m in range(microbatches)] +
                                              [("bwd", m) for m in range(microbatches)])
            for m in range(microbatches):
                assert computed.index(("fwd", m)) < computed.index(("bwd", m))
            # Every send is matched by a recv of the same message at its peer, in the same order.
            for a in acts:
                if a.op == "send":
                    sent = [b.mb for b in acts if b.op == "send" and b.peer == a.peer and b.what == a.what]
                    got = [b.mb for b in schedule[a.peer] if b.op == "recv" and b.peer == r and b.what == a.what]
                    assert sent == got
        pipeline.simulate(schedule)  # no deadlock, nothing left unreceived
    for r, acts in enumerate(pipeline.one_f_one_b_schedule(stages, microbatches)):
        assert pipeline.in_flight(acts) == min(stages - r, microbatches)
    for acts in pipeline.gpipe_schedule(stages, microbatches):
        assert pipeline.in_flight(acts) == microbatches


def test_one_f_one_b_starts_backwards_before_the_last_forward():
    acts = pipeline.one_f_one_b_schedule(4, 8)[1]
    ops = [(a.op, a.mb) for a in acts if a.op in ("fwd", "bwd")]
    assert ops[:5] == [("fwd", 0), ("fwd", 1), ("fwd", 2), ("bwd", 0), ("fwd", 3)]
    last = pipeline.one_f_one_b_schedule(4, 8)[3]
    assert [a for a in last if a.mb == 0][:3] == [Action("recv", 0, "act", 2), Action("fwd", 0), Action("bwd", 0)]


def test_simulate_refuses_schedules_that_mismatch_or_deadlock():
    good = pipeline.gpipe_schedule(2, 2)
    swapped = [good[0], list(good[1])]
    i, j = [k for k, a in enumerate(swapped[1]) if a.op == "recv"][:2]
    swapped[1][i], swapped[1][j] = swapped[1][j], swapped[1][i]
    with pytest.raises(ValueError, match="rank 1 expects act of microbatch 1 from rank 0, whose oldest message"):
        pipeline.simulate(swapped)
    # Both ranks wait for each other before sending anything.
    stuck = [[Action("recv", 0, "grad", 1), Action("send", 0, "act", 1)],
             [Action("recv", 0, "act", 0), Action("send", 0, "grad", 0)]]
    with pytest.raises(ValueError, match="the schedule deadlocks"):
        pipeline.simulate(stuck)
    with pytest.raises(ValueError, match="never received"):
        pipeline.simulate([[Action("send", 0, "act", 1)], []])


def test_pipelines_equal_the_microbatched_model_bitwise_and_the_unpipelined_one_within_rounding():
    weights, x, t = pipeline.problem(stages=4)
    m = 8
    seq_loss, seq_grads = pipeline.sequential(weights, x, t, m)
    ref_loss, ref_grads = pipeline.unpipelined(weights, x, t)
    for fn, peaks in ((pipeline.gpipe_schedule, [8, 8, 8, 8]), (pipeline.one_f_one_b_schedule, [4, 3, 2, 1])):
        loss, grads, held = pipeline.pipeline(weights, x, t, m, fn)
        assert held == peaks  # the inputs each rank kept alive at once
        np.testing.assert_array_equal(loss, seq_loss)
        for g, s, r in zip(grads, seq_grads, ref_grads):
            np.testing.assert_array_equal(g, s)
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)


# --- EP ---------------------------------------------------------------------

def moe64(x, wg, b, w1, w2, k=2):
    probs = np.exp(x.astype(np.float64) @ wg + b)
    probs /= probs.sum(1, keepdims=True)
    out = np.zeros(x.shape)
    for i, p in enumerate(probs):
        top = np.argsort(-p, kind="stable")[:k]
        for e in top:
            out[i] += p[e] / p[top].sum() * (gelu64(x[i].astype(np.float64) @ w1[e]) @ w2[e])
    return out


def test_moe_matches_the_dense_mixture():
    x, wg, b, w1, w2 = moe.problem()
    y = moe.moe(x, wg, b, w1, w2)
    np.testing.assert_allclose(y, moe.dense_reference(x, wg, b, w1, w2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, moe64(x, wg, b, w1, w2), rtol=1e-4, atol=1e-4)
    choice, weights = moe.route(np.random.default_rng(1).random((6, 8)).astype(np.float32))
    assert choice.shape == (6, 2) and all(len(set(c)) == 2 for c in choice)
    np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-6)


def test_moe_drops_no_token_when_every_token_picks_one_device():
    x, wg, _, w1, w2 = moe.problem(seed=2)
    b = np.zeros(8, np.float32)
    b[:2] = 50.0  # experts 0 and 1, both on device 0, take every token
    choice, _ = moe.route(moe.gate(tessera.tensor(x), tessera.tensor(wg), tessera.tensor(b)).numpy())
    assert set(choice.ravel()) == {0, 1}
    y = moe.moe(x, wg, b, w1, w2)
    np.testing.assert_allclose(y, moe.dense_reference(x, wg, b, w1, w2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, moe64(x, wg, b, w1, w2), rtol=1e-4, atol=1e-4)


# --- dp x tp x pp -----------------------------------------------------------

def test_dp_tp_pp_loss_and_gradients_match_one_device():
    x, t, w1, w2 = dp_tp_pp.problem()
    loss, g1, g2 = dp_tp_pp.train_step_gradients(x, t, w1, w2, microbatches=4)
    ref_loss, r1, r2 = dp_tp_pp.one_device(x, t, w1, w2)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for g, r in zip(g1 + g2, r1 + r2):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
