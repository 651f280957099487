"""@tessera.jit on cuda tensors: the same Schedule IR executable compiled by the
CUDA backend (NVRTC), checked against the CPU executable and float64 numpy.
GPU tests skip without a device; the no-GPU and mixed-device errors are
checked everywhere."""

import numpy as np
import pytest

import tessera
from tessera import _C

HAS_GPU = _C._cuda_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {_C._cuda_unavailable_reason()}")
ops = tessera.ops


def _ulps(a, b):
    """Distance in fp32 units in the last place, elementwise (NaN == NaN)."""
    a = np.ascontiguousarray(a, np.float32).view(np.int32).astype(np.int64)
    b = np.ascontiguousarray(b, np.float32).view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)
    b = np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return np.abs(a - b)


def test_target_cuda_without_gpu_is_a_device_error():
    if HAS_GPU:
        pytest.skip("a CUDA device is present")
    f = tessera.jit(target="cuda")(lambda x: x + x)
    with pytest.raises(tessera.DeviceError, match="unavailable"):
        f(tessera.tensor(np.ones(4, np.float32)))


def test_inspecting_an_annotated_cuda_function_before_a_call_shows_cuda_code():
    # A function traced from its annotations has not run on any device; with
    # target="cuda" its target code is the CUDA backend's, never the CPU's.
    @tessera.jit(target="cuda")
    def f(x: tessera.Tensor[64, 256, "fp32"]):
        return ops.softmax_safe(x)

    assert "graph.softmax_safe" in f.inspect_ir("graph")
    if not HAS_GPU:
        with pytest.raises(tessera.DeviceError, match="unavailable"):
            f.inspect_ir("target")
        return
    code = f.inspect_ir("target")
    assert "__global__" in code and "sm_" in code
    assert "tsr::run_groups" not in code  # the CPU backend's entry point


def test_executable_for_another_device_names_both():
    f = tessera.jit(lambda x: x * 2.0)
    x = tessera.tensor(np.ones(3, np.float32))
    f(x)
    exe = f.executable()
    assert exe.device == "cpu"
    if not HAS_GPU:
        return
    with pytest.raises(tessera.DeviceError, match="cuda:0.*compiled for cpu"):
        exe.run([x.to("cuda:0")])


@needs_gpu
def test_mixed_devices_are_a_device_error_naming_both():
    f = tessera.jit(lambda x, y: x + y)
    x = tessera.tensor(np.ones(3, np.float32))
    with pytest.raises(tessera.DeviceError, match="'x' on cpu and argument 'y' on cuda:0"):
        f(x, x.to("cuda:0"))


@needs_gpu
def test_mlp_gradients_on_the_gpu_match_the_cpu_executable(rng):
    def loss(w1, b1, w2, x, y):
        h = ops.relu(ops.matmul(x, w1) + b1)
        logits = ops.matmul(h, w2)
        return ops.mean(-ops.sum(y * ops.log(ops.softmax_safe(logits, axis=-1)), axis=-1))

    step = tessera.jit(tessera.value_and_grad(loss, argnums=(0, 1, 2)))
    shapes = [(96, 130), (130,), (130, 10), (70, 96)]
    host = [tessera.tensor((rng.standard_normal(s) * 0.2).astype(np.float32)) for s in shapes]
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 70)]
    host.append(tessera.tensor(y))
    want_loss, want_grads = step(*host)
    dev = [t.to("cuda:0") for t in host]
    got_loss, got_grads = step(*dev)
    assert got_loss.device == "cuda:0" and all(g.device == "cuda:0" for g in got_grads)
    assert step.executable().device == "cuda:0"
    np.testing.assert_allclose(got_loss.numpy(), want_loss.numpy(), rtol=1e-5)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)
    # Ten runs on the GPU give the same bits.
    first = [g.numpy() for g in got_grads]
    for _ in range(9):
        _, again = step(*dev)
        for a, b in zip(again, first):
            np.testing.assert_array_equal(a.numpy(), b)
    # capture_graph=True: one CUDA graph, built on the first call and replayed with new buffers on
    # the next ones, gives the plain launches' bits, also on new inputs.
    graphed = tessera.jit(capture_graph=True)(tessera.value_and_grad(loss, argnums=(0, 1, 2)))
    _, g1 = graphed(*dev)
    for a, b in zip(g1, first):
        np.testing.assert_array_equal(a.numpy(), b)
    other = [t * 0.5 for t in dev[:4]] + [dev[4]]
    _, want_other = step(*other)
    _, g2 = graphed(*other)
    for a, b in zip(g2, want_other):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(g1, first):  # the replay wrote new buffers
        np.testing.assert_array_equal(a.numpy(), b)
    assert graphed.executable().graphs == 1


@needs_gpu
def test_graph_replays_write_each_calls_results_from_its_own_arguments(rng):
    """After the first call of its shapes builds the graph, a replay sets only the
    nodes that read an argument or write a result: the graph keeps its
    intermediates, and each call gets fresh result buffers. Every call's
    results must be its own (earlier results untouched by later calls), from
    its own arguments: new tensors, one tensor passed twice, a transposed view
    (copied to a contiguous argument first). `walked` returns an argument, so
    its replays walk the steps instead; it must agree all the same."""
    def direct(a, b):
        h = ops.tanh(a * 0.5 + b)
        return ops.sum(h, axis=1), ops.reshape(h * 2.0, (-1,))

    def walked(a, b):
        return a, ops.sum(a * b, axis=1)

    for fn in (direct, walked):
        on_cpu, graphed = tessera.jit(fn), tessera.jit(fn, capture_graph=True)
        host = [rng.standard_normal((64, 300)).astype(np.float32) for _ in range(6)]
        dev = [tessera.tensor(h).to("cuda:0") for h in host]
        calls = [(dev[0], dev[1]), (dev[2], dev[3]), (dev[4], dev[4]),
                 (ops.transpose(tessera.tensor(np.ascontiguousarray(host[5].T)).to("cuda:0"), (1, 0)), dev[1])]
        outs = [graphed(a, b) for a, b in calls]  # all kept: no result may be reused by a later call
        for (a, b), got in zip(calls, outs):
            want = on_cpu(a.to("cpu"), b.to("cpu"))
            for g, w in zip(got, want):
                assert g.device == "cuda:0"
                np.testing.assert_array_equal(g.to("cpu").numpy(), w.numpy(), err_msg=fn.__name__)
        assert graphed.executable().graphs == 1


@needs_gpu
def test_every_family_on_the_gpu_agrees_with_the_cpu(rng):
    def f(x, b, idx):
        e = ops.tanh(x * 0.5 + b)                      # elementwise with a broadcast
        s = ops.sum(e, axis=-1)                        # reduction
        n = ops.layernorm_safe(x, axis=-1)             # normalization
        g = ops.gather(x, idx, axis=0)                 # copy
        t = ops.transpose(x, (1, 0))                   # view
        return s, n, g, ops.matmul(t, x)               # gemm

    jf = tessera.jit(f)
    x = tessera.tensor(rng.standard_normal((300, 257)).astype(np.float32))
    b = tessera.tensor(rng.standard_normal((257,)).astype(np.float32))
    idx = tessera.tensor(np.array([3, -1, 0, 299], np.int64))
    want = jf(x, b, idx)
    got = jf(x.to("cuda:0"), b.to("cuda:0"), idx.to("cuda:0"))
    names = ("sum", "layernorm", "gather", "matmul")
    for name, g, w in zip(names, got, want):
        assert g.device == "cuda:0", name
        gv, wv = g.numpy(), w.numpy()
        if name == "gather":
            np.testing.assert_array_equal(gv, wv)
        elif name == "matmul":
            np.testing.assert_allclose(gv, wv, rtol=1e-5, atol=1e-4)
        else:
            # Same canonical order on both backends; tanh may differ by an ulp per element.
            assert _ulps(gv, wv).max() <= 64, f"{name}: {_ulps(gv, wv).max()} ulps"
    with pytest.raises(tessera.TesseraError, match="out of range"):
        jf(x.to("cuda:0"), b.to("cuda:0"), tessera.tensor(np.array([300], np.int64)).to("cuda:0"))


