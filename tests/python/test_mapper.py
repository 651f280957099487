"""The Mapper: placement of mesh axes, the collective algorithm and the kernel
variant, each decision logged and shown in inspect_ir("schedule"), and each
one steering what runs (checked against orders computed here in numpy
float32, not against the runtime)."""

import numpy as np
import pytest

import tessera
from tessera import dist, ops
from tessera.errors import ArgumentError


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


@pytest.fixture(autouse=True)
def default_mapper():
    tessera.runtime.clear_mapper_log()
    yield
    tessera.runtime.set_mapper(tessera.Mapper())
    tessera.runtime.clear_mapper_log()


class MyMapper(tessera.Mapper):
    """The specification's example (Ch. 10.5), verbatim."""

    def place(self, region, mesh):
        if region.axis == "tp":
            return "local_switch"

    def choose_collective(self, kind, size):
        return "sharp_ring" if size <= 72 else "tree"

    def choose_variant(self, op, arch):
        return "tile_ir" if arch.is_blackwell else "ptx"


class Algorithm(tessera.Mapper):
    def __init__(self, name):
        self.name = name

    def choose_collective(self, kind, size):
        return self.name


# -- orders, computed independently in numpy float32 ------------------------------------------

def rank_order(xs):
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = (acc + x).astype(np.float32)
    return acc


def ring(xs):
    """Part c of the flat elements (array_split over the members) starts at member c + 1."""
    p, n = len(xs), xs[0].size
    out = np.empty(n, np.float32)
    for c, idx in enumerate(np.array_split(np.arange(n), p)):
        order = [(c + k) % p for k in range(1, p + 1)]
        out[idx] = rank_order([xs[r].ravel()[idx] for r in order])
    return out.reshape(xs[0].shape)


