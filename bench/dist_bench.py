"""The distributed layer on in-process devices, ratios measured in the same run.

    .venv/bin/python bench/dist_bench.py

- allreduce (local backend, rank-order fp32 sum) over 2 and 4 virtual
  devices: algorithm bandwidth (bytes of one member's tensor / time) against
  numpy's memcpy bandwidth (np.copyto) on the same size;
- a tp-sharded GEMM (column-parallel weight, no communication) on 8 virtual
  devices against the same GEMM on one device (both compiled @jit);
- dispatch overhead of an index launch over 72 virtual devices (an empty
  function), and over 8;
- the Mapper's reduction orders (ring, tree) against rank order, 64 MiB over
  4 virtual devices;
- region privileges: two calls reading one tensor (and writing their own)
  against the same two calls one after the other.
"""

import cores  # noqa: F401  (thread counts before numpy loads)

import time  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import dist  # noqa: E402


def best(fn, reps=5):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def cpus(n):
    return [f"cpu:{i}" for i in range(n)]


def allreduce_rows():
    rows = []
    for n in (2, 4):
        for mib in (4, 64):
            elems = mib * (1 << 20) // 4
            m = dist.mesh(devices=cpus(n), axes=("dp",), shape=(n,))
            x = dist.tensor(np.ones((n, elems), np.float32), layout=dist.ShardSpec(partition=("row",),
                                                                                   mesh_axes=("dp",)), mesh=m)
            parts = x.parts("dp")
            launch = tessera.index_launch(axis="dp")(lambda p: tessera.allreduce(p, axis="dp"))
            launch(parts)
            t = best(lambda: launch(parts))
            a = np.ones(elems, np.float32)
            b = np.empty_like(a)
            tc = best(lambda: np.copyto(b, a))
            rows.append((f"allreduce {n} devices {mib} MiB", mib / 1024 / t, mib / 1024 / tc))
    return rows


def gemm_row():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024)).astype(np.float32)
    w = rng.standard_normal((1024, 1024)).astype(np.float32)
    mm = tessera.jit(lambda x, y: tessera.ops.matmul(x, y))
    ta, tw = tessera.tensor(a), tessera.tensor(w)
    mm(ta, tw)
    one = best(lambda: mm(ta, tw))
    m = dist.mesh(devices=cpus(8), axes=("tp",), shape=(8,))
    A = dist.tensor(a, mesh=m)  # replicated
    W = dist.tensor(w, layout=dist.ShardSpec(partition=("col",), mesh_axes=("tp",)), mesh=m)
    launch = tessera.index_launch(axis="tp")(mm)
    launch(A.parts("tp"), W.parts("tp"))
    eight = best(lambda: launch(A.parts("tp"), W.parts("tp")))
    return ("tp GEMM 512x1024x1024, 8 devices vs 1", eight * 1e3, one * 1e3)


def dispatch_rows():
    rows = []
    for n in (8, 72):
        m = dist.mesh(devices=cpus(n), axes=("tp",), shape=(n,))
        launch = tessera.index_launch(axis="tp", mesh=m)(lambda _: None)
        launch(None)
        rows.append((f"index launch over {n} devices", best(lambda: launch(None), reps=20) * 1e6))
    return rows


def algorithm_rows():
    class Algorithm(tessera.Mapper):
        def __init__(self, name):
            self.name = name

        def choose_collective(self, kind, size):
            return self.name

    n, elems = 4, 16 << 20
    m = dist.mesh(devices=cpus(n), axes=("dp",), shape=(n,))
    x = dist.tensor(np.ones((n, elems), np.float32), layout=dist.ShardSpec(partition=("row",), mesh_axes=("dp",)),
                    mesh=m)
    parts = x.parts("dp")
    launch = tessera.index_launch(axis="dp")(lambda p: tessera.allreduce(p, axis="dp"))
    times = {}
    for name in ("rank_order", "ring", "tree"):
        tessera.runtime.set_mapper(Algorithm(name))
        launch(parts)
        times[name] = best(lambda: launch(parts))
    tessera.runtime.set_mapper(tessera.Mapper())
    return times


def privilege_row():
    from tessera.region import Region, read, write

    @tessera.jit
    def layer(A: Region[read], Out: Region[write]):
        h = A
        for _ in range(4):
            h = tessera.ops.tanh(tessera.ops.matmul(h, A))
        Out[:] = h

    a = (np.random.default_rng(1).standard_normal((512, 512)) / 30).astype(np.float32)
    A = tessera.tensor(a)
    outs = [tessera.tensor(np.zeros_like(a)) for _ in range(2)]
    layer(A, outs[0])
    tessera.runtime.synchronize()

    def concurrent():
        layer(A, outs[0])
        layer(A, outs[1])
        tessera.runtime.synchronize()

    def serial():
        layer(A, outs[0])
        tessera.runtime.synchronize()
        layer(A, outs[1])
        tessera.runtime.synchronize()

    return best(concurrent), best(serial)


def main():
    print("allreduce (local backend, fp32) against memcpy")
    print(f"{'case':36s} {'GB/s':>8s} {'memcpy GB/s':>12s} {'ratio':>6s}")
    for name, bw, mc in allreduce_rows():
        print(f"{name:36s} {bw:8.2f} {mc:12.2f} {bw / mc:6.2f}")
    name, eight, one = gemm_row()
    print(f"\n{name}: {eight:.2f} ms against {one:.2f} ms on one device -> {one / eight:.2f}x")
    for name, us in dispatch_rows():
        print(f"{name}: {us:.0f} us per launch ({us / int(name.split()[3]):.1f} us per device)")
    times = algorithm_rows()
    print("\nallreduce 64 MiB over 4 devices by algorithm (time against rank order)")
    for name, t in times.items():
        print(f"{name:12s} {t * 1e3:8.2f} ms {times['rank_order'] / t:6.2f}x")
    both, one_by_one = privilege_row()
    print(f"\ntwo readers of one tensor (Region privileges): {both * 1e3:.2f} ms together, "
          f"{one_by_one * 1e3:.2f} ms one after the other -> {one_by_one / both:.2f}x")


if __name__ == "__main__":
    main()
