"""Run by tests/python/test_dist_mpi.py once in one process and once under
mpirun: a Megatron-style tensor-parallel MLP step (column-parallel GEMM,
gelu, row-parallel GEMM whose partial sums an allreduce combines) and a
data-parallel gradient mean, @jit over a mesh of 4 virtual devices, plus an
eager op and an index launch. Process 0 saves the results to argv[1]; the
test compares the files bit for bit."""

import sys

import numpy as np

import tessera
from tessera import dist

rng = np.random.default_rng(0)
x = rng.standard_normal((8, 16)).astype(np.float32)
w1 = rng.standard_normal((16, 32)).astype(np.float32)
w2 = rng.standard_normal((32, 16)).astype(np.float32)

mesh = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("tp",), shape=(4,))
X = dist.tensor(x, layout=dist.ShardSpec(partition=(), mesh_axes=()), mesh=mesh)
W1 = dist.tensor(w1, layout=dist.ShardSpec(partition=(1,), mesh_axes=("tp",)), mesh=mesh)
W2 = dist.tensor(w2, layout=dist.ShardSpec(partition=(0,), mesh_axes=("tp",)), mesh=mesh)


@tessera.jit
def mlp(x, w1, w2):
    return tessera.ops.gemm(tessera.ops.gelu(tessera.ops.gemm(x, w1)), w2)


Y = mlp(X, W1, W2)
results = {"tp_mlp": Y.numpy(), "tp_mlp_again": mlp(X, W1, W2).numpy()}

# Data parallel: each device holds a batch shard; the gradient of a mean
# squared loss is reduced over the batch (a sum over dp).
dp = dist.mesh(devices=[f"cpu:{i}" for i in range(4)], axes=("dp",), shape=(4,))
XB = dist.tensor(x, layout=dist.ShardSpec(partition=(0,), mesh_axes=("dp",)), mesh=dp)
WB = dist.tensor(w1, layout=dist.ShardSpec(partition=(), mesh_axes=()), mesh=dp)


@tessera.jit
def grad_step(x, w):
    y = tessera.ops.gemm(x, w)
    g = tessera.ops.gemm(tessera.ops.transpose(x, (1, 0)), y)
    return w - g * 0.01


results["dp_step"] = grad_step(XB, WB).numpy()
results["eager_gemm"] = tessera.ops.gemm(X, W1).numpy()


# An index launch: each shard all-reduces its part of W1's columns' sums.
def body(part):
    return tessera.allreduce(tessera.ops.sum(part, axis=0, keepdims=True), axis="tp")


# Every process gets every index's result (those of other processes' devices come over).
outs = tessera.index_launch(axis="tp", mesh=mesh)(body)(W1.parts("tp"))
assert len(outs) == 4 and all(o is not None for o in outs), outs
for o in outs[1:]:
    assert np.array_equal(o.codes(), outs[0].codes())
results["launch_allreduce"] = np.asarray(outs[3].numpy())

# A kernel launch writes the parts of a tensor split over tp; reading it fetches the parts other processes wrote.


@tessera.kernel
def scale(x: tessera.f32["K/tp"], y: tessera.mut(tessera.f32["K/tp"]), a: tessera.f32):
    i = tile.linear_id()
    y[i] = a * x[i]


v = dist.tensor(np.arange(16, dtype=np.float32), layout=dist.ShardSpec(partition=(0,), mesh_axes=("tp",)), mesh=mesh)
out = dist.tensor(shape=(16,), layout=dist.ShardSpec(partition=(0,), mesh_axes=("tp",)), mesh=mesh)
tessera.index_launch(axis="tp")(scale)(v.parts("tp"), out.parts("tp"), 2.0)
results["kernel_launch"] = out.numpy()

# Under mpirun the collectives crossed processes through the mpi backend (its flight recorder saw them).
record = tessera._C.mpi_flight_record()
if dist.world_size() > 1:
    assert any(" allreduce #" in line or "allreduce #" in line for line in record), record
if dist.rank() == 0:
    np.savez(sys.argv[1], **results)
    print("saved", sorted(results), "from", dist.world_size(), "process(es); local devices",
          dist.local_devices(mesh), "; mpi collectives recorded:", len(record), flush=True)
