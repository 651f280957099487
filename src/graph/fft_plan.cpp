// The FFT algorithm of graph.fft: Stockham passes and Bluestein (fft_plan.h).
#include "graph/fft_plan.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tessera/numerics/trigonometric.h"
#include "tessera/support/error.h"

namespace tessera::graph::fft {

namespace {

// exp(-2 pi i q / N) (conjugated for the inverse) in fp64, rounded to T.
// q is reduced mod N first so the angle stays in [0, 2 pi). An angle that is
// a multiple of pi / 2 gives the exact value (1, -i, -1 or i), where cos and
// sin would leave 6e-17 for a zero.
template <class T>
Cx<T> twiddle(std::int64_t N, std::int64_t q, bool inverse) {
  q %= N;
  if ((4 * q) % N == 0) {
    const T s = inverse ? T(1) : T(-1);  // the sign of the imaginary part at a quarter turn
    switch ((4 * q) / N) {
      case 0: return {T(1), T(0)};
      case 1: return {T(0), s};
      case 2: return {T(-1), T(0)};
      default: return {T(0), static_cast<T>(-s)};
    }
  }
  const double angle = -2.0 * std::numbers::pi * static_cast<double>(q) / static_cast<double>(N);
  // Tessera's own sine and cosine: a plan's twiddles do not depend on the
  // host's C library.
  const elementary::SinCos sc = elementary::sincos(angle);
  return {static_cast<T>(sc.cos), static_cast<T>(inverse ? -sc.sin : sc.sin)};
}

template <class T>
Cx<T> mul(Cx<T> a, Cx<T> b) {
  const T ac = a.re * b.re, bd = a.im * b.im, ad = a.re * b.im, bc = a.im * b.re;
  return {static_cast<T>(ac - bd), static_cast<T>(ad + bc)};
}

template <class T>
Cx<T> add(Cx<T> a, Cx<T> b) {
  return {static_cast<T>(a.re + b.re), static_cast<T>(a.im + b.im)};
}

// radix_butterfly's part arithmetic on host values, each result rounded to T.
template <class T>
struct HostParts {
  T add(T x, T y) const { return static_cast<T>(x + y); }
  T sub(T x, T y) const { return static_cast<T>(x - y); }
  T scale(T x, double c) const { return static_cast<T>(static_cast<T>(c) * x); }
};

}  // namespace

template <class T>
std::vector<typename Plan<T>::Pass> Plan<T>::passes_of(std::int64_t n, bool inverse) {
  std::vector<Pass> passes;
  std::int64_t Ns = 1;
  for (int R : stockham_radices(n)) {
    Pass p{R, Ns * R, {}, {}};
    for (std::int64_t q = 0; q < p.span; ++q) p.outer.push_back(twiddle<T>(p.span, q, inverse));
    for (int q = 0; q < R; ++q) p.inner.push_back(twiddle<T>(R, q, inverse));
    passes.push_back(std::move(p));
    Ns *= R;
  }
  return passes;
}

template <class T>
void Plan<T>::stockham(std::vector<Cx<T>>& x, std::vector<Cx<T>>& y, const std::vector<Pass>& passes,
                       std::int64_t n, std::size_t from, std::size_t to) const {
  y.resize(static_cast<std::size_t>(n));
  to = std::min(to, passes.size());
  std::int64_t Ns = from == 0 ? 1 : passes[from - 1].span;
  for (std::size_t i = from; i < to; ++i) {
    const Pass& p = passes[i];
    const int R = p.radix;
    const std::int64_t stride = n / R;
    const auto inner = [&](int q) {
      const Cx<T> w = p.inner[static_cast<std::size_t>(q)];
      return std::pair<double, double>{w.re, w.im};
    };
    HostParts<T> parts;
    Cx<T> v[8], out[8];
    for (std::int64_t j = 0; j < stride; ++j) {
      const std::int64_t jm = j % Ns;
      for (int r = 0; r < R; ++r) {
        const Cx<T> a = x[static_cast<std::size_t>(j + r * stride)];
        const std::int64_t q = jm * r;
        v[r] = q == 0 ? a : mul(a, p.outer[static_cast<std::size_t>(q)]);
      }
      radix_butterfly(R, v, out, inner, parts);
      const std::int64_t base = (j / Ns) * p.span + jm;
      for (int k = 0; k < R; ++k) y[static_cast<std::size_t>(base + k * Ns)] = out[k];
    }
    x.swap(y);
    Ns = p.span;
  }
}

template <class T>
Plan<T>::Plan(std::int64_t n, bool inverse) : n_(n) {
  if (n <= 1) return;
  if (!stockham_radices(n).empty()) {
    passes_ = passes_of(n, inverse);
    return;
  }
  m_ = fft::bluestein_length(n, static_cast<std::int64_t>(sizeof(Cx<T>)));
  forward_m_ = passes_of(m_, false);
  inverse_m_ = passes_of(m_, true);
  // c_j = exp(-pi i (j^2 mod 2n) / n) = w(2n, j^2 mod 2n); j^2 mod 2n kept
  // exact by stepping: (j + 1)^2 = j^2 + 2j + 1.
  chirp_.resize(static_cast<std::size_t>(n));
  std::int64_t sq = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    chirp_[static_cast<std::size_t>(j)] = twiddle<T>(2 * n, sq, inverse);
    sq = (sq + 2 * j + 1) % (2 * n);
  }
  // b_j = conj(c_|j|), wrapped mod M, then FFT_M(b).
  kernel_.assign(static_cast<std::size_t>(m_), Cx<T>{0, 0});
  for (std::int64_t j = 0; j < n; ++j) {
    const Cx<T> conj{chirp_[static_cast<std::size_t>(j)].re, static_cast<T>(-chirp_[static_cast<std::size_t>(j)].im)};
    kernel_[static_cast<std::size_t>(j)] = conj;
    if (j > 0) kernel_[static_cast<std::size_t>(m_ - j)] = conj;
  }
  std::vector<Cx<T>> scratch;
  stockham(kernel_, scratch, forward_m_, m_);
}

