"""Run plans (docs/design/0048): a plain run of an argument signature seen
before replays the launches its first run recorded instead of walking the
executable's steps. Checked here on the CPU: every result equals, bit for
bit, the walk's (TESSERA_RUN_PLANS=0) and float64 numpy within tolerance;
buffers are fresh at every call; signatures the plan cannot express walk and
say why. tests/python/test_jit_cuda.py checks the GPU's rewritten blocks."""

import ml_dtypes
import numpy as np
import pytest

import tessera

ops = tessera.ops
rng = np.random.default_rng(48)


def t(shape, dtype=np.float32):
    h = rng.standard_normal(shape).astype(dtype)
    return tessera.tensor(h, "bf16 @accum(fp32)") if dtype == ml_dtypes.bfloat16 else tessera.tensor(h)


def bits(x):
    return np.ascontiguousarray(x.numpy()).view(np.uint8).tobytes()


def mlp_loss(x, w1, w2):
    return ops.sum(ops.relu(ops.matmul(ops.relu(ops.matmul(x, w1)), w2)))


def pinn_loss(w1, b1, w2, b2, x):
    """A physics-informed residual's shape of work: the loss reads du/dx."""
    def u(w1, b1, w2, b2, x):
        return ops.sum(ops.matmul(ops.tanh(ops.matmul(x, w1) + b1), w2) + b2)
    du = tessera.grad(u, argnums=4)(w1, b1, w2, b2, x)
    return ops.sum(du * du)