@needs_gpu
@pytest.mark.parametrize("split", ["1", "0"])
def test_long_sums_to_few_outputs_match_the_cpu_split_or_whole(rng, monkeypatch, split):
    """A loss-like sum to one value, row means of a few long rows and column
    sums of a few long columns: split into a group per superblock
    (docs/design/0036) or one group per output (32 columns), the CPU
    executable's bits, and float64 numpy within the canonical order's
    error."""
    monkeypatch.setenv("TESSERA_SPLIT_SUMS", split)

    def f(x, c):
        return ops.sum(x * x), ops.mean(x, axis=-1), ops.exp(ops.sum(x, axis=-1) * 1e-3), ops.sum(c, axis=0)

    jf = tessera.jit(f)
    xv = rng.standard_normal((3, 5 * 65536 + 7))
    x = tessera.tensor(xv, "bf16 @accum(fp32)")
    c = tessera.tensor(rng.standard_normal((200001, 37)), "bf16 @accum(fp32)")
    want = jf(x, c)
    got = jf(x.to("cuda:0"), c.to("cuda:0"))
    assert ("graph.superblock_sums" in jf.inspect_ir("schedule")) == (split == "1")
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.numpy().tobytes() == w.numpy().tobytes(), f"result {k}: {g.numpy()} vs {w.numpy()}"
    xb = x.numpy().astype(np.float64)
    np.testing.assert_allclose(want[0].numpy().astype(np.float64), (xb * xb).sum(), rtol=2e-2)
    np.testing.assert_allclose(want[1].numpy().astype(np.float64), xb.mean(axis=-1), rtol=2e-2, atol=1e-2)
    np.testing.assert_allclose(want[3].numpy().astype(np.float64), c.numpy().astype(np.float64).sum(axis=0),
                               rtol=2e-2, atol=2.0)


@needs_gpu
def test_column_sums_of_adjacent_columns_match_the_cpu(rng, monkeypatch):
    """Column sums on CUDA take two adjacent bf16 columns per lane, one
    4-byte load for both (TESSERA_COLUMN_VECTOR's default, docs/design/0038):
    a bias gradient's [3000, 4096], an even [700, 38] and [70000, 40]
    (two superblocks a column, whole), the CPU executable's bits (which takes
    a column per lane)."""
    monkeypatch.setenv("TESSERA_SPLIT_SUMS", "0")
    monkeypatch.setenv("TESSERA_COLUMN_BLOCKS", "0")  # the column form (the blocks' test is below)

    def f(c):
        return ops.sum(c, axis=0), ops.mean(c, axis=0)

    for shape in ((3000, 4096), (700, 38), (70000, 40)):
        jf = tessera.jit(f)
        c = tessera.tensor(rng.standard_normal(shape), "bf16 @accum(fp32)")
        want = jf(c)
        got = jf(c.to("cuda:0"))
        assert "load_vector<2>" in jf.inspect_ir("target"), shape
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.numpy().tobytes() == w.numpy().tobytes(), f"{shape} result {k}"


@needs_gpu
@pytest.mark.parametrize("knobs", ["", "TESSERA_COLUMN_VECTOR=2", "TESSERA_COLUMN_PROLOGUE=1",
                                   "TESSERA_COLUMN_PROLOGUE=1 TESSERA_COLUMN_VECTOR=2", "TESSERA_COLUMN_BLOCKS=0"])
def test_bias_gradients_split_at_blocks_match_the_cpu(rng, monkeypatch, knobs):
    """A bias gradient on CUDA splits at its blocks (graph.block_sums, a group
    per block of rows reading 16 bytes a lane, then graph.block_total;
    docs/design/0039); with TESSERA_COLUMN_PROLOGUE=1 the block sums compute
    the elementwise gradient they sum as their prologue and store it too. The
    gelu chain's x and b gradients at storage precision, [3000, 4096] (a
    partial block), [700, 38] and [512, 64]: the CPU executable's bits (under
    the same knob), for each knob, over 10 runs."""
    for pair in knobs.split():
        monkeypatch.setenv(*pair.split("="))

    def loss(x, b, r, g):
        return ops.sum((ops.gelu(x + b) + r) * g)

    for rows, cols in ((3000, 4096), (700, 38), (512, 64)):
        args = [tessera.tensor(rng.standard_normal(s) * 2.0, "bf16 @accum(fp32)")
                for s in ((rows, cols), (cols,), (rows, cols), (rows, cols))]
        jf = tessera.jit(tessera.grad(loss, argnums=(0, 1), precision="storage"))
        want = jf(*args)
        dev = [a.to("cuda:0") for a in args]
        got = jf(*dev)
        sched = jf.inspect_ir("schedule")
        kernels = [line for line in sched.splitlines() if "schedule.kernel" in line and '"constant"' not in line]
        if "BLOCKS" not in knobs:
            fused = "PROLOGUE" in knobs
            assert len(kernels) == (2 if fused else 3) and "graph.block_sums" in sched, "\n".join(kernels)
        for run in range(10):
            got = jf(*dev) if run else got
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.numpy().tobytes() == w.numpy().tobytes(), f"[{rows}, {cols}] gradient {k}, run {run}"


@needs_gpu
def test_eager_long_sums_on_the_gpu_match_the_cpu(rng):
    """Eager sums and means to few outputs split on a cuda tensor as on the
    CPU (docs/design/0036: superblock sums with their count as an attribute,
    the total, and a mean's division by its count as a tensor): the CPU's
    eager bits."""
    x = tessera.tensor(rng.standard_normal((3, 3 * 65536 + 5)), "bf16 @accum(fp32)")
    c = tessera.tensor(rng.standard_normal((140001, 6)), "bf16 @accum(fp32)")

    def calls(x, c):
        return [ops.sum(x), ops.mean(x, axis=-1, keepdims=True), ops.sum(c, axis=0), ops.mean(c, axis=0)]

    want = calls(x, c)
    got = calls(x.to("cuda:0"), c.to("cuda:0"))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.device == "cuda:0" and g.shape == w.shape, k
        assert g.numpy().tobytes() == w.numpy().tobytes(), f"call {k}: {g.numpy()} vs {w.numpy()}"


@needs_gpu
def test_target_cuda_moves_host_inputs_to_cuda0(rng, monkeypatch):
    # The PTX path's text is checked below: where tileiras is found, the
    # default mapper would send this elementwise kernel to CUDA Tile IR.
    monkeypatch.setenv("TESSERA_CUDA_TILE_DEFAULT", "0")
    f = tessera.jit(target="cuda")(lambda x: ops.exp(x) - 1.0)
    xv = rng.standard_normal(1000).astype(np.float32)
    out = f(tessera.tensor(xv))
    assert out.device == "cuda:0"
    # Each op rounds to fp32 (exp, then the subtraction, which is exact near 1):
    # Tessera's exp may differ from numpy's by an ulp, an absolute error of
    # at most 2 ulps of exp(x) after the cancellation.
    e = np.exp(xv.astype(np.float64)).astype(np.float32)
    want = e - np.float32(1.0)
    assert np.all(np.abs(out.numpy().astype(np.float64) - want) <= 2 * np.spacing(e).astype(np.float64))
    # The same exp as the CPU's (tessera/numerics/elementary.h): the same bits.
    cpu = tessera.jit(lambda x: ops.exp(x) - 1.0)(tessera.tensor(xv))
    np.testing.assert_array_equal(out.numpy(), cpu.numpy())
    assert "__global__" in f.inspect_ir("target")
    ptx = f.inspect_ir("target", ptx=True)
    assert ".entry" in ptx and "// ---- kernel k0" in ptx


