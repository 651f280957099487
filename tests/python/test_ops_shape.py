"""tessera.ops shape ops against numpy: reshape, transpose/permute, broadcast_to, slice, concat,
split, split_qkv, gather. Data movement must keep every encoding (NaN payloads, -0.0, packed
fp4/int4 nibbles, fp8 codes) bit for bit and keep the policy."""

import numpy as np
import pytest

import tessera
from tessera import ops

POLICIES = ["fp32", "fp64", "fp16", "bf16 @accum(fp32)", "fp8_e4m3 @accum(fp32)", "int32"]


def make(rng, shape, policy="fp32"):
    """A tensor of fresh random values and the float64 values it actually holds."""
    values = rng.standard_normal(shape) * 4
    if policy.startswith("int"):
        values = np.round(values)
    t = tessera.tensor(values, policy)
    return t, t.numpy().astype(np.float64)


def from_codes(codes, policy):
    codes = np.asarray(codes)
    return tessera._C._tensor_from_codes(codes.ravel().tolist(), list(codes.shape), policy)


def canonical(policy):
    """The policy text a tensor created with `policy` reports."""
    return str(tessera.tensor(np.zeros(0), policy).policy)


def check(t, want, policy):
    assert t.shape == want.shape
    assert str(t.policy) == canonical(policy)
    np.testing.assert_array_equal(t.numpy().astype(np.float64), want)


@pytest.mark.parametrize("policy", POLICIES)
def test_reshape_matches_numpy(rng, policy):
    x, xv = make(rng, (4, 6), policy)
    for shape in [(24,), (2, 3, 4), (6, -1), (-1,), (1, 24, 1), (3, 2, 4)]:
        check(ops.reshape(x, shape), xv.reshape(shape), policy)
    check(x.reshape(8, 3), xv.reshape(8, 3), policy)
    e, ev = make(rng, (0, 5), policy)
    check(ops.reshape(e, (5, 0, 3)), ev.reshape(5, 0, 3), policy)


def test_reshape_errors(rng):
    x, _ = make(rng, (4, 6))
    with pytest.raises(tessera.ShapeError, match="24 vs 25 elements"):
        ops.reshape(x, (5, 5))
    with pytest.raises(tessera.ShapeError, match="only one dim may be -1"):
        ops.reshape(x, (-1, -1))
    with pytest.raises(tessera.ShapeError):
        ops.reshape(x, (5, -1))


@pytest.mark.parametrize("policy", POLICIES)
def test_transpose_and_permute(rng, policy):
    x, xv = make(rng, (2, 3, 4, 5), policy)
    check(ops.transpose(x), xv.transpose(), policy)
    for _ in range(4):
        perm = [int(p) for p in rng.permutation(4)]
        check(ops.transpose(x, perm), xv.transpose(perm), policy)
        check(ops.permute(x, perm), xv.transpose(perm), policy)
    check(ops.transpose(x, (-1, 0, 1, 2)), xv.transpose(3, 0, 1, 2), policy)
    check(x.T, xv.T, policy)
    with pytest.raises(tessera.ShapeError, match="not a permutation"):
        ops.transpose(x, (0, 0, 1, 2))
    with pytest.raises(tessera.ShapeError, match="rank 4"):
        ops.permute(x, (1, 0))


def test_broadcast_to(rng):
    x, xv = make(rng, (3, 1))
    for shape in [(3, 4), (2, 3, 4), (3, 1), (5, 3, 0)]:
        check(ops.broadcast_to(x, shape), np.broadcast_to(xv, shape), "fp32")
    s, sv = make(rng, ())
    check(ops.broadcast_to(s, 3), np.broadcast_to(sv, 3), "fp32")
    with pytest.raises(tessera.ShapeError, match="cannot broadcast"):
        ops.broadcast_to(x, (4, 4))
    with pytest.raises(tessera.ShapeError):
        ops.broadcast_to(x, (1,))


def test_slice_matches_numpy_including_negative_and_clamped_bounds(rng):
    x, xv = make(rng, (7, 9))
    for _ in range(40):
        starts = [int(v) for v in rng.integers(-12, 12, 2)]
        stops = [int(v) for v in rng.integers(-12, 12, 2)]
        steps = [int(v) for v in rng.integers(1, 4, 2)]
        want = xv[starts[0]:stops[0]:steps[0], starts[1]:stops[1]:steps[1]]
        check(ops.slice(x, starts, stops, steps), want, "fp32")
    check(ops.slice(x, [None, 2], [None, None], [2, None]), xv[::2, 2:], "fp32")
    check(ops.slice(x, None, [3, -1]), xv[:3, :-1], "fp32")
    check(x[1:, ::3], xv[1:, ::3], "fp32")
    check(ops.slice(x, [0, 0], [2**63 - 1, 2**63 - 1], [2**63 - 1, 1]), xv[::2**63 - 1, :], "fp32")


