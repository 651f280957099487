"""Derives the constants of tessera::elementary::erf
(include/tessera/numerics/elementary.h) and prints them as C++ lines.

- Taylor coefficients of erf(a) / a in z = a^2, for a < 1:
  (2 / sqrt(pi)) (-1)^n / (n! (2n + 1)), n = 0..33, each the double nearest
  its exact value (computed with 60 decimal digits).
- 1 / (2n + 1)!!, n = 0..35, for 1 <= a < 2, where
  erf(a) = (2 / sqrt(pi)) a e^(-a^2) sum (2a^2)^n / (2n + 1)!! (terms all
  positive: no cancellation, unlike the Taylor series there).
- Chebyshev coefficients, on [2, 6] (t = (a - 4) / 2), of
  g(a) = e^(a^2) erfc(a), interpolated at the 25 Chebyshev points of degree
  24 from values computed with 80 digits (erfc from its Taylor series).
  erf(a) = 1 - e^(-a^2) g(a) there; g's relative error (about 13 ulp at
  worst, measured here) moves erf by under half an ulp, since erfc(a) <=
  0.0047 on [2, 6].

- Chebyshev coefficients, on s = a^2 in [0, 16] (u = s / 8 - 1), of
  f(s) = erf(a) / a, degree 28, for erf_f32_or_nan (fp32 results: a
  relative error near 2^-46, one form for every |x| < 4, no branches):
  the discrete cosine sums over the 29 Chebyshev points of values computed
  with 60 digits.

Run: python scripts/fit_erf.py (numpy only; the values are reproducible).
"""

import math
from decimal import Decimal, getcontext

import numpy as np

PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def erf_decimal(x):
    x = Decimal(x)
    z, term, total, n = x * x, x, x, 0
    while True:
        n += 1
        term = term * (-z) / n
        step = term / (2 * n + 1)
        total += step
        if abs(step) < Decimal(10) ** -70:
            return total * 2 / PI.sqrt()


def g_decimal(a):
    a = Decimal(a)
    return (a * a).exp() * (1 - erf_decimal(a))


DEGREE, LOW = 24, 2.0
F32_DEGREE = 28


def erf_over_a(s):
    """erf(sqrt s) / sqrt s, for s >= 0, as a Decimal."""
    s = Decimal(s)
    if s == 0:
        return 2 / PI.sqrt()
    a = s.sqrt()
    return erf_decimal(a) / a


def f32_chebyshev():
    """Chebyshev coefficients of erf(a) / a in u = a^2 / 8 - 1 on a^2 in [0, 16]."""
    n = F32_DEGREE
    nodes = [math.cos(math.pi * (k + 0.5) / (n + 1)) for k in range(n + 1)]
    values = [erf_over_a(8 * Decimal(x) + 8) for x in nodes]
    coef = []
    for j in range(n + 1):
        c = sum(v * Decimal(math.cos(math.pi * j * (k + 0.5) / (n + 1))) for k, v in enumerate(values)) * 2 / (n + 1)
        coef.append(float(c))
    coef[0] /= 2
    return coef


def main():
    getcontext().prec = 60
    taylor = []
    fact = Decimal(1)
    for n in range(34):
        if n:
            fact *= n
        c = 2 / PI.sqrt() * (-1) ** n / (fact * (2 * n + 1))
        taylor.append(float(c))
    odd = []  # 1 / (2n + 1)!!, n = 0..35
    double_fact = Decimal(1)
    for n in range(36):
        double_fact *= 2 * n + 1
        odd.append(float(1 / double_fact))
    getcontext().prec = 80
    deg, lo, hi = DEGREE, LOW, 6.0
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    k = np.arange(deg + 1)
    t = np.cos(np.pi * (k + 0.5) / (deg + 1))
    values = np.array([float(g_decimal(mid + half * x)) for x in t])
    cheb = np.polynomial.chebyshev.chebfit(t, values, deg)
    print("// Taylor, n = 0..33:")
    print(", ".join(v.hex() for v in taylor))
    print("// 1 / (2n + 1)!!, n = 0..35:")
    print(", ".join(v.hex() for v in odd))
    print("// Chebyshev of g on [2, 6], degree 0..24:")
    print(", ".join(float(v).hex() for v in cheb))
    worst = 0.0
    for a in np.linspace(lo, hi, 401):
        v = np.polynomial.chebyshev.chebval((a - mid) / half, cheb)
        ref = float(g_decimal(float(a)))
        worst = max(worst, abs(v - ref) / ref / 2.0 ** -52)
    print(f"// g's largest relative error on 401 points: {worst:.1f} ulp")
    getcontext().prec = 60
    print("// Chebyshev of erf(a) / a in u = a^2 / 8 - 1, degree 0..28 (erf_f32_or_nan):")
    print(", ".join(v.hex() for v in f32_chebyshev()))


if __name__ == "__main__":
    main()
