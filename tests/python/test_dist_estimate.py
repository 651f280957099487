"""tessera.dist.estimate: communication per mesh axis and estimated time, without running the step.

Every expected number is computed here from the model's documented formulas
(ring volumes, alpha-beta time) and the presets' documented constants
(docs/guide/distribution.md, "Estimating a step"), never by asking estimate
a second time.
"""

import numpy as np
import pytest

import tessera
from tessera import dist, ops
from tessera.dist import _jit as dist_jit
from tessera.errors import ArgumentError

# The presets' documented figures: GB/s per direction, microseconds per ring step, dense TFLOPS.
NVLINK4 = (450.0, 2.0)     # dgx-h100, dgx-h200: 900 GB/s both directions
NVLINK5 = (900.0, 2.0)     # nvl72: 1.8 TB/s both directions
IB_NDR = (50.0, 5.0)       # 400 Gb/s between nodes
CPU_COPY = (10.0, 5.0)     # cpu: an assumption
H100_FP32_TFLOPS = 67.0
B200_BF16_TFLOPS = 2500.0
B200_FP8_TFLOPS = 5000.0

COL = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
ROW = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))
KINDS = ("allreduce", "all_gather", "reduce_scatter", "all_to_all")


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


def ring(kind, n, payload):
    """(bytes sent per device, steps) of the ring algorithm: the documented table."""
    if kind == "allreduce":
        return 2 * (n - 1) / n * payload, 2 * (n - 1)
    return (n - 1) / n * payload, n - 1


def alpha_beta(link, steps, nbytes):
    bandwidth_gbps, latency_us = link
    return steps * latency_us * 1e-6 + nbytes / (bandwidth_gbps * 1e9)


def counts(**nonzero):
    return {k: nonzero.get(k, 0) for k in KINDS}


def block(x, w1, w2):
    """A Megatron MLP block with its residual: column-parallel, gelu, row-parallel."""
    return x + ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)


