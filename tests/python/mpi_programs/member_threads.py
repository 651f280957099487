"""What the programs run under mpirun share: running this process's members
on threads of their own, and the inputs every member gets (the same in every
process, so each can compute the local backend's answer whole)."""

import threading

import numpy as np

import tessera


def threads(ranks, fn):
    """fn(rank) for each of `ranks` at once; results by rank (the first error raised)."""
    out, errors = {}, []

    def body(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)

    ts = [threading.Thread(target=body, args=(r,)) for r in ranks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return out


def inputs(n, shape, dtype, seed, uneven_dim=None):
    """One random tensor per member (integers for integer dtypes); `uneven_dim` grows by the member's rank."""
    rng = np.random.default_rng(seed)
    xs = []
    for r in range(n):
        s = list(shape)
        if uneven_dim is not None:
            s[uneven_dim] += r
        if dtype.startswith("int"):
            xs.append(tessera.tensor(rng.integers(-1000, 1000, size=s), dtype))
        else:
            xs.append(tessera.tensor(rng.standard_normal(s) * 3, dtype))
    return xs