template <class T>
void Plan<T>::run_passes(std::vector<Cx<T>>& x, std::size_t from, std::size_t to) const {
  if (m_ != 0 || from > to || to > passes_.size()) {
    raise(ErrorCode::Internal, "fft: passes [" + std::to_string(from) + ", " + std::to_string(to) + ") of a plan of " +
                                   std::to_string(passes_.size()) + " Stockham passes" +
                                   (m_ != 0 ? " (a Bluestein length has none)" : ""));
  }
  thread_local std::vector<Cx<T>> scratch;
  stockham(x, scratch, passes_, n_, from, to);
}

template <class T>
void Plan<T>::execute(std::vector<Cx<T>>& x) const {
  const std::int64_t n = n_;
  if (n <= 1) return;
  thread_local std::vector<Cx<T>> scratch;
  if (m_ == 0) {
    stockham(x, scratch, passes_, n);
    return;
  }
  thread_local std::vector<Cx<T>> a;
  a.assign(static_cast<std::size_t>(m_), Cx<T>{0, 0});
  for (std::int64_t j = 0; j < n; ++j) a[static_cast<std::size_t>(j)] = mul(x[static_cast<std::size_t>(j)], chirp_[static_cast<std::size_t>(j)]);
  stockham(a, scratch, forward_m_, m_);
  for (std::int64_t k = 0; k < m_; ++k) a[static_cast<std::size_t>(k)] = mul(a[static_cast<std::size_t>(k)], kernel_[static_cast<std::size_t>(k)]);
  stockham(a, scratch, inverse_m_, m_);
  const T scale = bluestein_scale();
  for (std::int64_t k = 0; k < n; ++k) {
    const Cx<T> c = mul(a[static_cast<std::size_t>(k)], chirp_[static_cast<std::size_t>(k)]);
    x[static_cast<std::size_t>(k)] = {static_cast<T>(c.re * scale), static_cast<T>(c.im * scale)};
  }
}

template class Plan<float>;
template class Plan<double>;

void unsupported_radix(int radix) {
  raise(ErrorCode::Internal, "fft: no butterfly for radix " + std::to_string(radix) + " (the passes take 2, 3, 4, 5 and 7)");
}