@needs_gpu
def test_eager_ops_on_cuda_tensors_run_compiled_and_shape_generic(rng):
    a = rng.standard_normal((37, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    ga, gb = tessera.tensor(a).to("cuda:0"), tessera.tensor(b).to("cuda:0")
    y = ops.matmul(ga, gb)
    assert y.device == "cuda:0"
    np.testing.assert_allclose(y.numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    # A Python scalar goes along to the device; the result matches the host's bits.
    z = ga * 2.0 + 1.0
    assert z.device == "cuda:0"
    np.testing.assert_array_equal(z.numpy(), (tessera.tensor(a) * 2.0 + 1.0).numpy())
    # Another shape of the same pattern reuses the compiled kernel.
    ops.add(ga, ga)
    before = _C._eager_cache_size()
    c = tessera.tensor(rng.standard_normal((51, 80)).astype(np.float32)).to("cuda:0")
    np.testing.assert_array_equal(ops.add(c, c).numpy(), (c.numpy() + c.numpy()))
    assert _C._eager_cache_size() == before


@needs_gpu
def test_eager_ops_on_two_devices_are_a_device_error():
    x = tessera.tensor(np.ones(3, np.float32))
    with pytest.raises(tessera.DeviceError, match="operand 0 is on cuda:0 and operand 1 on cpu"):
        ops.add(x.to("cuda:0"), x)


@needs_gpu
def test_moving_ops_and_narrow_accumulation_on_the_gpu_match_the_cpu(rng):
    """Copies move codes (NaN payloads of bf16 survive), fp16-accumulating
    normalizations round where the CPU kernels do, and stochastic rounding
    draws the CPU's bits, on the GPU too."""
    codes = np.array([0x7F81, 0x7FC0, 0xFFFF, 0x7F80, 0x8000, 0x0001, 0xFFC1, 0x3F80], np.uint64)
    x = _C._tensor_from_codes(codes.tolist(), [2, 4], "bf16")
    cat = tessera.jit(lambda a: ops.concat([a, a], axis=1))(x.to("cuda:0")).to("cpu")
    np.testing.assert_array_equal(cat.codes(), np.concatenate([codes.reshape(2, 4)] * 2, axis=1))
    h = tessera.tensor(rng.standard_normal((5, 300)) * 4, "fp16 @accum(fp16)")
    g = tessera.tensor(rng.standard_normal(300), "fp16 @accum(fp16)")
    for fn in (ops.softmax_safe, lambda v: ops.rmsnorm_safe(v, g.to(v.device))):
        np.testing.assert_array_equal(fn(h.to("cuda:0")).to("cpu").codes(), fn(h).codes())
    # Stochastic rounding draws the same Philox bits on the device.
    x = tessera.tensor(rng.standard_normal((37, 53)) * 20)
    f = tessera.jit(lambda v: ops.cast(v * 3.0, "bf16 @stochastic_round", seed=7) + 1.0)
    np.testing.assert_array_equal(f(x.to("cuda:0")).to("cpu").codes(), f(x).codes())
    xs = tessera.tensor(rng.standard_normal((13, 300)) * 5, "bf16 @stochastic_round")
    r = tessera.jit(lambda v: (ops.sum(v, axis=1), ops.softmax_safe(v)))
    for a, b in zip(r(xs.to("cuda:0")), r(xs)):
        np.testing.assert_array_equal(a.to("cpu").codes(), b.codes())
    # Integer sums: exact, and their overflow is a fault record raised at the next host read.
    s = tessera.jit(lambda v: ops.sum(v, axis=1))
    i = tessera.tensor(rng.integers(-1000, 1000, (9, 700)).astype(np.int16))
    np.testing.assert_array_equal(s(i.to("cuda:0")).to("cpu").numpy(), s(i).numpy())
    with pytest.raises(tessera.ArgumentError, match="out of range"):
        s(tessera.tensor(np.array([[2**31 - 1, 1]], np.int32)).to("cuda:0")).to("cpu")


@needs_gpu
def test_narrow_gelu_erf_and_exp_of_every_value_match_the_cpu(monkeypatch):
    """gelu, erf and exp of bf16/fp16 take the certified fp32 evaluation on
    the GPU (tile.narrow_unary) and the double formula on the CPU: every
    value of each format gives the same bits (NaN results: NaN on both).
    Without tables: by default each of these functions of one narrow value
    becomes a table read (test_tabulated_chains_on_the_gpu_match_the_cpu_bit_for_bit)."""
    monkeypatch.setenv("TESSERA_TABULATE", "0")
    f = tessera.jit(lambda v: (ops.gelu(v), ops.erf(v), ops.exp(v)))
    for dtype in ("bf16", "fp16"):
        x = _C._tensor_from_codes(list(range(1 << 16)), [1 << 16], dtype)
        on_gpu = f(x.to("cuda:0"))
        assert "tile.narrow_unary" in f.inspect_ir("tile")
        for name, gpu, cpu in zip(("gelu", "erf", "exp"), on_gpu, f(x)):
            g, c = gpu.to("cpu"), cpu
            nan = np.isnan(c.numpy().astype(np.float32))
            np.testing.assert_array_equal(np.isnan(g.numpy().astype(np.float32)), nan, err_msg=f"{name} {dtype}")
            np.testing.assert_array_equal(g.codes()[~nan], c.codes()[~nan], err_msg=f"{name} {dtype}")


@needs_gpu
def test_fp32_erf_and_exp_match_the_cpu_over_a_sweep():
    """erf and exp of fp32 values with fp32 results take the certified
    evaluations on the GPU (erf_f32_or_nan: one branch-free series;
    exp_f32_or_nan) and the double formula on the CPU: one fp32 bit pattern
    in 256, over every sign and exponent, gives the same bits."""
    codes = np.arange(0, 1 << 32, 256, dtype=np.uint64).astype(np.uint32)
    x = tessera.tensor(codes.view(np.float32))
    f = tessera.jit(lambda v: (ops.erf(v), ops.exp(v)))
    on_gpu = f(x.to("cuda:0"))
    assert "tile.narrow_unary" in f.inspect_ir("tile")
    for name, gpu, cpu in zip(("erf", "exp"), on_gpu, f(x)):
        g, c = gpu.to("cpu").numpy(), cpu.numpy()
        nan = np.isnan(c)
        np.testing.assert_array_equal(np.isnan(g), nan, err_msg=name)
        np.testing.assert_array_equal(g[~nan].view(np.uint32), c[~nan].view(np.uint32), err_msg=name)


@needs_gpu
def test_this_stops_kernels_on_the_gpu_match_the_cpu(rng):
    """The fused softmax gradient (cooperative rows on the GPU), layernorm's
    extremes pass, max/min with NaNs and signed zeros, and int64 sums give
    the CPU executable's bits on the GPU."""
    x = rng.standard_normal((37, 1000)).astype(np.float32)
    x[3, 5] = np.inf
    x[4, :] = -np.inf
    x[5, 7] = np.nan
    x[6, 1] = x[6, 9] = np.inf
    t = rng.standard_normal((37, 1000)).astype(np.float32)
    X, T = tessera.tensor(x), tessera.tensor(t)
    for fn in (tessera.grad(lambda a, b: ops.sum(ops.softmax_safe(a, axis=-1) * b)),
               tessera.value_and_grad(lambda a, b: ops.sum(ops.softmax_safe(a, axis=-1) * b)),
               lambda a, b: ops.layernorm_safe(a * 3.0 + 7.0, axis=-1),
               lambda a, b: (ops.max(a, axis=-1), ops.min(b, axis=0))):
        j = tessera.jit(fn)
        got, want = j(X.to("cuda:0"), T.to("cuda:0")), j(X, T)
        got = got if isinstance(got, (tuple, list)) else [got]
        want = want if isinstance(want, (tuple, list)) else [want]
        for g, w in zip(got, want):
            g, w = g.to("cpu").numpy(), w.numpy()
            assert np.array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_array_equal(g[~np.isnan(w)], w[~np.isnan(w)])
    z = np.zeros((2, 37), np.float32)
    z[0, 5], z[0, 16] = -0.0, 0.0
    z[1, :] = -1.0
    z[1, 5], z[1, 16] = -0.0, 0.0
    m = tessera.jit(lambda a: ops.max(a, axis=-1))
    np.testing.assert_array_equal(m(tessera.tensor(z).to("cuda:0")).to("cpu").numpy().view(np.uint32),
                                  m(tessera.tensor(z)).numpy().view(np.uint32))
    i = tessera.tensor(np.array([[2**53, -(2**53), 5], [2**53 + 1, -(2**53), 0]], np.int64))
    s = tessera.jit(lambda v: ops.sum(v, axis=1))
    np.testing.assert_array_equal(s(i.to("cuda:0")).to("cpu").numpy(), s(i).numpy())
    # Integer matmuls, exact, and their overflow as a fault record.
    ia = tessera.tensor(rng.integers(-100, 100, (2, 33, 300)).astype(np.int32))
    ib = tessera.tensor(rng.integers(-100, 100, (300, 17)).astype(np.int32))
    mm = tessera.jit(lambda a, b: ops.matmul(a, b) * 2 + 1)
    np.testing.assert_array_equal(mm(ia.to("cuda:0"), ib.to("cuda:0")).to("cpu").numpy(), mm(ia, ib).numpy())
    big = tessera.tensor(np.array([[2**16, 2**16], [2**16, 2**16]], np.int32)).to("cuda:0")
    with pytest.raises(tessera.ArgumentError, match="out of range"):
        tessera.jit(lambda a: ops.matmul(a, a))(big).to("cpu")
    # Matrix products that round stochastically draw the CPU's bits. The
    # operands are multiples of 1/8 below 1, so every fp32 partial sum is
    # exact and the tensor cores' summation order (which differs from the
    # CPU's) cannot change the value being rounded; the rounding itself (to
    # bf16, at 9 or more significant bits) then has to draw the same bits.
    p = "bf16 @stochastic_round"
    sa = ops.cast(tessera.tensor((rng.integers(-7, 8, (2, 40, 200)) / 8).astype(np.float32)), p)
    sb = ops.cast(tessera.tensor((rng.integers(-7, 8, (200, 24)) / 8).astype(np.float32)), p)
    sm = tessera.jit(lambda a, b: (ops.matmul(a, b), ops.matmul(a, b) + 1.0))
    for g, w in zip(sm(sa.to("cuda:0"), sb.to("cuda:0")), sm(sa, sb)):
        np.testing.assert_array_equal(g.to("cpu").codes(), w.codes())
    # tanh (its inline expm1) gives the CPU's bits.
    th = tessera.jit(lambda a: ops.tanh(a * 7.0))
    np.testing.assert_array_equal(th(X.to("cuda:0")).to("cpu").numpy(), th(X).numpy())


@needs_gpu
def test_profile_times_gpu_kernels_with_events(rng, tmp_path):
    x = tessera.tensor(rng.standard_normal((512, 1024)).astype(np.float32)).to("cuda:0")
    f = tessera.jit(lambda v: ops.softmax_safe(v * 2.0))
    g = tessera.jit(capture_graph=True)(lambda v: ops.sum(v * v, axis=1))
    f(x), g(x), g(x)
    trace = tmp_path / "trace.json"
    with tessera.profile(str(trace)) as prof:
        for _ in range(3):
            f(x)
        g(x)
    import json
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert kernels and all(e["args"]["device"] == "cuda:0" and e["dur"] > 0 for e in kernels)
    assert any(e["cat"] == "graph" and e["dur"] > 0 for e in events)  # the captured replay, as one span
    rows = prof.kernels()
    timed = [r for r in rows if r["device"] == "cuda:0" and not r["kernel"].startswith("graph replay")]
    assert timed and all(r["peak_fraction"] is not None and 0 < r["peak_fraction"] < 1.5 for r in timed)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
def test_random_draws_are_the_same_bits_on_the_gpu_and_the_cpu():
    def draw(x):
        return (ops.rand((64, 33), key=ops.philox(5)), ops.randn((64, 33), key=ops.philox(6)),
                ops.dropout(x, 0.25, key=ops.philox(7)))

    x = np.arange(64 * 33, dtype=np.float32).reshape(64, 33) / 7
    cpu = tessera.jit(draw)(tessera.tensor(x))
    gpu = tessera.jit(draw)(tessera.tensor(x).to("cuda:0"))
    for c, g in zip(cpu, gpu):
        assert g.device == "cuda:0"
        np.testing.assert_array_equal(g.numpy().view(np.uint32), c.numpy().view(np.uint32))


@needs_gpu
def test_a_fault_is_raised_once_and_later_runs_read_back_clean():
    """The runs of an executable, and the replays of its CUDA graph, share one
    fault record and leave one pending check: a fault (an int32 sum that
    overflows) is raised at the next read, once, and later runs on good
    inputs read back without it."""
    bad = tessera.tensor(np.array([[2**31 - 1, 1]], np.int32)).to("cuda:0")
    good = tessera.tensor(np.array([[5, 7]], np.int32)).to("cuda:0")
    for capture in (False, True):
        f = tessera.jit(lambda v: ops.sum(v, axis=1), capture_graph=capture)
        assert f(good).to("cpu").numpy().tolist() == [12]
        for _ in range(3):
            f(good)
        f(bad)
        with pytest.raises(tessera.ArgumentError, match="out of range"):
            f(good).to("cpu")
        for _ in range(3):
            f(good)
        assert f(good).to("cpu").numpy().tolist() == [12]


@needs_gpu
def test_executables_without_kernels_read_back():
    # Views only: the executable launches nothing, so it leaves no fault
    # record to check at the next read (a check of none once crashed there).
    x = tessera.tensor(np.arange(12, dtype=np.float32)).to("cuda:0")
    y = tessera.ops.transpose(tessera.ops.reshape(x, (3, 4)))
    np.testing.assert_array_equal(y.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)

    @tessera.jit
    def view(a):
        return tessera.ops.reshape(a, (2, 6))
    np.testing.assert_array_equal(view(x).to("cpu").numpy(), np.arange(12, dtype=np.float32).reshape(2, 6))


def _bf16(a):
    import ml_dtypes
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16)


@needs_gpu
@pytest.mark.parametrize("m,k,n,ta,tb", [(256, 512, 384, False, False), (200, 72, 136, False, True),
                                          (130, 200, 70, True, False), (64, 48, 300, True, True),
                                          (96, 64, 301, False, False)])
def test_bf16_gemms_take_the_staged_tensor_core_form(rng, m, k, n, ta, tb):
    """bf16 products on CUDA copy their operands into swizzled shared buffers
    (tile.cp_async, pipelined) and run on tensor cores (wgmma on Hopper);
    ragged edges read zeros. Checked against float64 numpy of the same bf16
    inputs (fp32 accumulation, one bf16 rounding of the result), with a
    fused bias + gelu epilogue, and bit for bit over repeated runs."""
    a = _bf16(rng.standard_normal((k, m) if ta else (m, k)))
    b = _bf16(rng.standard_normal((n, k) if tb else (k, n)))
    bias = _bf16(rng.standard_normal(n))
    p = "bf16 @accum(fp32)"
    A, B, C = (tessera.tensor(v, p).to("cuda:0") for v in (a, b, bias))

    def f(x, y, c):
        x = ops.transpose(x, (1, 0)) if ta else x
        y = ops.transpose(y, (1, 0)) if tb else y
        prod = ops.matmul(x, y)
        return prod, ops.gelu(prod + c)

    jf = tessera.jit(f)
    prod, act = jf(A, B, C)
    a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
    b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
    want = a64 @ b64
    got = prod.numpy().astype(np.float64)
    scale = np.abs(a64) @ np.abs(b64)
    # fp32 accumulation in the tensor cores' order plus one bf16 rounding.
    assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-5 * scale + 1e-30), \
        f"max error {np.max(np.abs(got - want) / (scale + 1e-30))}"
    from math import erf, sqrt
    z = got + bias.astype(np.float64)
    gelu = 0.5 * z * (1.0 + np.vectorize(erf)(z / sqrt(2.0)))
    np.testing.assert_allclose(act.numpy().astype(np.float64), gelu, rtol=2.0 ** -7, atol=1e-2)
    assert "tile.cp_async" in jf.inspect_ir("tile")
    if _C._cuda_capability(0) == (9, 0):
        # wgmma on Hopper, either operand transposed too (a read MN-major).
        assert "tsr::WgLayout" in jf.inspect_ir("target")
    for _ in range(3):
        again = jf(A, B, C)
        np.testing.assert_array_equal(again[0].numpy().view(np.uint16), prod.numpy().view(np.uint16))
        np.testing.assert_array_equal(again[1].numpy().view(np.uint16), act.numpy().view(np.uint16))
    # The product alone stores its accumulator straight from the registers
    # (pairs of bf16 as one 4-byte store where a row allows, element by
    # element in rows an odd N leaves unaligned): the same bits.
    plain = tessera.jit(lambda x, y: ops.matmul(ops.transpose(x, (1, 0)) if ta else x,
                                                ops.transpose(y, (1, 0)) if tb else y))
    np.testing.assert_array_equal(plain(A, B).numpy().view(np.uint16), prod.numpy().view(np.uint16))


@needs_gpu
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_large_light_products_take_wide_staged_tiles(rng, monkeypatch, ta, tb):
    """Products of at least 2^23 elements whose epilogue is adds and casts
    take 128 x 256 tiles (one block per SM): ragged edges in M, N and K,
    either operand transposed, an fp32 result and a bf16 one with a
    residual, against float64 numpy, and bit for bit over repeated runs."""
    # The PTX path's staged tiles: where tileiras is installed the default mapper would send these
    # products to CUDA Tile IR instead.
    monkeypatch.setenv("TESSERA_CUDA_TILE_DEFAULT", "0")
    m, k, n = 4100, 200, 2090
    a = _bf16(rng.standard_normal((k, m) if ta else (m, k)))
    b = _bf16(rng.standard_normal((n, k) if tb else (k, n)))
    r = _bf16(rng.standard_normal((m, n)))
    p = "bf16 @accum(fp32)"
    A, B, R = (tessera.tensor(v, p).to("cuda:0") for v in (a, b, r))

    # fp32 products of exact casts of bf16 run as bf16 products with an fp32 result.
    f32 = "fp32 @accum(fp32)"
    wide = tessera.jit(lambda x, y: ops.gemm(ops.cast(x, f32), ops.cast(y, f32), transpose_a=ta, transpose_b=tb))
    residual = tessera.jit(lambda x, y, z: ops.gemm(x, y, transpose_a=ta, transpose_b=tb) + z)
    a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
    b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
    want = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    got = wide(A, B).numpy().astype(np.float64)
    assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-30), f"max error {np.max(np.abs(got - want) / scale)}"
    z = residual(A, B, R)
    want_z = want + r.astype(np.float64)
    # The product rounds to bf16 before the residual is added, and the sum again.
    bound = 2.0 ** -8 * (np.abs(want) + np.abs(want_z)) + 1e-5 * scale + 1e-30
    assert np.all(np.abs(z.numpy().astype(np.float64) - want_z) <= bound)
    for jf in (wide, residual):
        assert "tile = [128, 256, 64]" in jf.inspect_ir("schedule")
    np.testing.assert_array_equal(residual(A, B, R).numpy().view(np.uint16), z.numpy().view(np.uint16))


