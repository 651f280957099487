"""Chains of elementwise ops of one narrow float value, read from tables.

The compiled pipeline (tabulate-functions, docs/design/0030) replaces a
chain with a transcendental op, computed from one value of at most 16 bits
alone, by graph.lookup of a table the reference executor fills over every
code. These tests sweep every code of the input through the compiled path
and compare the bits with the reference executor, which evaluates the chain
op by op; NaN, infinities, zeros of both signs and subnormals are among the
codes."""
import ml_dtypes
import numpy as np
import pytest

import tessera

ops = tessera.ops


def _run(fn, args, backend, monkeypatch, tabulate="1"):
    monkeypatch.setenv("TESSERA_BACKEND", backend)
    monkeypatch.setenv("TESSERA_TABULATE", tabulate)
    f = tessera.jit(fn)
    out = f(*args)
    return (out if isinstance(out, (tuple, list)) else [out]), f


def _every_code(dtype, policy):
    """Every code of `dtype` once, as a [codes / 64, 64] tensor."""
    bits = np.dtype(dtype).itemsize * 8
    codes = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8).view(dtype)
    return tessera.tensor(codes.reshape(-1, 64), policy)


CHAINS = {
    "gelu": lambda x: ops.gelu(x),
    "gelu_tanh": lambda x: ops.gelu(x, approximate="tanh"),
    "silu_scaled": lambda x: ops.silu(x) * 3.0 + 1.0,
    "sigmoid": lambda x: ops.sigmoid(x),
    "tanh_of_exp": lambda x: ops.tanh(ops.exp(x) - 2.0),
    "erf_fp32": lambda x: ops.erf(ops.cast(x, "fp32")),
}


@pytest.mark.parametrize("dtype,policy", [(ml_dtypes.bfloat16, "bf16 @accum(fp32)"), (np.float16, "fp16 @accum(fp32)"),
                                          (ml_dtypes.float8_e4m3fn, "fp8_e4m3 @accum(fp32)")])
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_tabulated_chain_has_the_reference_bits_for_every_code(dtype, policy, chain, monkeypatch):
    x = _every_code(dtype, policy)
    fn = CHAINS[chain]
    (got,), f = _run(fn, [x], "compiled", monkeypatch)
    assert "graph.lookup" in f.inspect_ir("schedule")
    (want,), _ = _run(fn, [x], "reference", monkeypatch)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got.codes()), np.asarray(want.codes()))


def test_gelu_bias_residual_chain_and_its_gradient_match_the_reference_and_the_untabulated_kernels(monkeypatch):
    """The benchmark's chain gelu(x + b) + r in bf16, forward and jit(grad):
    the table's kernels, the chain's own kernels (TESSERA_TABULATE=0) and the
    reference give the same bits."""
    rng = np.random.default_rng(3)
    p = "bf16 @accum(fp32)"
    x = tessera.tensor(rng.standard_normal((96, 130)) * 3, p)
    b = tessera.tensor(rng.standard_normal(130), p)
    r = tessera.tensor(rng.standard_normal((96, 130)), p)

    def loss(x, b, r):
        return ops.sum(ops.gelu(x + b) + r)

    step = tessera.grad(loss, argnums=(0, 1))
    for fn in (lambda x, b, r: ops.gelu(x + b) + r, step):
        got, f = _run(fn, [x, b, r], "compiled", monkeypatch)
        assert "graph.lookup" in f.inspect_ir("schedule")
        plain, g = _run(fn, [x, b, r], "compiled", monkeypatch, tabulate="0")
        assert "graph.lookup" not in g.inspect_ir("schedule")
        want, _ = _run(fn, [x, b, r], "reference", monkeypatch)
        for a, c, w in zip(got, plain, want):
            np.testing.assert_array_equal(np.asarray(a.codes()), np.asarray(w.codes()))
            np.testing.assert_array_equal(np.asarray(c.codes()), np.asarray(w.codes()))


def test_gelu_matches_float64_within_one_bf16_rounding(monkeypatch):
    """An independent check of the table's values: GELU of every finite bf16
    code against float64 numpy (erf by math.erf), within one bf16 ulp."""
    import math
    x = _every_code(ml_dtypes.bfloat16, "bf16 @accum(fp32)")
    (got,), _ = _run(ops.gelu, [x], "compiled", monkeypatch)
    xs = np.asarray(x.numpy(), dtype=np.float64).ravel()
    ys = np.asarray(got.numpy(), dtype=np.float64).ravel()
    finite = np.isfinite(xs) & (np.abs(xs) < 1e30)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xs[finite]])
    ulp = np.maximum(np.abs(want) * 2.0**-7, 2.0**-133)  # 2^-133: the smallest bf16 step
    assert np.all(np.abs(ys[finite] - want) <= ulp)
    assert np.isnan(ys[np.isnan(xs)]).all()


def test_an_fp32_chain_and_a_chain_of_two_inputs_are_not_tabulated(monkeypatch):
    rng = np.random.default_rng(4)
    x = tessera.tensor(rng.standard_normal((8, 8)), "fp32")
    y = tessera.tensor(rng.standard_normal((8, 8)), "bf16 @accum(fp32)")
    z = tessera.tensor(rng.standard_normal((8, 8)), "bf16 @accum(fp32)")
    _, f = _run(lambda x: ops.exp(x), [x], "compiled", monkeypatch)
    assert "graph.lookup" not in f.inspect_ir("schedule")
    _, g = _run(lambda y, z: ops.pow(y, z), [y, z], "compiled", monkeypatch)
    assert "graph.lookup" not in g.inspect_ir("schedule")


def test_inspect_ir_shows_a_table_elided(monkeypatch):
    """inspect_ir("schedule") prints a table's first values and its length,
    not 65536 numbers."""
    import ml_dtypes
    x = tessera.tensor(np.zeros((4, 4), ml_dtypes.bfloat16), "bf16 @accum(fp32)")
    _, f = _run(lambda x: ops.gelu(x), [x], "compiled", monkeypatch)
    text = f.inspect_ir("schedule")
    assert "... 65536 values]>" in text
    assert len(text) < 10_000, len(text)


def test_an_unknown_tabulate_setting_is_an_error_naming_it(monkeypatch):
    x = tessera.tensor(np.zeros(4, np.float32), "bf16 @accum(fp32)")
    monkeypatch.setenv("TESSERA_TABULATE", "off")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_TABULATE is 'off'; expected '1'"):
        tessera.jit(lambda x: ops.exp(x))(x)