def tree(xs):
    level = list(xs)
    while len(level) > 1:
        level = [(level[i] + level[i + 1]).astype(np.float32) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def member_inputs(p=4, n=64, seed=0):
    rng = np.random.default_rng(seed)
    # Magnitudes from 1e-3 to 1e5: fp32 sums of these depend on their order.
    return [(rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(np.float32) for _ in range(p)]


def launch_allreduce(xs, **kwargs):
    m = dist.mesh(devices=cpus(len(xs)), axes=("tp",), shape=(len(xs),))
    X = dist.tensor(np.stack(xs), layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m)

    def body(x):
        return tessera.allreduce(x, axis="tp", **kwargs)

    return [r.numpy()[0] for r in tessera.index_launch(axis="tp")(body)(X.parts("tp"))]


# -- collectives -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,order", [("rank_order", rank_order), ("ring", ring), ("tree", tree)])
def test_the_collective_algorithm_steers_the_reduction_order(name, order):
    xs = member_inputs()
    tessera.runtime.set_mapper(Algorithm(name))
    got = launch_allreduce(xs)
    for g in got:
        np.testing.assert_array_equal(g, order(xs))
    # The three orders really differ on these inputs, so the test tells them apart.
    others = [o for o in (rank_order, ring, tree) if o is not order]
    assert all(not np.array_equal(order(xs), o(xs)) for o in others)
    if name != "rank_order":
        assert f"choose_collective('allreduce', 4) -> '{name}'" in tessera.runtime.mapper_log()


def test_the_default_mapper_reduces_in_rank_order_and_logs_nothing():
    xs = member_inputs(seed=1)
    for g in launch_allreduce(xs):
        np.testing.assert_array_equal(g, rank_order(xs))
    assert tessera.runtime.mapper_log() == []


def test_deterministic_false_asks_for_the_native_algorithm():
    xs = member_inputs(seed=2)
    tessera.runtime.set_mapper(Algorithm("tree"))
    got = launch_allreduce(xs, deterministic=False)
    np.testing.assert_array_equal(got[0], rank_order(xs))  # the local backend's native order
    assert any("deterministic=False -> 'native'" in line for line in tessera.runtime.mapper_log())


def test_the_specification_mapper_runs_and_its_sharp_ring_falls_back_to_ring():
    tessera.runtime.set_mapper(MyMapper())
    xs = member_inputs(seed=3)
    got = launch_allreduce(xs)
    np.testing.assert_array_equal(got[0], ring(xs))
    log = "\n".join(tessera.runtime.mapper_log())
    assert "choose_collective('allreduce', 4) -> 'sharp_ring': not available here" in log
    assert "NVLink multicast" in log and "ran 'ring'" in log


def test_an_unknown_algorithm_runs_rank_order_and_says_so():
    tessera.runtime.set_mapper(Algorithm("butterfly"))
    xs = member_inputs(seed=4)
    np.testing.assert_array_equal(launch_allreduce(xs)[0], rank_order(xs))
    assert any("'butterfly': not an algorithm this runtime knows" in line for line in tessera.runtime.mapper_log())


# -- placement -------------------------------------------------------------------------------------

def test_local_switch_puts_an_axis_on_consecutive_devices():
    default = dist.mesh(devices=cpus(8), axes=("tp", "dp"), shape=(4, 2))
    assert default.axis_group("tp", 0) == ("cpu:0", "cpu:2", "cpu:4", "cpu:6")
    tessera.runtime.set_mapper(MyMapper())
    m = dist.mesh(devices=cpus(8), axes=("tp", "dp"), shape=(4, 2))
    assert m.axis_group("tp", 0) == ("cpu:0", "cpu:1", "cpu:2", "cpu:3")
    assert m.device_at(tp=1, dp=1) == "cpu:5"
    assert "place(axis 'tp') -> 'local_switch'" in m.placement
    assert any("placed mesh axes" in d for d in m.placement)
    # Shards follow: part (tp=i, dp=j) of a (tp, dp)-sharded tensor lives on device cpu:(4j + i).
    a = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    X = dist.tensor(a, layout=dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp")), mesh=m)
    np.testing.assert_array_equal(X.numpy(), a)


def test_spread_strides_an_axis_across_the_mesh():
    class Spread(tessera.Mapper):
        def place(self, region, mesh):
            return "spread" if region.axis == "dp" else None

    tessera.runtime.set_mapper(Spread())
    m = dist.mesh(devices=cpus(8), axes=("tp", "dp"), shape=(4, 2))
    assert m.axis_group("dp", 0) == ("cpu:0", "cpu:4")
    assert m.axis_group("tp", 0) == ("cpu:0", "cpu:1", "cpu:2", "cpu:3")


def test_a_placed_mesh_runs_a_partitioned_function_correctly():
    tessera.runtime.set_mapper(MyMapper())
    m = dist.mesh(devices=cpus(8), axes=("tp", "dp"), shape=(4, 2))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    f = tessera.jit(lambda x, w: ops.tanh(ops.matmul(x, w)))  # tanh needs the summed product: an allreduce
    y = f(dist.tensor(x, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m),
          dist.tensor(w, layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)), mesh=m))
    np.testing.assert_allclose(y.numpy(), np.tanh(x.astype(np.float64) @ w), rtol=1e-5, atol=1e-5)
    schedule = f.inspect_ir("schedule")
    assert "// mapper: choose_collective('allreduce', 4) -> 'sharp_ring'" in schedule
    assert 'algorithm = "ring"' in schedule


def test_an_unknown_placement_keeps_the_default_and_is_logged():
    class Odd(tessera.Mapper):
        def place(self, region, mesh):
            return "nearby"

    tessera.runtime.set_mapper(Odd())
    m = dist.mesh(devices=cpus(4), axes=("tp",), shape=(4,))
    assert m.devices == tuple(cpus(4))
    assert any("'nearby': not a placement" in d for d in m.placement)


# -- kernel variants -------------------------------------------------------------------------------

def test_choose_variant_steers_the_kernel_variant():
    class Oracle(tessera.Mapper):
        def choose_variant(self, op, arch):
            assert arch.is_cpu and not arch.is_hopper and arch.name == "cpu"
            return "reference" if op == "exp" else None

    def f(x, y):
        return ops.exp(x) * 2.0 + ops.matmul(y, y)

    x = np.linspace(-2, 2, 9, dtype=np.float32).reshape(3, 3)
    y = np.eye(3, dtype=np.float32) * 3
    plain = tessera.jit(f)
    want = plain(tessera.tensor(x), tessera.tensor(y)).numpy()
    assert {k["variant"] for k in plain.executable().kernels} == {"tile"}

    tessera.runtime.set_mapper(Oracle())
    mapped = tessera.jit(f)
    got = mapped(tessera.tensor(x), tessera.tensor(y)).numpy()
    variants = {k["variant"] for k in mapped.executable().kernels}
    assert variants == {"tile", "reference"}
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)) * 2 + y.astype(np.float64) @ y, rtol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    schedule = mapped.inspect_ir("schedule")
    assert "// mapper: choose_variant('exp', cpu) -> 'reference'" in schedule
    assert 'variant = "reference"' in schedule