@needs_gpu
def test_large_products_with_a_tabulated_gelu_take_wide_staged_tiles(rng):
    """A bias and a GELU read from its table are a light epilogue: the
    product's kernel, storing z = x w + b and gelu(z), takes 128 x 256 tiles
    at 2^23 elements or more (ragged edges), against float64 numpy, and bit
    for bit over repeated runs."""
    from math import erf, sqrt
    m, k, n = 4100, 200, 2090
    a, w = _bf16(rng.standard_normal((m, k))), _bf16(rng.standard_normal((k, n)) * 0.1)
    bias = _bf16(rng.standard_normal(n))
    p = "bf16 @accum(fp32)"
    A, W, C = (tessera.tensor(v, p).to("cuda:0") for v in (a, w, bias))

    def step(x, y, c):
        z = ops.matmul(x, y) + c
        return z, ops.gelu(z)

    jf = tessera.jit(step)
    z, h = jf(A, W, C)
    schedule = jf.inspect_ir("schedule")
    assert "tile = [128, 256, 64]" in schedule and "graph.lookup" in schedule, schedule
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    prod = a64 @ w64
    want = prod + bias.astype(np.float64)
    scale = np.abs(a64) @ np.abs(w64)
    zf = z.numpy().astype(np.float64)
    # The product rounds to bf16 (2^-8 of |prod|), then the sum with the
    # bias (2^-8 of |z|); fp32 accumulation adds at most 200 2^-24 of the
    # scale. Twice that bound.
    bound = 2.0 ** -7 * (np.abs(prod) + np.abs(want)) + 2.4e-5 * scale + 1e-30
    assert np.all(np.abs(zf - want) <= bound), f"max error {np.max(np.abs(zf - want) / bound)} of the bound"
    # GELU of the stored z, rounded once to bf16 (the table holds those bits).
    gelu = 0.5 * zf * (1.0 + np.vectorize(erf)(zf / sqrt(2.0)))
    np.testing.assert_allclose(h.numpy().astype(np.float64), gelu, rtol=2.0 ** -7, atol=1e-30)
    for _ in range(3):
        z2, h2 = jf(A, W, C)
        np.testing.assert_array_equal(z2.numpy().view(np.uint16), z.numpy().view(np.uint16))
        np.testing.assert_array_equal(h2.numpy().view(np.uint16), h.numpy().view(np.uint16))