CASES = {
    # one elementwise kernel
    "affine": (lambda x: x * 2.0 + 1.0, lambda: [t((1000,))]),
    # a normalization, a reduction over a middle axis, a transposed operand (views inside)
    "softmax": (lambda x: ops.softmax_safe(x), lambda: [t((33, 300))]),
    "middle_sum": (lambda x: ops.sum(x, axis=1), lambda: [t((4, 50, 6))]),
    "transposed_matmul": (lambda a, b: ops.matmul(ops.transpose(a), b) + 1.0, lambda: [t((24, 16)), t((24, 8))]),
    # a batched matmul: one launch per batch matrix
    "batched": (lambda a, b: ops.matmul(a, b), lambda: [t((3, 8, 16)), t((3, 16, 4))]),
    # gradients: several kernels, intermediates dropped along the way
    "mlp_grad": (tessera.grad(mlp_loss, argnums=(1, 2)), lambda: [t((8, 16)), t((16, 32)), t((32, 4))]),
    # several results, one of them a view of another and one the argument itself
    "views_out": (lambda x: (ops.reshape(x + 1.0, (10, 10)), x, ops.transpose(ops.reshape(x * 3.0, (4, 25)))),
                  lambda: [t((100,))]),
    # a strided view that the run copies before the kernel reads it
    "strided_view": (lambda x: ops.transpose(x, (1, 0))[:, ::2] * 2.0 + 1.0, lambda: [t((30, 13))]),
    # second-order autodiff (a PINN step): gradients of a loss that reads a gradient
    "pinn_step": (tessera.grad(pinn_loss, argnums=(0, 1, 2, 3)),
                  lambda: [t((1, 16)), t((16,)), t((16, 1)), t((1,)), t((32, 1))]),
    # bf16 storage
    "bf16_rmsnorm": (lambda x: ops.rmsnorm_safe(x), lambda: [t((16, 512), ml_dtypes.bfloat16)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_planned_run_gives_the_walks_bits(name, monkeypatch):
    fn, make = CASES[name]
    f = tessera.jit(fn)
    first = make()
    f(*first)  # compiles and records the plan
    exe = f.executable()
    assert exe.run_plans == 1, exe.plan_refusals
    later = [make() for _ in range(3)]
    planned = [[bits(r) for r in exe.run(args)] for args in later]
    monkeypatch.setenv("TESSERA_RUN_PLANS", "0")
    walked = [[bits(r) for r in exe.run(args)] for args in later]
    assert planned == walked
    # The jit call itself takes the plan too, and matches float64 numpy.
    monkeypatch.delenv("TESSERA_RUN_PLANS")
    if name == "affine":
        x = later[0][0]
        (y,) = [f(x)]
        np.testing.assert_allclose(np.asarray(y.numpy(), np.float64), np.asarray(x.numpy(), np.float64) * 2 + 1,
                                   rtol=1e-6)


def test_each_planned_call_writes_fresh_buffers():
    f = tessera.jit(lambda x: ops.softmax_safe(x * 2.0))
    a, b = t((5, 40)), t((5, 40))
    ya = f(a)
    keep = bits(ya)
    yb = f(b)
    assert f.executable().run_plans == 1
    assert bits(ya) == keep, "a later call wrote into an earlier call's result"
    assert bits(yb) != keep
    e = np.exp(2.0 * np.asarray(b.numpy(), np.float64))
    np.testing.assert_allclose(np.asarray(yb.numpy(), np.float64), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_each_signature_of_a_shape_generic_executable_has_its_own_plan():
    @tessera.jit
    def f(x: tessera.Tensor["n", "fp32"]):
        return ops.sum(x * x)

    f(t((5,)))
    exe = f.executable()  # one executable for every n
    for n in (10, 1000, 10, 1000, 77, 77):
        x = t((n,))
        (y,) = exe.run([x])
        ref = float(np.sum(np.asarray(x.numpy(), np.float64) ** 2))
        assert abs(float(y.numpy()) - ref) <= 1e-5 * max(1.0, abs(ref))
    assert exe.run_plans == 4


def test_a_strided_argument_has_its_own_plan_which_copies_it(monkeypatch):
    """A view passed as an argument is copied before the kernels read it; the
    plan of that layout (its strides are part of the signature) replays the
    copy. The results are the walk's bits, for each of several views."""
    f = tessera.jit(lambda x: x * 3.0 - 1.0)
    f(t((6, 8)))
    exe = f.executable()
    views = [ops.transpose(t((8, 6))) for _ in range(3)]
    assert not views[0].is_contiguous()
    planned = [bits(exe.run([v])[0]) for v in views]
    assert exe.run_plans == 2, exe.plan_refusals
    monkeypatch.setenv("TESSERA_RUN_PLANS", "0")
    assert [bits(exe.run([v])[0]) for v in views] == planned
    assert planned[1] == bits(exe.run([views[1].contiguous()])[0])


def test_host_index_checks_refuse_a_plan_and_say_why():
    f = tessera.jit(lambda x, i: ops.gather(x, i, axis=0))
    x = t((10, 3))
    idx = tessera.tensor(np.array([3, 1, 9], np.int64))
    y1 = f(x, idx)
    y2 = f(x, idx)
    exe = f.executable()
    assert exe.run_plans == 0
    assert any("indices are read on the host" in r for r in exe.plan_refusals), exe.plan_refusals
    np.testing.assert_array_equal(np.asarray(y2.numpy()), np.asarray(x.numpy())[[3, 1, 9]])
    assert bits(y1) == bits(y2)
    bad = tessera.tensor(np.array([3, 10], np.int64))
    with pytest.raises(tessera.errors.TesseraError, match="out of range"):
        f(x, bad)


def test_a_planned_signature_still_rejects_arguments_of_another_policy():
    f = tessera.jit(lambda x: x + 1.0)
    f(t((4,)))
    f(t((4,)))
    exe = f.executable()
    assert exe.run_plans == 1
    with pytest.raises(tessera.errors.TesseraError):
        exe.run([t((4,), np.float64)])


def test_a_kernel_fault_in_a_planned_run_names_the_kernel_and_its_op(monkeypatch):
    """An int32 sum that overflows faults in its kernel: a planned call raises it as the walk does
    (the same message, naming the kernel, the Graph IR op and the user's line), and the next call
    runs clean."""
    f = tessera.jit(lambda v: ops.sum(v, axis=1))
    good = tessera.tensor(np.array([[5, 7]], np.int32))
    bad = tessera.tensor(np.array([[2**31 - 1, 1]], np.int32))
    assert f(good).numpy().tolist() == [12]
    assert f(good).numpy().tolist() == [12]
    assert f.executable().run_plans == 1
    with pytest.raises(tessera.ArgumentError, match=r"kernel k0 \(graph\.sum\).*overflows its int32") as planned:
        f(bad)
    assert f(good).numpy().tolist() == [12]
    monkeypatch.setenv("TESSERA_RUN_PLANS", "0")
    with pytest.raises(tessera.ArgumentError) as walked:
        f(bad)
    assert str(walked.value) == str(planned.value)


def test_one_tensor_passed_twice_is_part_of_the_signature(monkeypatch):
    """f(x, x) has its own plan, apart from f(x, y): a kernel reading "the
    first argument" must not read the second's buffer when they differ.
    Two different views of one storage walk, and say why."""
    f = tessera.jit(lambda a, b: a * 2.0 - b)
    x, y, z = t((50,)), t((50,)), t((50,))
    f(x, x)
    exe = f.executable()
    got = [bits(exe.run(args)[0]) for args in ([y, y], [x, z], [z, z], [y, x])]
    assert exe.run_plans == 2, exe.plan_refusals
    monkeypatch.setenv("TESSERA_RUN_PLANS", "0")
    assert got == [bits(exe.run(args)[0]) for args in ([y, y], [x, z], [z, z], [y, x])]
    monkeypatch.delenv("TESSERA_RUN_PLANS")
    w = t((100,))
    halves = [ops.slice(w, [0], [50]), ops.slice(w, [50], [100])]
    exe.run(halves)
    exe.run(halves)
    assert "two arguments are different views of one storage" in exe.plan_refusals


def test_threads_replaying_one_plan_each_get_their_own_results(monkeypatch):
    """Executable.run releases the GIL: threads recording, replaying and
    walking one executable at once (the workers of an index launch do) each
    get the walk's bits for their own inputs."""
    import threading

    f = tessera.jit(tessera.grad(mlp_loss, argnums=(1, 2)))
    inputs = [[t((8, 16)), t((16, 32)), t((32, 4))] for _ in range(8)]
    monkeypatch.setenv("TESSERA_RUN_PLANS", "0")  # no plan yet: the threads record it
    f(*inputs[0])
    exe = f.executable()
    want = [[bits(r) for r in exe.run(a)] for a in inputs]
    assert exe.run_plans == 0
    monkeypatch.delenv("TESSERA_RUN_PLANS")
    got = {}
    errors = []

    def work(k):
        try:
            for rep in range(25):
                i = (k + rep) % len(inputs)
                out = [bits(r) for r in exe.run(inputs[i])]
                if out != want[i]:
                    got[(k, rep)] = i
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert not got, f"results differ from the walk's for (thread, call) -> input: {got}"
    assert exe.run_plans == 1


def test_a_bad_run_plans_setting_is_an_error_naming_it(monkeypatch):
    f = tessera.jit(lambda x: x + 1.0)
    x = t((4,))
    f(x)
    monkeypatch.setenv("TESSERA_RUN_PLANS", "false")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_RUN_PLANS is 'false'; expected 0"):
        f.executable().run([x])
    monkeypatch.setenv("TESSERA_RUN_PLANS", "1")
    assert bits(f.executable().run([x])[0]) == bits(f(x))