def test_slice_errors(rng):
    x, _ = make(rng, (4, 4))
    with pytest.raises(tessera.ArgumentError, match="steps must be > 0"):
        ops.slice(x, [0, 0], [4, 4], [1, 0])
    with pytest.raises(tessera.ArgumentError):
        ops.slice(x, [3, 0], [0, 4], [-1, 1])
    with pytest.raises(tessera.ShapeError, match="one per axis"):
        ops.slice(x, [0], [4])


@pytest.mark.parametrize("policy", POLICIES)
def test_concat_and_split(rng, policy):
    a, av = make(rng, (2, 3), policy)
    b, bv = make(rng, (2, 5), policy)
    c, cv = make(rng, (2, 0), policy)
    check(ops.concat([a, b, c], axis=1), np.concatenate([av, bv, cv], axis=1), policy)
    check(ops.concat((a, a), axis=-2), np.concatenate([av, av], axis=0), policy)
    x, xv = make(rng, (6, 4), policy)
    parts = ops.split(x, 3)
    assert isinstance(parts, tuple) and len(parts) == 3
    for got, want in zip(parts, np.split(xv, 3)):
        check(got, want, policy)
    for got, want in zip(ops.split(x, [1, 0, 3], axis=1), np.split(xv, [1, 1], axis=1)):
        check(got, want, policy)
    (whole,) = ops.split(x, 1, axis=-1)
    check(whole, xv, policy)


def test_concat_split_errors(rng):
    h = tessera.tensor(np.ones(2), "fp16")
    b = tessera.tensor(np.ones(2), "bf16 @accum(fp32)")
    with pytest.raises(tessera.DtypeError, match=r"fp16 @accum\(fp32\)\) and 1 \(bf16 @accum\(fp32\)"):
        ops.concat([h, b])
    with pytest.raises(tessera.ShapeError, match="dim 1"):
        ops.concat([tessera.tensor(np.ones((2, 2))), tessera.tensor(np.ones((2, 3)))])
    with pytest.raises(tessera.ArgumentError):
        ops.concat([])
    x = tessera.tensor(np.ones((5, 2)))
    with pytest.raises(tessera.ShapeError, match="equal sections"):
        ops.split(x, 2)
    with pytest.raises(tessera.ShapeError, match="sum to 4"):
        ops.split(x, [2, 2])
    with pytest.raises(tessera.ArgumentError):
        ops.split(x, 0)


def test_split_qkv_layout(rng):
    x, xv = make(rng, (2, 5, 24))
    q, k, v = ops.split_qkv(x)
    for got, want in zip((q, k, v), (xv[..., :8], xv[..., 8:16], xv[..., 16:])):
        check(got, want, "fp32")
    q, k, v = ops.split_qkv(x, num_heads=4)
    for got, want in zip((q, k, v), (xv[..., :8], xv[..., 8:16], xv[..., 16:])):
        check(got, want.reshape(2, 5, 4, 2), "fp32")
    with pytest.raises(tessera.ShapeError, match="divisible by 3"):
        ops.split_qkv(tessera.tensor(np.ones((2, 7))))
    with pytest.raises(tessera.ShapeError, match="num_heads = 3"):
        ops.split_qkv(x, num_heads=3)
    with pytest.raises(tessera.ArgumentError):
        ops.split_qkv(x, num_heads=0)


