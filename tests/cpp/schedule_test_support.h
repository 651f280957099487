// Helpers shared by the compiled-executable tests: sample tensors, bitwise
// comparison (NaN matches any NaN) and a compile-run-compare driver.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/graph/executor.h"
#include "tessera/ir/text.h"
#include "tessera/schedule/executable.h"
#include "tessera/support/error.h"

namespace tessera::schedule_test {

inline schedule::ExecutableOptions test_options() {
  schedule::ExecutableOptions o;
  o.cpu.cache_dir = (std::filesystem::temp_directory_path() / "tessera-schedule-tests").string();
  return o;
}

// Sets an environment variable for a scope (the knobs tests force, such as
// TESSERA_ROW_LANES), unsetting it at the end.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// Values covering signs, zero, tiny and large magnitudes, NaN and infinities.
inline Tensor sample(std::vector<std::int64_t> shape, const NumericsPolicy& p, unsigned seed, bool specials = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = normal(rng);
    if (specials && i % 97 == 5) v[i] = std::nan("");
    if (specials && i % 89 == 7) v[i] = (i % 2 ? 1.0 : -1.0) * INFINITY;
    if (i % 83 == 3) v[i] = 0.0;
  }
  return Tensor::from_values(v, std::move(shape), p);
}

// Bit for bit, except that a NaN matches any NaN: IEEE 754 leaves the sign
// and payload of an arithmetic NaN result open, and a compiler may commute
// the operands of a product (seen with g++ 13: -NaN * NaN gave +NaN).
// Complex tensors compare part by part (element i's parts are 2i and 2i + 1).
inline void expect_bitwise_equal(const Tensor& got_tensor, const Tensor& want_tensor, const std::string& what) {
  ASSERT_EQ(got_tensor.shape(), want_tensor.shape()) << what;
  ASSERT_EQ(got_tensor.policy(), want_tensor.policy()) << what;
  const bool parts = is_complex(got_tensor.dtype());
  const Tensor got = parts ? got_tensor.as_parts() : got_tensor;
  const Tensor want = parts ? want_tensor.as_parts() : want_tensor;
  const auto g = got.codes();
  const auto w = want.codes();
  const auto gv = got.to_values();
  const auto wv = want.to_values();
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(gv[i]) && std::isnan(wv[i])) continue;
    ASSERT_EQ(g[i], w[i]) << what << ": element " << i << " differs (value " << got.to_values()[i] << " vs reference "
                          << want.to_values()[i] << ")";
  }
}

// Compiles `text`'s function `name`, runs it and the reference on `args`, compares.
inline std::shared_ptr<schedule::Executable> check_against_reference(const std::string& text, const std::string& name,
                                                             const std::vector<Tensor>& args) {
  ir::Module m = ir::parse_module(text);
  auto exe = schedule::compile_executable(m, name, test_options());
  auto got = exe->run(args);
  auto want = graph::execute(m, *m.lookup(name), args);
  EXPECT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    expect_bitwise_equal(got[i], want[i], name + " result " + std::to_string(i));
  }
  return exe;
}

}  // namespace tessera::schedule_test
