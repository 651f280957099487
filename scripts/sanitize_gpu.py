"""Representative compiled kernels on small shapes, for compute-sanitizer:

    compute-sanitizer --tool memcheck python scripts/sanitize_gpu.py
    compute-sanitizer --tool racecheck python scripts/sanitize_gpu.py [row lengths]

Runs the normalizations (held rows of whole and partial blocks, and a row
too long to hold), their gradients, a reduction, an elementwise chain and a
bf16 matrix product on cuda:0, and checks each result against the CPU
executable's (bit for bit where no tensor core is used; fp32 NaNs as NaNs),
so a run that the sanitizer lets through also computed the right values. Prints one line per
function and "sanitize_gpu: N functions ok" at the end.
"""

import sys

import numpy as np

import tessera

ops = tessera.ops


def same_bits(a, b):
    """Equal codes; an fp32 NaN matches any NaN (each processor's arithmetic
    gives NaNs its own payload)."""
    ca, cb = a.codes(), b.codes()
    if a.dtype == "fp32":
        na, nb = np.isnan(a.numpy()), np.isnan(b.numpy())
        return np.array_equal(na, nb) and np.array_equal(ca[~nb], cb[~nb])
    return np.array_equal(ca, cb)


def main():
    rng = np.random.default_rng(3)
    policy = "bf16 @accum(fp32)"
    checked = 0
    lengths = [int(a) for a in sys.argv[1:]] or [2048, 1000, 16400]
    for n in lengths:
        x = rng.standard_normal((4, n)) * 3
        x[1, 3] = np.inf
        X = tessera.tensor(x.astype(np.float32), policy)
        T = tessera.tensor(rng.standard_normal((4, n)).astype(np.float32), policy)
        G = tessera.tensor(rng.standard_normal(n).astype(np.float32), policy)
        fns = {
            "softmax": lambda a, t, g: ops.softmax_safe(a, axis=-1),
            "rmsnorm": lambda a, t, g: ops.rmsnorm_safe(a, g, axis=-1, eps=1e-6),
            "layernorm": lambda a, t, g: ops.layernorm_safe(a, g, axis=-1, eps=1e-5),
            "softmax grad": tessera.grad(lambda a, t, g: ops.sum(ops.softmax_safe(a, axis=-1) * t)),
            "layernorm grad": tessera.grad(lambda a, t, g: ops.sum(ops.layernorm_safe(a, axis=-1) * t)),
            "sum and gelu": lambda a, t, g: (ops.sum(a * t, axis=-1), ops.gelu(a + g)),
        }
        for name, fn in fns.items():
            j = tessera.jit(fn)
            got = j(X.to("cuda:0"), T.to("cuda:0"), G.to("cuda:0"))
            want = j(X, T, G)
            got = got if isinstance(got, (tuple, list)) else (got,)
            want = want if isinstance(want, (tuple, list)) else (want,)
            for a, b in zip(got, want):
                if not same_bits(a.to("cpu"), b):
                    sys.exit(f"sanitize_gpu: {name} on rows of {n} differs from the CPU executable")
            print(f"{name:16s} rows of {n}: same bits as the CPU")
            checked += 1
    a = tessera.tensor(rng.standard_normal((256, 192)).astype(np.float32), policy)
    b = tessera.tensor(rng.standard_normal((192, 128)).astype(np.float32), policy)
    mm = tessera.jit(lambda p, q: ops.gelu(ops.matmul(p, q)))
    got = mm(a.to("cuda:0"), b.to("cuda:0")).to("cpu").numpy().astype(np.float32)
    want = mm(a, b).numpy().astype(np.float32)
    if not np.allclose(got, want, rtol=2e-2, atol=2e-2):
        sys.exit("sanitize_gpu: the bf16 matrix product differs from the CPU executable")
    print("matmul + gelu    256x192x128: close to the CPU")
    checked += 1
    print(f"sanitize_gpu: {checked} functions ok")


if __name__ == "__main__":
    main()