def test_memory_stats_name_bad_devices():
    with pytest.raises(tessera.DeviceError, match="device must be 'cuda:N', got 'cpu'"):
        tessera.runtime.memory_stats("cpu")
    with pytest.raises(tessera.DeviceError, match="does not exist"):
        tessera.runtime.reset_peak_memory("cuda:99")
    with pytest.raises(tessera.DeviceError, match="empty_cache: device must be 'cuda:N', got 'cpu'"):
        tessera.runtime.empty_cache("cpu")


@needs_gpu
def test_memory_stats_follow_allocations():
    rt = tessera.runtime
    before = rt.memory_stats("cuda:0")
    x = tessera.tensor(np.ones((1024, 1024), np.float32)).to("cuda:0")
    rt.reset_peak_memory("cuda:0")
    during = rt.memory_stats("cuda:0")
    assert during["bytes_in_use"] >= before["bytes_in_use"] + (4 << 20)
    assert during["peak_in_use"] == during["bytes_in_use"]
    del x
    after = rt.memory_stats("cuda:0")
    assert after["bytes_in_use"] <= during["bytes_in_use"] - (4 << 20)
    assert after["peak_in_use"] == during["peak_in_use"]
    assert after["frees"] > during["frees"]


@needs_gpu
def test_a_run_holds_intermediates_only_while_a_later_kernel_reads_them(rng):
    """Four products whose intermediates have distinct shapes (so no slot is
    shared): h1 [n, 2n], h2 [n, 3n], h3 [n, 4n], result [n, n]. A run that
    kept every intermediate to the end would peak at 10 n^2 floats above its
    inputs; dropping each after its last reader leaves at most 7 (h2 and h3
    live together; the result may take h1's freed block of 2)."""
    rt = tessera.runtime
    n = 1024
    x, w1, w2, w3, w4 = (tessera.tensor(rng.standard_normal(s).astype(np.float32) / 16).to("cuda:0")
                         for s in ((n, n), (n, 2 * n), (2 * n, 3 * n), (3 * n, 4 * n), (4 * n, n)))
    f = tessera.jit(lambda x, w1, w2, w3, w4: ops.matmul(ops.matmul(ops.matmul(ops.matmul(x, w1), w2), w3), w4))
    f(x, w1, w2, w3, w4).numpy()  # compiled, and the fault record's block cached
    # Blocks earlier tests left in the cache would be handed out up to twice a request's size
    # (best fit), so the figure would depend on which tests ran before this one.
    rt.empty_cache("cuda:0")
    assert rt.memory_stats("cuda:0")["bytes_cached"] == 0
    base = rt.memory_stats("cuda:0")["bytes_in_use"]
    rt.reset_peak_memory("cuda:0")
    got = f(x, w1, w2, w3, w4).numpy()
    peak = rt.memory_stats("cuda:0")["peak_in_use"] - base
    assert peak <= 7 * n * n * 4 + (1 << 20), f"peak {peak / (n * n * 4):.2f} n^2 floats above the inputs"
    h = [a.numpy().astype(np.float64) for a in (x, w1, w2, w3, w4)]
    want = h[0] @ h[1] @ h[2] @ h[3] @ h[4]
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


