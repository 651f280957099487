"""tessera.ops random numbers: rand, randn, dropout and Philox keys.

An independent numpy port of Philox4x32-10 (checked against the Random123
known-answer vector) reproduces rand bit for bit; moments are checked within
5 standard errors; keys must advance so successive draws differ while a fresh
key with the same seed repeats them.
"""

import numpy as np
import pytest

import tessera
from tessera import ops

_MASK = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key):
    """Philox4x32-10 on arrays of counters: counter = 4 uint64 arrays holding 32-bit words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _MASK, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _MASK
        k0 = (k0 + np.uint64(0x9E3779B9)) & _MASK
        k1 = (k1 + np.uint64(0xBB67AE85)) & _MASK
    return c0, c1, c2, c3


def bits32(seed, counters):
    """The 32 bits element counter `counters` of stream `seed` draws (word 0 of the Philox output)."""
    counters = np.asarray(counters, dtype=np.uint64)
    zero = np.zeros_like(counters)
    return philox4x32((counters & _MASK, counters >> np.uint64(32), zero, zero),
                      (seed & 0xFFFFFFFF, seed >> 32))[0]


def uniform_ref(seed, counters):
    return (bits32(seed, counters) >> np.uint64(8)).astype(np.float64) * 2.0**-24


def test_reference_port_matches_known_answer():
    out = philox4x32(([0], [0], [0], [0]), (0, 0))
    assert [int(w[0]) for w in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    ones = [[0xFFFFFFFF]] * 4
    out = philox4x32(ones, (0xFFFFFFFF, 0xFFFFFFFF))
    assert [int(w[0]) for w in out] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_rand_is_bit_exact_against_independent_philox(rng):
    seed = int(rng.integers(0, 2**40))
    key = ops.philox(seed)
    a = ops.rand((7, 300), key=key)
    assert a.shape == (7, 300) and str(a.dtype) == "fp32"
    want = uniform_ref(seed, np.arange(2100)).astype(np.float32).reshape(7, 300)
    np.testing.assert_array_equal(a.numpy().view(np.uint32), want.view(np.uint32))
    # The key moved past those 2100 counters: the next draw continues the stream.
    assert key.offset == 2100 and key.seed == seed
    b = ops.rand(50, key=key)
    np.testing.assert_array_equal(b.numpy(), uniform_ref(seed, np.arange(2100, 2150)).astype(np.float32))


def test_same_seed_same_bits_different_offset_different_values(rng):
    seed = int(rng.integers(0, 2**31))
    a = ops.rand((1000,), key=ops.philox(seed)).numpy()
    b = ops.rand((1000,), key=ops.philox(seed)).numpy()
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    key = ops.philox(seed)
    first, second = ops.rand(1000, key=key).numpy(), ops.rand(1000, key=key).numpy()
    np.testing.assert_array_equal(first, a)
    assert np.mean(first == second) < 0.01
    other = ops.rand(1000, key=ops.philox(seed + 1)).numpy()
    assert np.mean(other == a) < 0.01
    # key=None is a fresh philox(0) each call: the same numbers every time.
    np.testing.assert_array_equal(ops.rand(10).numpy(), ops.rand(10).numpy())
    np.testing.assert_array_equal(ops.rand(10).numpy(), ops.rand(10, key=ops.philox(0)).numpy())


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "fp16", "bf16 @accum(fp32)", "fp8_e4m3 @accum(fp32)",
                                   "fp4_e2m1"])
def test_rand_in_unit_interval(rng, dtype):
    v = ops.rand((100_000,), key=ops.philox(int(rng.integers(0, 2**31))), dtype=dtype).numpy().astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    if dtype in ("fp32", "fp64"):
        n = v.size
        assert abs(v.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
        assert abs(v.var() - 1 / 12) < 5 * np.sqrt(1 / 180 / n)


def test_rand_policy_argument():
    assert str(ops.rand((2,), dtype=tessera.bf16).dtype) == "bf16"
    t = ops.rand((2,), dtype=tessera.fp8_e4m3 @ tessera.accum(tessera.fp32))
    assert str(t.policy) == "fp8_e4m3 @accum(fp32)"


def test_randn_box_muller_and_moments(rng):
    seed = int(rng.integers(0, 2**31))
    key = ops.philox(seed)
    ops.rand(3, key=key)  # move to offset 3
    n = 100_000
    z = ops.randn((n,), key=key, dtype="fp64").numpy()
    assert key.offset == 3 + 2 * n
    idx = np.arange(200, dtype=np.uint64)
    u1 = ((bits32(seed, 3 + 2 * idx) >> np.uint64(8)).astype(np.float64) + 1) * 2.0**-24
    u2 = uniform_ref(seed, 3 + 2 * idx + 1)
    np.testing.assert_allclose(z[:200], np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2), rtol=1e-13, atol=1e-15)
    assert np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / np.sqrt(n)
    assert abs(z.var() - 1) < 5 * np.sqrt(2 / n)
    z32 = ops.randn((1000, 10), key=ops.philox(seed), dtype="fp32").numpy()
    assert z32.shape == (1000, 10) and z32.dtype == np.float32


def test_dropout_keep_fraction_and_scaling(rng):
    seed = int(rng.integers(0, 2**31))
    p = float(rng.uniform(0.1, 0.9))
    x = rng.standard_normal((200, 500))
    key = ops.philox(seed)
    ops.rand(10, key=key)
    y = ops.dropout(tessera.tensor(x), p, key=key).numpy()
    assert key.offset == 10 + x.size
    keep = uniform_ref(seed, 10 + np.arange(x.size)).reshape(x.shape) >= p
    np.testing.assert_array_equal(y, np.where(keep, x / (1 - p), 0.0))
    n = x.size
    assert abs(keep.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
    # fp16: kept values are x/(1-p) rounded to fp32 then fp16.
    x16 = tessera.tensor(x[:4], "fp16")
    y16 = ops.dropout(x16, p, key=ops.philox(seed)).numpy()
    keep16 = uniform_ref(seed, np.arange(x16.size)).reshape(x16.shape) >= p
    want = np.where(keep16, (x16.numpy().astype(np.float64) / (1 - p)).astype(np.float32).astype(np.float16), 0)
    np.testing.assert_array_equal(y16, want)


def test_dropout_p_zero_is_identity_bit_for_bit():
    codes = np.array([0x7FC00123, 0x80000000, 0x3F800000, 0xFF800000], dtype=np.uint32)
    x = tessera._C._tensor_from_codes(codes.tolist(), [4], "fp32")
    np.testing.assert_array_equal(ops.dropout(x, 0.0, key=ops.philox(5)).codes(), codes)


def test_errors_leave_the_key_unmoved():
    key = ops.philox(1)
    with pytest.raises(tessera.ArgumentError, match=r"\[0, 1\)"):
        ops.dropout(tessera.tensor(np.ones(3)), 1.0, key=key)
    with pytest.raises(tessera.ArgumentError):
        ops.dropout(tessera.tensor(np.ones(3)), -0.5, key=key)
    with pytest.raises(tessera.DtypeError, match="floating-point"):
        ops.rand((3,), key=key, dtype="int32")
    with pytest.raises(tessera.DtypeError):
        ops.dropout(tessera.tensor(np.ones(3, dtype=np.int32)), 0.5, key=key)
    with pytest.raises(tessera.ShapeError, match="negative"):
        ops.randn((2, -3), key=None)
    assert key.offset == 0
    with pytest.raises(tessera.ArgumentError):
        ops.philox(-1)
    with pytest.raises(TypeError):
        ops.rand((2,), key=123)


# -- the raw generator, derived keys, bernoulli, sharding ------------------------------------------

def test_raw_philox4x32_matches_the_known_answers_and_the_port():
    from tessera.numerics import philox4x32 as raw
    assert [int(w) for w in raw([0, 0, 0, 0], (0, 0))] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert [int(w) for w in raw([0xFFFFFFFF] * 4, (0xFFFFFFFF, 0xFFFFFFFF))] == \
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    rng = np.random.default_rng(7)
    counters = rng.integers(0, 2**32, (5, 3, 4), dtype=np.uint64)
    key = (int(rng.integers(0, 2**32)), int(rng.integers(0, 2**32)))
    got = raw(counters, key)
    assert got.shape == (5, 3, 4) and got.dtype == np.uint32
    want = philox4x32([counters[..., w] for w in range(4)], key)
    for w in range(4):
        np.testing.assert_array_equal(got[..., w], want[w])
    with pytest.raises(tessera.ShapeError, match=r"4 words each"):
        raw([1, 2, 3], (0, 0))
    with pytest.raises(tessera.DtypeError, match="two 32-bit words"):
        raw([0, 0, 0, 0], (0, 2**32))


def _child(seed, counter, tag):
    words = philox4x32(([counter & 0xFFFFFFFF], [counter >> 32], [tag], [0]), (seed & 0xFFFFFFFF, seed >> 32))
    return ((int(words[1][0]) << 32) | int(words[0][0])) & (2**63 - 1)


def test_split_and_fold_in_derive_documented_child_streams():
    key = ops.philox(1234)
    ops.rand(10, key=key)  # the parent is at offset 10
    a, b, c = key.split(3)
    assert [k.seed for k in (a, b, c)] == [_child(1234, 10 + i, 1) for i in range(3)]
    assert key.offset == 13 and all(k.offset == 0 for k in (a, b, c))
    d, = key.split(1)
    assert d.seed == _child(1234, 13, 1) and d.seed not in (a.seed, b.seed, c.seed)
    # fold_in: a pure function of (seed, data), the parent unmoved.
    f1, f2 = key.fold_in(5), key.fold_in(5)
    assert f1.seed == f2.seed == _child(1234, 5, 2) and key.offset == 14
    assert key.fold_in(6).seed != f1.seed
    # A child's draws are its own stream's.
    x = ops.rand(64, key=a)
    want = uniform_ref(a.seed, np.arange(64)).astype(np.float32)
    np.testing.assert_array_equal(x.numpy().view(np.uint32), want.view(np.uint32))
    with pytest.raises(tessera.ArgumentError, match="num must be a positive int"):
        key.split(0)
    with pytest.raises(tessera.ArgumentError, match=r"data must be an int in \[0, 2\*\*64\)"):
        key.fold_in(-1)


def test_bernoulli_is_rand_below_p(rng):
    seed = int(rng.integers(0, 2**40))
    b = ops.bernoulli(0.3, (200, 50), key=ops.philox(seed))
    assert str(b.dtype) == "bool" and b.shape == (200, 50)
    want = uniform_ref(seed, np.arange(10000)).reshape(200, 50) < 0.3
    np.testing.assert_array_equal(b.numpy(), want)
    n = 10000
    assert abs(b.numpy().mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / n)
    assert not ops.bernoulli(0.0, 100).numpy().any() and ops.bernoulli(1.0, 100).numpy().all()
    with pytest.raises(tessera.ArgumentError, match="probability in"):
        ops.bernoulli(1.5, 3)


def test_random_bits_do_not_depend_on_the_sharding():
    from tessera import dist
    mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("tp",), shape=(4,))
    x = np.arange(8 * 12, dtype=np.float32).reshape(8, 12) + 1

    def f(x):
        return ops.dropout(x, 0.5, key=ops.philox(99)) + ops.rand((8, 12), key=ops.philox(7))

    one = tessera.jit(f)(tessera.tensor(x)).numpy()
    for layout in (dist.ShardSpec(partition=("col",), mesh_axes=("tp",)),
                   dist.ShardSpec(partition=("row",), mesh_axes=("tp",))):
        sharded = tessera.jit(f)(dist.tensor(x, layout=layout, mesh=mesh)).numpy()
        np.testing.assert_array_equal(sharded.view(np.uint32), one.view(np.uint32))