@pytest.mark.parametrize("idx_dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_gather_matches_take(rng, idx_dtype):
    x, xv = make(rng, (5, 6, 3), "bf16 @accum(fp32)")
    for axis in (0, 1, -1):
        n = xv.shape[axis]
        idx = rng.integers(-n if idx_dtype != np.uint8 else 0, n, size=(2, 4)).astype(idx_dtype)
        check(ops.gather(x, tessera.tensor(idx), axis=axis), np.take(xv, idx, axis=axis), "bf16 @accum(fp32)")
    check(ops.gather(x, [4, -5]), np.take(xv, [4, -5], axis=0), "bf16 @accum(fp32)")
    check(ops.gather(x, 2, axis=1), np.take(xv, 2, axis=1), "bf16 @accum(fp32)")
    check(ops.gather(x, np.zeros(0, dtype=np.int64)), np.take(xv, np.zeros(0, dtype=np.int64), axis=0),
          "bf16 @accum(fp32)")


def test_gather_errors(rng):
    x, _ = make(rng, (5, 3))
    with pytest.raises(tessera.ArgumentError, match=r"index 5 is out of range for axis 0 of size 5") as info:
        ops.gather(x, [0, 5])
    assert info.value.code == "TE11002"
    with pytest.raises(tessera.ArgumentError, match="index -4 .* axis 1 of size 3"):
        ops.gather(x, [-4], axis=1)
    with pytest.raises(tessera.DtypeError, match="integer"):
        ops.gather(x, tessera.tensor(np.array([0.0, 1.0])))
    with pytest.raises(tessera.DtypeError):
        ops.gather(x, [0.5])


# ------------------------------------------------------------- exact movement of encodings ----

def test_special_fp32_encodings_move_exactly():
    codes = np.array([[0x7FC00123, 0x80000000, 0xFF800001], [0x00000001, 0x7F800000, 0xFFFFFFFF]],
                     dtype=np.uint32)
    x = from_codes(codes, "fp32")
    np.testing.assert_array_equal(ops.transpose(x).codes(), codes.T)
    np.testing.assert_array_equal(ops.reshape(x, (3, 2)).codes(), codes.reshape(3, 2))
    np.testing.assert_array_equal(ops.slice(x, [0, 1], [2, 3]).codes(), codes[:, 1:])
    np.testing.assert_array_equal(ops.concat([x, x], axis=1).codes(), np.concatenate([codes, codes], 1))
    np.testing.assert_array_equal(ops.gather(x, [2, 0], axis=1).codes(), codes[:, [2, 0]])
    np.testing.assert_array_equal(ops.broadcast_to(x, (2, 2, 3)).codes(), np.broadcast_to(codes, (2, 2, 3)))
    for got, want in zip(ops.split(x, [1, 2], axis=1), np.split(codes, [1], axis=1)):
        np.testing.assert_array_equal(got.codes(), want)


@pytest.mark.parametrize("policy,nbits", [("fp4_e2m1", 4), ("int4", 4), ("fp8_e4m3 @accum(fp32)", 8),
                                          ("fp6_e3m2", 6), ("fp8_e5m2", 8)])
def test_packed_and_narrow_codes_move_exactly(rng, policy, nbits):
    codes = rng.integers(0, 2**nbits, size=(4, 6)).astype(np.uint8)
    x = from_codes(codes, policy)
    np.testing.assert_array_equal(x.codes(), codes)
    np.testing.assert_array_equal(ops.reshape(x, (3, 8)).codes(), codes.reshape(3, 8))
    np.testing.assert_array_equal(ops.transpose(x).codes(), codes.T)
    np.testing.assert_array_equal(ops.slice(x, [1, -5], [None, None], [2, 3]).codes(), codes[1::2, -5::3])
    np.testing.assert_array_equal(ops.concat([x, x]).codes(), np.concatenate([codes, codes]))
    np.testing.assert_array_equal(ops.gather(x, [3, -1, 0], axis=1).codes(), codes[:, [3, -1, 0]])
    q, k, v = ops.split_qkv(x)
    np.testing.assert_array_equal(k.codes(), codes[:, 2:4])
    assert str(ops.transpose(x).policy) == str(x.policy) == canonical(policy)


def test_traced_shape_ops_match_numpy(rng):
    @tessera.jit
    def f(x):
        q, k, v = ops.split_qkv(x, num_heads=2)
        return ops.reshape(ops.transpose(q, (1, 0, 2)), (-1,)), ops.concat([k, v], axis=-1), x[:, 3:5]

    x, xv = make(rng, (3, 12))
    flat, kv, sl = f(x)
    q = xv[:, :4].reshape(3, 2, 2)
    np.testing.assert_array_equal(flat.numpy(), q.transpose(1, 0, 2).reshape(-1))
    np.testing.assert_array_equal(kv.numpy(), np.concatenate([xv[:, 4:8].reshape(3, 2, 2),
                                                             xv[:, 8:].reshape(3, 2, 2)], axis=-1))
    np.testing.assert_array_equal(sl.numpy(), xv[:, 3:5])
    assert "graph.split_qkv" in f.graph_ir and "graph.slice" in f.graph_ir