@needs_gpu
@pytest.mark.parametrize("precision", ["full", "storage"])
def test_bf16_mlp_gradients_run_as_bf16_products_on_the_gpu(rng, precision):
    """Full precision: autodiff's fp32 cotangents meet bf16 primals in the
    backward products; on CUDA those run as bf16 tensor-core products (the
    cotangent split into three exact bf16 pieces), which keeps fp32 accuracy:
    the gradients agree with the CPU executable's fp32 products to a few fp32
    ulps of the sums' magnitudes. precision="storage" keeps the cotangents
    bf16: plain bf16 products with bf16 results, no pieces, within bf16
    roundings of the CPU's. Both repeat bit for bit."""
    p = "bf16 @accum(fp32)"
    T, D, H = 96, 128, 256
    host = [_bf16(rng.standard_normal(s) * sc) for s, sc in
            (((T, D), 1.0), ((D, H), D ** -0.5), ((H,), 0.1), ((H, D), H ** -0.5), ((T, D), 1.0))]

    def loss(x, w1, b1, w2, g):
        return ops.sum(ops.matmul(ops.gelu(ops.matmul(x, w1) + b1), w2) * g)

    step = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2, 3), precision=precision))
    cpu = step(*(tessera.tensor(h, p) for h in host))
    dev = [tessera.tensor(h, p).to("cuda:0") for h in host]
    gpu = step(*dev)
    full = precision == "full"
    assert ("out = policy<fp32" in step.inspect_ir("schedule")) == full
    for name, got, want in zip(("dx", "dw1", "db1", "dw2"), gpu, cpu):
        assert str(got.policy) == ("fp32 @accum(fp32)" if full else p), name
        g, w = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
        # The forward's bf16 products may round an element differently on
        # tensor cores (one bf16 ulp of h), which the backward carries on.
        assert np.max(np.abs(g - w)) <= (2.0 ** -7 if full else 2.0 ** -6) * np.max(np.abs(w)), name
    again = step(*dev)
    bits = np.uint32 if full else np.uint16
    for got, rerun in zip(gpu, again):
        np.testing.assert_array_equal(got.numpy().view(bits), rerun.numpy().view(bits))