std::vector<int> stockham_radices(std::int64_t n) {
  std::vector<int> out;
  for (int p : {7, 5, 3}) {
    while (n % p == 0) {
      out.push_back(p);
      n /= p;
    }
  }
  while (n % 4 == 0) {
    out.push_back(4);
    n /= 4;
  }
  if (n % 2 == 0) {
    out.push_back(2);
    n /= 2;
  }
  if (n != 1) return {};
  return out;
}

std::int64_t smooth_at_least(std::int64_t n) {
  for (std::int64_t m = std::max<std::int64_t>(n, 1);; ++m) {
    std::int64_t r = m;
    for (int p : {2, 3, 5, 7}) {
      while (r % p == 0) r /= p;
    }
    if (r == 1) return m;
  }
}

std::int64_t bluestein_length(std::int64_t n, std::int64_t point_bytes) {
  const std::int64_t smooth = smooth_at_least(2 * n - 1);
  std::int64_t pow2 = 1;
  while (pow2 < 2 * n - 1) pow2 *= 2;
  constexpr std::int64_t kMaxPow2LineBytes = 64 * 1024;
  return 4 * pow2 <= 5 * smooth && pow2 * point_bytes <= kMaxPow2LineBytes ? pow2 : smooth;
}

bool splits_real(std::int64_t n) { return n >= 4 && n % 2 == 0 && !stockham_radices(n / 2).empty(); }

template <class T>
std::vector<Cx<T>> split_twiddles(std::int64_t n, bool inverse) {
  std::vector<Cx<T>> w;
  for (std::int64_t k = 0; k <= n / 2; ++k) w.push_back(twiddle<T>(n, k, inverse));
  return w;
}

template <class T>
Cx<T> split_real(Cx<T> a, Cx<T> b, Cx<T> w) {
  const T half = T(0.5);
  const Cx<T> e{static_cast<T>(static_cast<T>(a.re + b.re) * half), static_cast<T>(static_cast<T>(a.im - b.im) * half)};
  const Cx<T> d{static_cast<T>(static_cast<T>(a.re - b.re) * half), static_cast<T>(static_cast<T>(a.im + b.im) * half)};
  return add(e, mul(Cx<T>{d.im, static_cast<T>(-d.re)}, w));
}

template <class T>
Cx<T> unsplit_real(Cx<T> a, Cx<T> b, Cx<T> w) {
  const Cx<T> e{static_cast<T>(a.re + b.re), static_cast<T>(a.im - b.im)};
  const Cx<T> d = mul(Cx<T>{static_cast<T>(a.re - b.re), static_cast<T>(a.im + b.im)}, w);
  return {static_cast<T>(e.re - d.im), static_cast<T>(e.im + d.re)};
}

template std::vector<Cx<float>> split_twiddles<float>(std::int64_t, bool);
template std::vector<Cx<double>> split_twiddles<double>(std::int64_t, bool);
template Cx<float> split_real<float>(Cx<float>, Cx<float>, Cx<float>);
template Cx<double> split_real<double>(Cx<double>, Cx<double>, Cx<double>);
template Cx<float> unsplit_real<float>(Cx<float>, Cx<float>, Cx<float>);
template Cx<double> unsplit_real<double>(Cx<double>, Cx<double>, Cx<double>);

template <class T>
void transform(std::vector<Cx<T>>& data, std::int64_t n, bool inverse) {
  Plan<T>(n, inverse).execute(data);
}

template void transform<float>(std::vector<Cx<float>>&, std::int64_t, bool);
template void transform<double>(std::vector<Cx<double>>&, std::int64_t, bool);

double norm_factor(const std::string& norm, std::int64_t n, bool inverse) {
  if (norm == "backward") return inverse ? 1.0 / static_cast<double>(n) : 1.0;
  if (norm == "forward") return inverse ? 1.0 : 1.0 / static_cast<double>(n);
  if (norm == "ortho") return 1.0 / std::sqrt(static_cast<double>(n));
  raise(ErrorCode::ArgumentInvalid, "norm must be \"backward\", \"ortho\" or \"forward\", got \"" + norm + "\"");
}

}  // namespace tessera::graph::fft
