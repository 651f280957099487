"""full / zeros / ones / iota against numpy, eager and under @jit, and their errors."""

import numpy as np
import pytest

import tessera
from tessera import ops


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8_e4m3", "int8", "int64"])
def test_iota_matches_numpy(dtype):
    for shape, axis in [((5,), 0), ((3, 4), 1), ((2, 3, 4), -3), ((0, 3), 1)]:
        out = ops.iota(shape, axis=axis, dtype=dtype)
        ax = axis % len(shape)
        expected = np.broadcast_to(
            np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))]), shape)
        assert out.shape == shape
        np.testing.assert_array_equal(out.numpy().astype(np.float64), expected)


def test_iota_rejects_indices_the_dtype_cannot_hold():
    with pytest.raises(tessera.DtypeError):
        ops.iota((40,), dtype="fp8_e4m3")  # 17 is not an fp8_e4m3 value
    with pytest.raises(tessera.ShapeError):
        ops.iota((3, 4), axis=2)


def test_full_zeros_ones():
    np.testing.assert_array_equal(ops.full((2, 3), 2.5, "fp16").numpy(), np.full((2, 3), 2.5, np.float16))
    np.testing.assert_array_equal(ops.zeros(4).numpy(), np.zeros(4, np.float32))
    np.testing.assert_array_equal(ops.ones((2, 2), "int32").numpy(), np.ones((2, 2), np.int32))
    with pytest.raises(tessera.ArgumentError):
        ops.full((2,), 0.1, "fp16")  # 0.1 is not exact in fp16: use tessera.tensor to round
    with pytest.raises(tessera.ArgumentError):
        ops.full((-1,), 1.0)


def test_creation_inside_jit_records_ops():
    @tessera.jit
    def f(x):
        return x + ops.iota(x.shape, axis=0, dtype="fp32") * ops.full(x.shape, 2.0)

    x = tessera.tensor(np.zeros(5, np.float32))
    np.testing.assert_array_equal(f(x).numpy(), np.arange(5) * 2.0)
    raw = f.inspect_ir("graph", optimized=False)
    assert "graph.iota" in raw and "graph.constant" in raw