def mlp_args(mesh, b, d, f, x_layout=None):
    """fp32 x [B, D] (replicated unless x_layout says), w1 [D, F] split by columns, w2 [F, D] by rows."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, d)).astype(np.float32)
    w1 = rng.standard_normal((d, f)).astype(np.float32)
    w2 = rng.standard_normal((f, d)).astype(np.float32)
    return (dist.tensor(x, layout=x_layout, mesh=mesh), dist.tensor(w1, layout=COL, mesh=mesh),
            dist.tensor(w2, layout=ROW, mesh=mesh))


@pytest.fixture
def tp4():
    return dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))


@pytest.mark.parametrize("b, d, f", [(8, 16, 32), (4, 24, 64)])
def test_the_megatron_mlp_forward_is_one_allreduce_of_the_activations(tp4, b, d, f):
    e = dist.estimate(block, *mlp_args(tp4, b, d, f), system="dgx-h100")
    tp = e.axes["tp"]
    assert tp.collectives == counts(allreduce=1)
    n, payload = 4, b * d * 4  # the [B, D] fp32 pending sum
    sent, steps = ring("allreduce", n, payload)
    assert sent == 2 * 3 / 4 * payload
    assert tp.bytes_sent == pytest.approx(sent, rel=1e-12) and tp.bytes_received == tp.bytes_sent
    assert tp.steps == steps == 6
    assert tp.scope == "intra-node" and tp.link.bandwidth_gbps == NVLINK4[0]
    assert tp.time_s == pytest.approx(alpha_beta(NVLINK4, steps, sent), rel=1e-12)
    assert e.communication_time_s == pytest.approx(tp.time_s, rel=1e-12)
    [c] = e.collectives
    assert (c.kind, c.axis, c.axis_size, c.payload_bytes) == ("allreduce", "tp", 4, payload)
    # Compute: x[B, D] @ w1[D, F/4], then h[B, F/4] @ w2[F/4, D], fp32 at the non-tensor FP32 peak.
    flops = 2 * b * (f // 4) * d + 2 * b * d * (f // 4)
    assert e.flops == flops and e.flops_by_dtype == {"fp32": flops}
    assert e.compute_time_s == pytest.approx(flops / (H100_FP32_TFLOPS * 1e12), rel=1e-12)
    assert e.time_s == pytest.approx(tp.time_s + e.compute_time_s, rel=1e-12)
    assert e.ranks == (0, 1, 2, 3)


def test_the_cpu_preset_has_no_compute_figure(tp4):
    b, d, f = 8, 16, 32
    e = dist.estimate(block, *mlp_args(tp4, b, d, f), system="cpu")
    sent, steps = ring("allreduce", 4, b * d * 4)
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta(CPU_COPY, steps, sent), rel=1e-12)
    assert e.compute_time_s is None and e.missing_peaks == ("fp32",)
    assert e.time_s == e.communication_time_s
    assert "no peak figure for fp32 on cpu" in str(e)


def test_the_training_step_has_two_allreduces(tp4):
    b, d, f = 8, 16, 32

    def loss(x, w1, w2):
        y = block(x, w1, w2)
        return ops.mean(y * y)

    step = tessera.value_and_grad(loss, argnums=(0, 1, 2))
    e = dist.estimate(step, *mlp_args(tp4, b, d, f), system="dgx-h200")
    tp = e.axes["tp"]
    # Forward: the block's output; backward: dx, where the residual meets the pending gradient.
    assert tp.collectives == counts(allreduce=2)
    assert [c.payload_bytes for c in e.collectives] == [b * d * 4, b * d * 4]
    sent, steps = ring("allreduce", 4, b * d * 4)
    assert tp.bytes_sent == pytest.approx(2 * sent, rel=1e-12)
    assert tp.time_s == pytest.approx(2 * alpha_beta(NVLINK4, steps, sent), rel=1e-12)


def test_dp_and_tp_collectives_are_counted_on_their_own_axes():
    # Rows over dp, columns over tp: max over rows is an allreduce(max) over dp of the
    # [D/tp] shard; softmax over the columns then gathers them over tp.
    mesh = dist.mesh(devices=cpus(8), axes=("dp", "tp"), shape=(2, 4))
    b, d = 6, 32
    x = dist.tensor(np.random.default_rng(1).standard_normal((b, d)).astype(np.float32),
                    layout=dist.ShardSpec(partition=("row", "col"), mesh_axes=("dp", "tp")), mesh=mesh)
    e = dist.estimate(lambda x: ops.softmax_safe(ops.max(x, axis=0), axis=-1), x, system="cpu")
    dp, tp = e.axes["dp"], e.axes["tp"]
    assert dp.collectives == counts(allreduce=1) and tp.collectives == counts(all_gather=1)
    dp_sent, dp_steps = ring("allreduce", 2, d // 4 * 4)
    tp_sent, tp_steps = ring("all_gather", 4, d * 4)  # S is the gathered [D] vector
    assert dp.bytes_sent == pytest.approx(dp_sent, rel=1e-12) and dp.steps == dp_steps == 2
    assert tp.bytes_sent == pytest.approx(tp_sent, rel=1e-12) and tp.steps == tp_steps == 3
    assert dp.time_s == pytest.approx(alpha_beta(CPU_COPY, dp_steps, dp_sent), rel=1e-12)
    assert tp.time_s == pytest.approx(alpha_beta(CPU_COPY, tp_steps, tp_sent), rel=1e-12)
    assert e.communication_time_s == pytest.approx(dp.time_s + tp.time_s, rel=1e-12)
    assert e.flops == 0 and e.compute_time_s == 0  # no matrix product, so no figure is needed


def test_a_data_parallel_training_step_allreduces_weight_gradients_over_dp():
    mesh = dist.mesh(devices=cpus(4), axes=("dp", "tp"), shape=(2, 2))
    b, d, f = 16, 16, 32
    batch = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))
    x, w1, w2 = mlp_args(mesh, b, d, f, x_layout=batch)
    t = dist.tensor(np.zeros((b, d), np.float32), layout=batch, mesh=mesh)

    def sgd(x, t, w1, w2):
        def loss(w1, w2):
            r = block(x, w1, w2) - t
            return ops.mean(r * r)
        value, (g1, g2) = tessera.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return value, w1 - 0.1 * g1, w2 - 0.1 * g2

    e = dist.estimate(sgd, x, t, w1, w2, system="dgx-h100")
    dp, tp = e.axes["dp"], e.axes["tp"]
    # tp: the forward allreduce of the dp shard of the batch's activations, [B/dp, D].
    # dp: the weight gradients' pending sums, w1's [D, F/tp] and w2's [F/tp, D] shards
    # (the loss stays pending over dp: it is a result, nothing reads it).
    assert tp.collectives == counts(allreduce=1) and dp.collectives == counts(allreduce=2)
    moved = [(c.axis, c.kind, c.payload_bytes) for c in e.collectives if c.kind != "shard_slice"]
    assert sorted(moved) == [("dp", "allreduce", d * f // 2 * 4)] * 2 + [("tp", "allreduce", b // 2 * d * 4)]
    # The replicated loss gradient is sliced to the batch shard: listed, moving nothing.
    assert all(c.bytes_sent == 0 and c.time_s == 0 for c in e.collectives if c.kind == "shard_slice")
    dp_sent, dp_steps = ring("allreduce", 2, d * f // 2 * 4)
    tp_sent, tp_steps = ring("allreduce", 2, b // 2 * d * 4)
    assert dp.bytes_sent == pytest.approx(2 * dp_sent, rel=1e-12)
    assert dp.time_s == pytest.approx(2 * alpha_beta(NVLINK4, dp_steps, dp_sent), rel=1e-12)
    assert tp.time_s == pytest.approx(alpha_beta(NVLINK4, tp_steps, tp_sent), rel=1e-12)
    # Five products of [B/dp] x [F/tp] x [D] each: two forward, dh = dy w2^T, dw2 = h^T dy, dw1 = x^T dh
    # (the transposed operands' contraction dims are read through transpose_a / transpose_b).
    assert e.flops == 5 * 2 * (b // 2) * (f // 2) * d


def test_reduce_scatter_and_all_to_all_volumes(tp4):
    b, d, f = 8, 16, 32
    rng = np.random.default_rng(2)
    x = rng.standard_normal((b, d)).astype(np.float32)
    h = rng.standard_normal((b, f)).astype(np.float32)
    w2 = rng.standard_normal((f, d)).astype(np.float32)
    # Sequence parallelism: the pending sum is reduce-scattered over the rows; S is the full [B, D].
    e = dist.estimate(lambda r, h, w: r + ops.matmul(h, w), dist.tensor(x, layout=ROW, mesh=tp4),
                      dist.tensor(h, layout=COL, mesh=tp4), dist.tensor(w2, layout=ROW, mesh=tp4), system="dgx-h100")
    assert e.axes["tp"].collectives == counts(reduce_scatter=1)
    sent, steps = ring("reduce_scatter", 4, b * d * 4)
    assert e.axes["tp"].bytes_sent == pytest.approx(sent, rel=1e-12)
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta(NVLINK4, steps, sent), rel=1e-12)
    # A reshard moving the split from columns to rows: all_to_all of each device's [8, 2] shard.
    a = np.ones((8, 8), np.float32)
    g = dist.estimate(lambda x, y: x + dist.reshard(y, ROW), dist.tensor(a, layout=ROW, mesh=tp4),
                      dist.tensor(a, layout=COL, mesh=tp4), system="dgx-h100")
    assert g.axes["tp"].collectives == counts(all_to_all=1)
    sent, steps = ring("all_to_all", 4, 8 * 2 * 4)
    assert g.axes["tp"].bytes_sent == pytest.approx(sent, rel=1e-12)
    assert g.axes["tp"].time_s == pytest.approx(alpha_beta(NVLINK4, steps, sent), rel=1e-12)


def test_an_axis_that_crosses_nodes_takes_the_inter_node_link():
    # dgx-h100: nodes of 8 devices; mesh devices are row-major.
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)

    def run(axes, shape):
        mesh = dist.mesh(devices=cpus(16), axes=axes, shape=shape)
        layout = dist.ShardSpec(partition=("row", "col"), mesh_axes=("dp", "tp"))
        return dist.estimate(lambda x: ops.softmax_safe(ops.max(x, axis=0), axis=-1),
                             dist.tensor(x, layout=layout, mesh=mesh), system="dgx-h100")

    # dp=2 x tp=8: a tp group is ranks 8k..8k+7 (one node); a dp group {r, r+8} spans two.
    e = run(("dp", "tp"), (2, 8))
    assert (e.axes["tp"].scope, e.axes["dp"].scope) == ("intra-node", "inter-node")
    dp_sent, dp_steps = ring("allreduce", 2, 64 // 8 * 4)
    assert e.axes["dp"].time_s == pytest.approx(alpha_beta(IB_NDR, dp_steps, dp_sent), rel=1e-12)
    tp_sent, tp_steps = ring("all_gather", 8, 64 * 4)
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta(NVLINK4, tp_steps, tp_sent), rel=1e-12)
    # tp=8 x dp=2: tp now has stride 2 and spans 15 ranks, across both nodes; dp pairs stay in one.
    e = run(("tp", "dp"), (8, 2))
    assert (e.axes["tp"].scope, e.axes["dp"].scope) == ("inter-node", "intra-node")
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta(IB_NDR, tp_steps, tp_sent), rel=1e-12)


def test_the_nvl72_teaser(monkeypatch):
    monkeypatch.setenv("TESSERA_VIRTUAL_DEVICES", "cuda:72")
    mesh = dist.mesh(devices=[f"cuda:{i}" for i in range(72)], axes=("dp", "tp", "pp"), shape=(4, 9, 2))
    W = dist.tensor(shape=(8192, 8192), layout=COL, mesh=mesh, dtype="fp8_e4m3")
    X = dist.tensor(shape=(4, 8192), mesh=mesh, dtype="fp8_e4m3")
    e = dist.estimate(ops.gemm, X, W, system="nvl72")
    # A column-split weight needs no communication on any axis.
    assert all(a.collectives == counts() and a.bytes_sent == 0 and a.time_s == 0 for a in e.axes.values())
    assert e.communication_time_s == 0
    # 8192 columns over tp=9: 911 on tp coordinates 0 and 1, 910 elsewhere; the estimate is the slowest device's.
    flops = 2 * 4 * 911 * 8192
    assert e.flops_by_dtype == {"fp8_e4m3": flops}
    assert e.compute_time_s == pytest.approx(flops / (B200_FP8_TFLOPS * 1e12), rel=1e-12)
    assert e.time_s > 0
    assert list(e.ranks) == [r for r in range(72) if mesh.coords(r)[1] in (0, 1)]

    # A Megatron block in bf16 on the same mesh: one allreduce over tp (stride 2 x 9 members, inside the rack).
    b, d, f = 4, 1024, 4096
    xs, w1, w2 = (dist.tensor(shape=s, layout=lay, mesh=mesh, dtype="bf16")
                  for s, lay in (((b, d), None), ((d, f), COL), ((f, d), ROW)))
    e = dist.estimate(block, xs, w1, w2, system="nvl72")
    assert e.axes["tp"].collectives == counts(allreduce=1)
    assert e.axes["dp"].collectives == counts() and e.axes["pp"].collectives == counts()
    sent, steps = ring("allreduce", 9, b * d * 2)
    assert e.axes["tp"].scope == "intra-node"
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta(NVLINK5, steps, sent), rel=1e-12)
    # The slowest shard holds 456 of the 4096 hidden columns (4096 = 9 * 455 + 1).
    flops = 2 * b * 456 * d * 2
    assert e.flops_by_dtype == {"bf16": flops}
    assert e.time_s == pytest.approx(e.axes["tp"].time_s + flops / (B200_BF16_TFLOPS * 1e12), rel=1e-12)
    assert 0 < e.time_s < 1e-3  # microseconds, not seconds, for a 4 x 1024 activation
    text = str(e)
    assert "nvl72" in text and "allreduce x1" in text and "NVLink 5" in text


def test_a_custom_system():
    mesh = dist.mesh(devices=cpus(8), axes=("dp", "tp"), shape=(2, 4))
    x = dist.tensor(np.ones((6, 32), np.float32),
                    layout=dist.ShardSpec(partition=("row", "col"), mesh_axes=("dp", "tp")), mesh=mesh)
    lab = dist.System(name="lab", links={"tp": dist.Link(bandwidth_gbps=100, latency_us=1),
                                         "*": dist.Link(bandwidth_gbps=25, latency_us=10)},
                      peak_tflops={"fp32": 10})
    e = dist.estimate(lambda x: ops.softmax_safe(ops.max(x, axis=0), axis=-1), x, system=lab)
    assert e.axes["tp"].scope == "axis" and e.axes["dp"].scope == "intra-node"
    tp_sent, tp_steps = ring("all_gather", 4, 32 * 4)
    dp_sent, dp_steps = ring("allreduce", 2, 8 * 4)
    assert e.axes["tp"].time_s == pytest.approx(alpha_beta((100, 1), tp_steps, tp_sent), rel=1e-12)
    assert e.axes["dp"].time_s == pytest.approx(alpha_beta((25, 10), dp_steps, dp_sent), rel=1e-12)
    assert e.compute_time_s == 0  # no matrix product
    d = e.as_dict()
    assert d["system"] == "lab" and d["axes"]["tp"]["link"]["bandwidth_gbps"] == 100
    assert d["axes"]["dp"]["collectives"]["allreduce"] == 1
    assert d["time_s"] == e.time_s and d["communication_time_s"] == e.communication_time_s


def test_custom_systems_are_checked():
    with pytest.raises(ArgumentError, match="bandwidth_gbps must be positive"):
        dist.Link(bandwidth_gbps=0, latency_us=1)
    with pytest.raises(ArgumentError, match="latency_us must be >= 0"):
        dist.Link(bandwidth_gbps=1, latency_us=-1)
    with pytest.raises(ArgumentError, match="links maps axis names"):
        dist.System(name="x", links={"tp": 100})
    with pytest.raises(ArgumentError, match="inter_node needs node_size"):
        dist.System(name="x", links={"*": dist.Link(1, 1)}, inter_node=dist.Link(1, 1))
    with pytest.raises(ArgumentError, match="peak_tflops"):
        dist.System(name="x", links={"*": dist.Link(1, 1)}, peak_tflops={"bf16": -1})


def test_a_system_without_a_link_for_an_axis_says_so(tp4):
    only_dp = dist.System(name="dp-only", links={"dp": dist.Link(10, 1)})
    with pytest.raises(ArgumentError, match=r"no link for mesh axis 'tp'"):
        dist.estimate(block, *mlp_args(tp4, 8, 16, 32), system=only_dp)
    nodes = dist.System(name="small-nodes", links={"*": dist.Link(10, 1)}, node_size=2)
    with pytest.raises(ArgumentError, match=r"crosses nodes of 2 devices.*no inter_node link"):
        dist.estimate(block, *mlp_args(tp4, 8, 16, 32), system=nodes)


def test_unknown_systems_list_the_known_ones(tp4):
    with pytest.raises(ArgumentError, match=r"unknown system 'gb300'.*\"nvl72\", \"dgx-h100\", \"dgx-h200\", "
                                            r"\"pcie-gen5\", \"cpu\""):
        dist.estimate(block, *mlp_args(tp4, 8, 16, 32), system="gb300")
    with pytest.raises(ArgumentError, match="needs system="):
        dist.estimate(block, *mlp_args(tp4, 8, 16, 32))


def test_arguments_must_include_distributed_tensors():
    x = np.ones((8, 16), np.float32)
    w1, w2 = np.ones((16, 32), np.float32), np.ones((32, 16), np.float32)
    with pytest.raises(ArgumentError, match=r"needs distributed tensors \(tessera.dist.tensor\)"):
        dist.estimate(block, x, w1, w2, system="cpu")
    with pytest.raises(ArgumentError, match=r"needs distributed tensors"):
        dist.estimate(block, tessera.tensor(x), tessera.tensor(w1), tessera.tensor(w2), system="cpu")
    with pytest.raises(ArgumentError, match="fn must be a function"):
        dist.estimate(42, x, system="cpu")


def test_estimate_runs_nothing_and_shares_the_call_cache(tp4, monkeypatch):
    args = mlp_args(tp4, 8, 16, 32)
    traced = []

    @tessera.jit
    def f(x, w1, w2):
        traced.append(1)  # runs while tracing only
        return block(x, w1, w2)

    def refuse(*_args, **_kwargs):
        raise AssertionError("estimate ran the step")

    with monkeypatch.context() as m:
        m.setattr(dist_jit, "run", refuse)
        m.setattr(dist_jit.ShardedEntry, "executable", refuse)
        e = dist.estimate(f, *args, system="dgx-h100")
    assert e.axes["tp"].collectives == counts(allreduce=1)
    assert traced == [1] and f.trace_count == 1
    # The same signature called for real reuses the partitioned entry: no second trace.
    y = f(*args)
    assert traced == [1] and f.trace_count == 1 and f.cache_size == 1
    assert y.layout == "[-, -]"
    # inspect_ir shows the per-shard function estimated.
    assert f"func @{e.function}" in f.inspect_ir("graph")