@needs_gpu
def test_rows_held_in_registers_on_the_gpu_match_the_cpu(rng):
    """bf16 @accum(fp32) rows of whole blocks (2048: 128 lanes, each holding
    its strand in registers; 16384: 512 lanes holding two strands each, or
    1024 lanes of one for the gradients) and of a partial last block
    (1000), with NaN,
    infinite, all-zero and widely spread rows: softmax (which keeps e in
    registers), rmsnorm and layernorm with their parameters, and the
    gradients (whose bf16 -> fp32 casts run inside the normalization) give
    the CPU executable's bits on the GPU. The gradients are fp32, whose NaNs
    keep the payload each processor's arithmetic gives them (the GPU's
    0x7FFFFFFF, the CPU's quiet NaN), so NaNs are compared as NaNs, as in
    test_this_stops_kernels_on_the_gpu_match_the_cpu; bf16 results encode
    every NaN as one code and are compared whole."""
    policy = "bf16 @accum(fp32)"
    for n in (2048, 1000):
        x = rng.standard_normal((12, n)) * 3
        x[1, 5] = np.nan
        x[2, 7] = np.inf
        x[3, :] = 0.0
        x[4, :] = -np.inf
        x[5, :] = rng.standard_normal(n) * np.exp2(rng.integers(-130, 10, n))
        x[6, :] = 1e-30 * rng.standard_normal(n)
        X = tessera.tensor(x.astype(np.float32), policy)
        T = tessera.tensor(rng.standard_normal((12, n)).astype(np.float32), policy)
        G = tessera.tensor(rng.standard_normal(n).astype(np.float32), policy)
        B = tessera.tensor(rng.standard_normal(n).astype(np.float32), policy)
        fns = (lambda a, t, g, b: ops.softmax_safe(a, axis=-1),
               lambda a, t, g, b: ops.rmsnorm_safe(a, g, axis=-1, eps=1e-6),
               lambda a, t, g, b: ops.layernorm_safe(a, g, b, axis=-1, eps=1e-5),
               tessera.grad(lambda a, t, g, b: ops.sum(ops.softmax_safe(a, axis=-1) * t)),
               tessera.grad(lambda a, t, g, b: ops.sum(ops.rmsnorm_safe(a, axis=-1, eps=1e-6) * t)),
               tessera.grad(lambda a, t, g, b: ops.sum(ops.layernorm_safe(a, axis=-1, eps=1e-5) * t)))
        for k, fn in enumerate(fns):
            j = tessera.jit(fn)
            got = j(X.to("cuda:0"), T.to("cuda:0"), G.to("cuda:0"), B.to("cuda:0")).to("cpu")
            want = j(X, T, G, B)
            g, w = got.codes(), want.codes()
            if got.dtype == "fp32":
                nan = np.isnan(want.numpy())
                np.testing.assert_array_equal(np.isnan(got.numpy()), nan, err_msg=f"rows of {n}, function {k}")
                g, w = g[~nan], w[~nan]
            np.testing.assert_array_equal(g, w, err_msg=f"rows of {n}, function {k}")
    # fp32 results keep what a bf16 rounding hides: the quotients of elements
    # far below the row's largest and the signs of zeros, which the common
    # row's reciprocal quotient gets wrong and the lane writes again.
    x = rng.standard_normal((6, 2048)) * np.exp2(rng.integers(-130, 10, (6, 2048)))
    x[:, 3::7] = np.copysign(0.0, rng.standard_normal((6, len(range(3, 2048, 7)))))
    X = tessera.tensor(x.astype(np.float32), "fp32")
    for fn in (lambda a: ops.rmsnorm_safe(a, axis=-1), lambda a: ops.layernorm_safe(a, axis=-1)):
        j = tessera.jit(fn)
        np.testing.assert_array_equal(j(X.to("cuda:0")).to("cpu").codes(), j(X).codes(), err_msg="spread fp32 rows")
    # The longest held row: 512 lanes of two strands (softmax, rmsnorm,
    # layernorm), and the softmax's gradient fused through y's cast to fp32
    # (1024 lanes of one strand).
    X = tessera.tensor((rng.standard_normal((3, 16384)) * 3).astype(np.float32), policy)
    T = tessera.tensor(rng.standard_normal((3, 16384)).astype(np.float32), policy)
    for fn in (lambda a, t: ops.softmax_safe(a, axis=-1), lambda a, t: ops.rmsnorm_safe(a, axis=-1),
               lambda a, t: ops.layernorm_safe(a, axis=-1),
               tessera.grad(lambda a, t: ops.sum(ops.softmax_safe(a, axis=-1) * t))):
        j = tessera.jit(fn)
        got, want = j(X.to("cuda:0"), T.to("cuda:0")).to("cpu"), j(X, T)
        np.testing.assert_array_equal(got.codes(), want.codes(), err_msg="rows of 16384")


@needs_gpu
@pytest.mark.parametrize("ahead", ["", "1"])
def test_held_rows_prefetching_rows_ahead_match_the_cpu(rng, monkeypatch, ahead):
    """Held rmsnorm and layernorm rows and the rmsnorm gradient ask the L2
    for the row 256 rows further on (TESSERA_ROW_PREFETCH, docs/design/0037):
    with 700 rows, most of those requests lie inside the tensor and the last
    ones past its end (clipped); with 1, each asks for its neighbour. The
    results are the CPU executable's bits either way."""
    if ahead:
        monkeypatch.setenv("TESSERA_ROW_PREFETCH", ahead)
    policy = "bf16 @accum(fp32)"
    X = tessera.tensor((rng.standard_normal((700, 1024)) * 3).astype(np.float32), policy)
    T = tessera.tensor(rng.standard_normal((700, 1024)).astype(np.float32), policy)
    for k, fn in enumerate((lambda a, t: ops.rmsnorm_safe(a, axis=-1, eps=1e-6),
                            lambda a, t: ops.layernorm_safe(a, axis=-1, eps=1e-5),
                            tessera.grad(lambda a, t: ops.sum(ops.rmsnorm_safe(a, axis=-1, eps=1e-6) * t)))):
        j = tessera.jit(fn)
        got = j(X.to("cuda:0"), T.to("cuda:0")).to("cpu")
        if not ahead:
            assert "prefetch_l2" in j.inspect_ir("target"), f"function {k}"
        monkeypatch.delenv("TESSERA_ROW_PREFETCH", raising=False)  # the CPU has no held rows to prefetch
        want = j(X, T)
        if ahead:
            monkeypatch.setenv("TESSERA_ROW_PREFETCH", ahead)
        np.testing.assert_array_equal(got.codes(), want.codes(), err_msg=f"function {k}, rows ahead {ahead or 256}")


@needs_gpu
@pytest.mark.parametrize("capture", [False, True])
def test_held_rows_read_views_at_odd_offsets_through_a_copy(rng, capture):
    """Held rows move runs of two adjacent strands as aligned words
    (docs/design/0053), so a kernel's buffers must start 16-byte aligned. A
    contiguous view starting 2 or 6 bytes into its buffer (a slice of a flat
    bf16 tensor, reshaped), passed as the argument or made inside the
    function, is copied before the kernels read it (before a run plan or a
    CUDA graph records its address): rmsnorm and layernorm with gamma give
    the CPU executable's bits on every call, misaligned or not."""
    policy = "bf16 @accum(fp32)"
    rows, n = 48, 1024
    flat = tessera.tensor(rng.standard_normal(rows * n + 8).astype(np.float32), policy)
    gamma = tessera.tensor(rng.standard_normal(n + 8).astype(np.float32), policy)
    size = rows * n

    def outside(x, g):
        return ops.rmsnorm_safe(x, g, axis=-1, eps=1e-6)

    def inside(flat_x, g_flat, start):
        x = ops.reshape(flat_x[start:start + size], (rows, n))
        return ops.layernorm_safe(x, g_flat[start:start + n], axis=-1, eps=1e-5)

    on_cpu = tessera.jit(outside)
    on_gpu = tessera.jit(outside, capture_graph=capture)
    flat_gpu, gamma_gpu = flat.to("cuda:0"), gamma.to("cuda:0")
    for start in (1, 0, 3, 1):
        x = ops.reshape(flat_gpu[start:start + size], (rows, n))
        got = on_gpu(x, gamma_gpu[start:start + n]).to("cpu")
        want = on_cpu(ops.reshape(flat[start:start + size], (rows, n)), gamma[start:start + n])
        np.testing.assert_array_equal(got.codes(), want.codes(), err_msg=f"argument views at {start}")
    for start in (1, 0, 3):
        fn_cpu = tessera.jit(lambda a, g: inside(a, g, start))
        fn_gpu = tessera.jit(lambda a, g: inside(a, g, start), capture_graph=capture)
        want = fn_cpu(flat, gamma)
        for _ in range(2):
            got = fn_gpu(flat_gpu, gamma_gpu).to("cpu")
            np.testing.assert_array_equal(got.codes(), want.codes(), err_msg=f"views inside at {start}")


