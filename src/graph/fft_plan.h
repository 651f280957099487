// The FFT algorithm of graph.fft (docs/design/0016-complex-and-fft.md): one
// fixed sequence of arithmetic per transform length, so results depend on
// the length and the part type only (never on batch, tile or thread count).
//
// Lengths whose prime factors are 2, 3, 5 and 7 run a Stockham auto-sort
// FFT, one pass per radix (radices taken largest-first: 7s, 5s, 3s, then 4s
// and a final 2 if the power of two is odd). Pass p with radix R over the
// span Ns of the transforms already done maps input j (0 <= j < n/R) to R
// outputs:
//
//   v[r]  = x[j + r n/R] * w(Ns R, (j mod Ns) r)          r = 0 .. R-1
//   out k = sum over r = 0 .. R-1 of v[r] * w(R, r k)     (radix_butterfly)
//   y[(j / Ns) Ns R + (j mod Ns) + k Ns] = out k
//
// where the butterfly's sums run in radix_butterfly's order below, which
// pairs r with R - r so that each radix twiddle costs real products only,
// with w(N, q) = exp(-2 pi i q / N) (the conjugate for the inverse),
// computed in fp64 from q mod N and rounded once to the part type (exact
// 1, -i, -1, i where the angle is a multiple of pi / 2). Every
// product and sum is rounded to the part type T (float for complex64,
// double for complex128): a complex product is (ac - bd) + (ad + bc)i in
// that order; a twiddle that is exactly 1 (q = 0) is skipped, which is
// exact. Other lengths use Bluestein's chirp-z algorithm over a length
// M >= 2n - 1 (bluestein_length below):
//
//   c_j = exp(-pi i (j^2 mod 2n) / n)
//   a_j = x_j c_j (j < n, zero to M),  b_j = conj(c_|j|) (|j| < n, wrapped mod M)
//   X_k = c_k * IFFT_M(FFT_M(a) * FFT_M(b))_k * (1/M)
//
// with FFT_M(b) computed by the same Stockham passes. The normalization
// ("backward", "ortho", "forward") multiplies each output part by the
// factor rounded to T, as a last step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::graph::fft {

template <class T>
struct Cx {
  T re, im;
};

[[noreturn]] void unsupported_radix(int radix);

