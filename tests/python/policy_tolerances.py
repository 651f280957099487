"""Helpers shared by the op tests that compare policies against float64 references:
the policies tested, each format's unit roundoff / mantissa bits / smallest normal
exponent, and the ulp of a value in a storage format."""

import numpy as np

POLICIES = ["fp32", "fp16 @accum(fp32)", "bf16 @accum(fp32)", "fp8_e4m3 @accum(fp32)", "fp16 @accum(fp16)", "fp64"]
UNIT = {"fp64": 2.0**-53, "fp32": 2.0**-24, "fp16": 2.0**-11}
MANT = {"fp64": 52, "fp32": 23, "fp16": 10, "bf16": 7, "fp8_e4m3": 3}
EMIN = {"fp64": -1022, "fp32": -126, "fp16": -14, "bf16": -126, "fp8_e4m3": -6}


def parts(policy):
    """(storage, accumulation) names of a policy string."""
    store = policy.split()[0]
    accum = policy.split("@accum(")[1].rstrip(")") if "@accum(" in policy else store
    return store, accum


def decoded(t):
    return np.asarray(t.numpy(), dtype=np.float64)


def ulp(v, store):
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0**EMIN[store])))
    return np.exp2(e - MANT[store])