@needs_gpu
def test_storage_precision_norm_gradients_match_the_cpu(rng):
    """jit(grad(..., precision="storage")) of rmsnorm, layernorm (with gamma
    and beta) and softmax on bf16 rows of 1024 (held on the GPU) and 1000
    (read in passes): the row kernels store the bf16 gradient themselves
    (docs/design/0038). The GPU gives the CPU executable's bits, over 10 runs."""
    policy = "bf16 @accum(fp32)"
    for cols in (1024, 1000):
        X = tessera.tensor((rng.standard_normal((300, cols)) * 3).astype(np.float32), policy)
        T = tessera.tensor(rng.standard_normal((300, cols)).astype(np.float32), policy)
        W = tessera.tensor(rng.standard_normal(cols).astype(np.float32), policy)
        B = tessera.tensor(rng.standard_normal(cols).astype(np.float32), policy)
        cases = (
            (lambda a, t, w, b: ops.sum(ops.rmsnorm_safe(a, axis=-1, eps=1e-6) * t), (0,)),
            (lambda a, t, w, b: ops.sum(ops.layernorm_safe(a, w, b, axis=-1, eps=1e-5) * t), (0, 2, 3)),
            (lambda a, t, w, b: ops.sum(ops.softmax_safe(a, axis=-1) * t), (0,)),
        )
        for k, (loss, argnums) in enumerate(cases):
            j = tessera.jit(tessera.grad(loss, argnums=argnums, precision="storage"))
            want = j(X, T, W, B)
            want = want if isinstance(want, (tuple, list)) else (want,)
            dev = [v.to("cuda:0") for v in (X, T, W, B)]
            for run in range(10):
                got = j(*dev)
                got = got if isinstance(got, (tuple, list)) else (got,)
                for n, (g, w) in enumerate(zip(got, want)):
                    assert str(g.policy) == policy
                    np.testing.assert_array_equal(g.to("cpu").codes(), w.codes(),
                                                  err_msg=f"cols {cols}, function {k}, gradient {n}, run {run}")


@needs_gpu
def test_tabulated_chains_on_the_gpu_match_the_cpu_bit_for_bit():
    """gelu(x + b) + r in bf16 and its jit(grad), GELU and GELU' read from
    tables (graph.lookup, tile.code): every code of bf16 through GELU, and
    the chain's forward and gradients, the same bits on the GPU as on the
    CPU executable."""
    import ml_dtypes
    p = "bf16 @accum(fp32)"
    every = tessera.tensor(np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(256, 256), p)
    gelu = tessera.jit(lambda x: ops.gelu(x))
    want = gelu(every)
    got = gelu(every.to("cuda:0"))
    assert "graph.lookup" in gelu.inspect_ir("schedule")
    np.testing.assert_array_equal(np.asarray(got.to("cpu").codes()), np.asarray(want.codes()))

    rng = np.random.default_rng(9)
    x = tessera.tensor(rng.standard_normal((512, 1000)) * 3, p)
    b = tessera.tensor(rng.standard_normal(1000), p)
    r = tessera.tensor(rng.standard_normal((512, 1000)), p)
    chain = lambda x, b, r: ops.gelu(x + b) + r
    step = tessera.grad(lambda x, b, r: ops.sum(chain(x, b, r)), argnums=(0, 1))
    for fn in (chain, step):
        jf = tessera.jit(fn)
        want = jf(x, b, r)
        got = jf(x.to("cuda:0"), b.to("cuda:0"), r.to("cuda:0"))
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            np.testing.assert_array_equal(np.asarray(g.to("cpu").codes()), np.asarray(w.codes()))


@needs_gpu
def test_views_inside_a_function_feed_kernels_on_the_device(rng):
    """The elementwise kernel of f reads a strided view (a transpose, then a
    slice with a step: two view steps), which is gathered on the device by a
    kernel, without the host; in a CUDA graph, by a node of the graph, set
    anew at each replay, which sets the graph's nodes without walking the
    steps (the gather is a recorded launch, docs/design/0046). The results
    are the CPU executable's bits and numpy's values, for every call."""
    def f(x):
        return ops.transpose(x, (1, 0))[:, ::2] * 2.0 + 1.0

    on_cpu = tessera.jit(f)
    for capture in (False, True):
        on_gpu = tessera.jit(f, capture_graph=capture)
        hosts = [rng.standard_normal((300, 130)).astype(np.float32) for _ in range(3)]
        outs = [on_gpu(tessera.tensor(h).to("cuda:0")) for h in hosts]
        for host, got in zip(hosts, outs):
            assert got.device == "cuda:0"
            np.testing.assert_array_equal(got.to("cpu").numpy(), on_cpu(tessera.tensor(host)).numpy())
            np.testing.assert_array_equal(got.to("cpu").numpy(), host.T[:, ::2] * np.float32(2) + np.float32(1))
        assert on_gpu.executable().graphs == (1 if capture else 0)
        assert on_gpu.executable().direct_graphs == (1 if capture else 0)


@needs_gpu
def test_short_column_sums_on_the_gpu_match_the_cpu(rng):
    """Sums and means over a leading axis of at most 16 elements (a batch dim summed away, as in
    a batched product's weight gradient) take the short column form, the canonical order written
    out per column (docs/design/0050): the GPU gives the CPU executable's bits, fp32 with NaN,
    infinities and zeros, and bf16 with a consumer; 17 rows keep the loop form."""
    for rows in (1, 2, 5, 16, 17):
        x = rng.standard_normal((rows, 64, 300)) * 3
        x[0, 0, :3] = (np.nan, np.inf, -0.0)
        for policy in ("fp32", "bf16 @accum(fp32)"):
            X = tessera.tensor(x.astype(np.float32), policy)
            j = tessera.jit(lambda a: (ops.sum(a, axis=0), ops.mean(a, axis=0) * 0.5))
            got, want = j(X.to("cuda:0")), j(X)
            for g, w in zip(got, want):
                g, w = g.to("cpu"), w
                # fp32 NaNs keep each processor's payload; compare them as NaNs (bf16 has one NaN code).
                nan = np.isnan(w.numpy())
                np.testing.assert_array_equal(np.isnan(g.numpy()), nan, err_msg=f"rows {rows}, {policy}")
                np.testing.assert_array_equal(g.codes()[~nan], w.codes()[~nan], err_msg=f"rows {rows}, {policy}")


@needs_gpu
def test_run_plans_on_the_gpu_give_the_walks_bits(rng, monkeypatch):
    """Plain calls after the first replay a run plan (docs/design/0048): the
    generated kernels' parameter blocks are launched again with new buffer
    addresses written in; GEMMs with tensor maps are prepared anew. Every
    result is the walk's bits (TESSERA_RUN_PLANS=0), and each call's result
    buffers are fresh."""
    def mlp_loss(x, w1, w2):
        return ops.sum(ops.gelu(ops.matmul(ops.gelu(ops.matmul(x, w1)), w2)))

    def dev(shape, scale=1.0):
        return tessera.tensor((rng.standard_normal(shape) * scale).astype(np.float32)).to("cuda:0")

    cases = [
        (lambda x: x * 2.0 + 1.0, lambda: [dev((4096,))]),
        (lambda x: ops.softmax_safe(x), lambda: [dev((64, 1000))]),
        (lambda x: ops.sum(x, axis=0), lambda: [dev((300, 70))]),
        (tessera.grad(mlp_loss, argnums=(1, 2)), lambda: [dev((128, 256)), dev((256, 512), 0.05), dev((512, 128), 0.05)]),
    ]
    for fn, make in cases:
        f = tessera.jit(fn)
        f(*make())
        exe = f.executable()
        assert exe.run_plans == 1, exe.plan_refusals
        inputs = [make() for _ in range(3)]
        planned = [exe.run(a) for a in inputs]
        monkeypatch.setenv("TESSERA_RUN_PLANS", "0")
        walked = [exe.run(a) for a in inputs]
        monkeypatch.delenv("TESSERA_RUN_PLANS")
        for p, w in zip(planned, walked):
            for pr, wr in zip(p, w):
                np.testing.assert_array_equal(np.asarray(pr.to("cpu").codes()), np.asarray(wr.to("cpu").codes()))
        first = np.asarray(planned[0][0].to("cpu").codes())
        assert not np.array_equal(first, np.asarray(planned[1][0].to("cpu").codes()))