// One radix-R butterfly, out[k] = sum over r of v[r] w(R, r k), in the one
// order of arithmetic every backend follows: the reference's Plan and the
// compiled kernels (schedule/templates/fft.cpp) both build it here, so they
// cannot drift apart. `inner(q)` gives w(R, q) as (re, im); `ar` does part
// arithmetic, each result rounded to the part type: ar.add(x, y),
// ar.sub(x, y), and ar.scale(x, c), x times a part c of a radix twiddle.
//
// R = 2:  out0 = v0 + v1, out1 = v0 - v1.
// R = 4:  out0 = (v0 + v2) + (v1 + v3), out2 = (v0 + v2) - (v1 + v3),
//         out1, out3 = (v0 - v2) -+ s i (v1 - v3), s = Im w(4, 1) (-1
//         forward, 1 inverse): the radix-4 twiddles are quarter turns, so
//         no products.
// R odd:  with m = (R - 1) / 2 and, for r = 1 .. m, s_r = v_r + v_(R-r) and
//         d_r = v_r - v_(R-r) (w(R, q (R - r)) is conj w(R, q r)):
//           out0 = v0 + s_1 + ... + s_m
//           A_k  = v0 + c_k1 s_1 + ... + c_km s_m      (c_kr = Re w(R, rk))
//           B_k  = e_k1 d_1 + ... + e_km d_m          (e_kr = Im w(R, rk))
//           out k = A_k + i B_k, out (R - k) = A_k - i B_k   (k = 1 .. m)
//         each sum left to right: 4 m^2 real products where the DFT's sum
//         takes 4 (R - 1)^2.
template <class V, class InnerAt, class Arith>
void radix_butterfly(int R, const V* v, V* out, const InnerAt& inner, Arith& ar) {
  auto add = [&](const V& x, const V& y) { return V{ar.add(x.re, y.re), ar.add(x.im, y.im)}; };
  auto sub = [&](const V& x, const V& y) { return V{ar.sub(x.re, y.re), ar.sub(x.im, y.im)}; };
  if (R == 2) {
    out[0] = add(v[0], v[1]);
    out[1] = sub(v[0], v[1]);
    return;
  }
  if (R == 4) {
    const V s02 = add(v[0], v[2]), d02 = sub(v[0], v[2]), s13 = add(v[1], v[3]), d13 = sub(v[1], v[3]);
    out[0] = add(s02, s13);
    out[2] = sub(s02, s13);
    // -i d = (d.im, -d.re) and i d = (-d.im, d.re): additions and
    // subtractions of parts, exact where a product by the twiddle would be.
    const V minus_i{ar.add(d02.re, d13.im), ar.sub(d02.im, d13.re)};
    const V plus_i{ar.sub(d02.re, d13.im), ar.add(d02.im, d13.re)};
    const bool forward = inner(1).second < 0;
    out[1] = forward ? minus_i : plus_i;
    out[3] = forward ? plus_i : minus_i;
    return;
  }
  if (R % 2 == 0 || R < 3 || R > 15) unsupported_radix(R);
  const int m = (R - 1) / 2;
  V s[8], d[8];
  for (int r = 1; r <= m; ++r) {
    s[r] = add(v[r], v[R - r]);
    d[r] = sub(v[r], v[R - r]);
  }
  V total = v[0];
  for (int r = 1; r <= m; ++r) total = add(total, s[r]);
  out[0] = total;
  for (int k = 1; k <= m; ++k) {
    V a = v[0], e{};
    for (int r = 1; r <= m; ++r) {
      const auto w = inner((r * k) % R);
      a = add(a, V{ar.scale(s[r].re, w.first), ar.scale(s[r].im, w.first)});
      const V term{ar.scale(d[r].re, w.second), ar.scale(d[r].im, w.second)};
      e = r == 1 ? term : add(e, term);
    }
    // i e = (-e.im, e.re).
    out[k] = V{ar.sub(a.re, e.im), ar.add(a.im, e.re)};
    out[R - k] = V{ar.add(a.re, e.im), ar.sub(a.im, e.re)};
  }
}

// The radices of the Stockham passes of n (empty for n = 1), or none when n
// has a prime factor above 7.
std::vector<int> stockham_radices(std::int64_t n);
// The smallest 2/3/5/7-smooth integer >= n.
std::int64_t smooth_at_least(std::int64_t n);
// Bluestein's M for n points of `point_bytes` each (8 for complex64, 16 for
// complex128): the power of two at least 2n - 1 where it is at most 5/4 of
// the smallest smooth length and a line of it takes at most 64 KiB, else
// that smooth length. Radix-4 passes cost less per point than radix 3, 5
// and 7 ones (1024 points transform in 0.6-0.7x the time of 1000, on a CPU
// core and on an H200); the 64 KiB bound keeps every line that fitted in a GPU's
// shared memory with the smooth length fitting. A function of n and the
// dtype alone, so every target runs the same passes.
std::int64_t bluestein_length(std::int64_t n, std::int64_t point_bytes);

// The transforms of one length and direction: the pass radices and every
// twiddle, computed once (each twiddle is the same fp64 formula rounded
// once, so a plan changes nothing in the values, only the time).
template <class T>
class Plan {
 public:
  Plan(std::int64_t n, bool inverse);
  // One transform in place on data[0 .. n); no normalization.
  void execute(std::vector<Cx<T>>& data) const;
  // Passes [from, to) of a Stockham length in place on data[0 .. n): data
  // holds the array after pass `from` - 1 (the line itself for from = 0)
  // and receives the array after pass `to` - 1. Running [0, a) then [a, p)
  // is execute() to the bit (graph.fft_passes, a long line in two stages).
  void run_passes(std::vector<Cx<T>>& data, std::size_t from, std::size_t to) const;
  std::int64_t length() const { return n_; }