def test_setting_a_mapper_recompiles_what_was_compiled_before():
    class Oracle(tessera.Mapper):
        def choose_variant(self, op, arch):
            return "reference"

    f = tessera.jit(lambda x: ops.exp(x) + 1.0)
    x = tessera.tensor(np.ones((2, 2), np.float32))
    f(x)
    assert {k["variant"] for k in f.executable().kernels} == {"tile"}
    tessera.runtime.set_mapper(Oracle())
    np.testing.assert_allclose(f(x).numpy(), np.e + 1, rtol=1e-6)
    assert {k["variant"] for k in f.executable().kernels} == {"reference"}


def test_cuda_variants_on_the_cpu_fall_back_to_the_generated_kernel():
    tessera.runtime.set_mapper(MyMapper())
    f = tessera.jit(lambda x: ops.exp(x))
    f(tessera.tensor(np.zeros(4, np.float32)))
    assert {k["variant"] for k in f.executable().kernels} == {"tile"}
    assert "choose_variant('exp', cpu) -> 'ptx': PTX is a CUDA target; ran the generated CPU kernel" in \
        tessera.runtime.mapper_log()

    class TileIR(tessera.Mapper):
        def choose_variant(self, op, arch):
            return "tile_ir"

    tessera.runtime.set_mapper(TileIR())
    f(tessera.tensor(np.zeros(4, np.float32)))
    assert {k["variant"] for k in f.executable().kernels} == {"tile"}
    assert "choose_variant('exp', cpu) -> 'tile_ir': CUDA Tile IR is a CUDA target; ran the generated CPU kernel" in \
        tessera.runtime.mapper_log()


def test_unknown_variant_is_an_error():
    class Typo(tessera.Mapper):
        def choose_variant(self, op, arch):
            return "tileir"

    tessera.runtime.set_mapper(Typo())
    f = tessera.jit(lambda x: ops.exp(x))
    with pytest.raises(ArgumentError, match=r"Typo.choose_variant\('exp', cpu\) returned 'tileir'; expected 'tile', "
                                            r"'ptx', 'tile_ir', 'cpu', 'reference' or None"):
        f(tessera.tensor(np.zeros(4, np.float32)))


# -- errors ----------------------------------------------------------------------------------------

def test_bad_mappers_are_clear_errors():
    with pytest.raises(ArgumentError, match="set_mapper takes a tessera.Mapper, got object"):
        tessera.runtime.set_mapper(object())

    class Number(tessera.Mapper):
        def choose_collective(self, kind, size):
            return 3

    tessera.runtime.set_mapper(Number())
    with pytest.raises(ArgumentError, match=r"Number.choose_collective\('allreduce', 4\) returned 3"):
        launch_allreduce(member_inputs())

    class Raises(tessera.Mapper):
        def place(self, region, mesh):
            raise KeyError("no rack")

    tessera.runtime.set_mapper(Raises())
    with pytest.raises(KeyError) as info:
        dist.mesh(devices=cpus(2), axes=("tp",), shape=(2,))
    assert "raised by Raises.place" in "\n".join(info.value.__notes__)