  // The plan's values, for compiled kernels that run the same arithmetic
  // (schedule/templates/fft.cpp): they read these twiddles, never their own.
  struct Pass {
    int radix;
    std::int64_t span;            // Ns * R
    std::vector<Cx<T>> outer;     // w(Ns R, q), q < Ns R
    std::vector<Cx<T>> inner;     // w(R, q), q < R
  };
  const std::vector<Pass>& passes() const { return passes_; }        // Stockham lengths (n > 1)
  std::int64_t bluestein_length() const { return m_; }                 // M, or 0 for Stockham lengths
  const std::vector<Pass>& forward_m() const { return forward_m_; }  // Bluestein: FFT_M
  const std::vector<Pass>& inverse_m() const { return inverse_m_; }  // Bluestein: IFFT_M (unscaled)
  const std::vector<Cx<T>>& chirp() const { return chirp_; }         // Bluestein: c_j, j < n
  const std::vector<Cx<T>>& kernel() const { return kernel_; }       // Bluestein: FFT_M(b)
  // Bluestein's last factor, 1/M rounded to T.
  T bluestein_scale() const { return static_cast<T>(1.0 / static_cast<double>(m_)); }

 private:
  void stockham(std::vector<Cx<T>>& x, std::vector<Cx<T>>& scratch, const std::vector<Pass>& passes,
                std::int64_t n, std::size_t from = 0, std::size_t to = SIZE_MAX) const;
  static std::vector<Pass> passes_of(std::int64_t n, bool inverse);

  std::int64_t n_;
  std::vector<Pass> passes_;          // Stockham lengths: the passes of n
  std::int64_t m_ = 0;                // Bluestein: M (bluestein_length)
  std::vector<Pass> forward_m_, inverse_m_;
  std::vector<Cx<T>> chirp_;          // c_j, j < n
  std::vector<Cx<T>> kernel_;         // FFT_M(b)
};

// Real input of even length n whose half h = n/2 has Stockham radices
// (n >= 4) transforms as a complex line of h points, z_j = x_2j + i x_2j+1,
// then one split pass: with A = Z_k mod h and B = Z_(h-k) mod h, for k <= h,
//
//   E = ((A.re + B.re) 0.5, (A.im - B.im) 0.5)     the even points' spectrum
//   D = ((A.re - B.re) 0.5, (A.im + B.im) 0.5),  O = (D.im, -D.re)   (-i D, the odd points')
//   X_k = E + O w_k,  w_k = w(n, k) (conjugated for the inverse)
//
// each operation rounded to T, the product as above. Half the passes of the
// full-length transform; r2c and c2r transforms take it (graph/fft_ops.cpp
// and the compiled kernels alike).
bool splits_real(std::int64_t n);
// w_k, k <= n/2, as the split pass reads them.
template <class T>
std::vector<Cx<T>> split_twiddles(std::int64_t n, bool inverse);
// X_k from A = Z_k mod h, B = Z_(h-k) mod h and w_k.
template <class T>
Cx<T> split_real(Cx<T> a, Cx<T> b, Cx<T> w);
// The inverse: c2r transforms of such an n read the half spectrum X_0 .. X_h
// and form, for k < h, with A = X_k and B = X_(h-k),
//
//   E = (A.re + B.re, A.im - B.im)       A + conj(B): the even points' spectrum
//   D = (A.re - B.re, A.im + B.im),  (p, q) = D w_k      A - conj(B), twiddled
//   Z_k = (E.re - q, E.im + p)            E + i D w_k
//
// each operation rounded to T (no halving: the h-point transform of E gives
// the even points of the n-point one). The h-point transform of Z then holds
// x_2j in its real parts and x_2j+1 in its imaginary parts. The imaginary
// parts of X_0 and X_h read as 0 (k = 0 takes both): they do not reach a
// real result, which the full-length form gets for free and the split must
// say.
template <class T>
Cx<T> unsplit_real(Cx<T> a, Cx<T> b, Cx<T> w);

// One transform of length n (any n >= 1), in place on data[0 .. n). `inverse`
// conjugates the twiddles; no normalization.
template <class T>
void transform(std::vector<Cx<T>>& data, std::int64_t n, bool inverse);

// The factor the normalization applies: forward transforms scale by 1/n for
// "forward", inverse ones by 1/n for "backward", both by 1/sqrt(n) for
// "ortho"; otherwise 1. Unknown names raise ArgumentError.
double norm_factor(const std::string& norm, std::int64_t n, bool inverse);

}  // namespace tessera::graph::fft
