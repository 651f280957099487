// tessera::Kernel (include/tessera/runtime/kernel.h): kernels from source
// text, specialization, launch, inspect_ir and the autotuner's events and
// disk cache, through the C++ API. Expected values are computed here by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/runtime/kernel.h"
#include "tessera/runtime/tensor.h"

namespace tessera {
namespace {

// Each test gets its own compile cache under the build tree's temp dir.
class KernelRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-kernel-runtime-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    options_.cache_dir = dir_.string();
    options_.progress = [this](const AutotuneEvent& e) { events_.push_back(e); };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  KernelLaunchOptions options_;
  std::vector<AutotuneEvent> events_;
};

constexpr const char* kAddScaled = R"(
@kernel.autotune(space=dict(U=[1, 2, 3]))
def add_scaled(x: f32[n], y: mut f32[n], a: f32):
    i = tile.linear_id()
    if i < n:
        y[i] = y[i] + a * x[i] * f32(U)
)";

Tensor vec(std::vector<double> v) {
  return Tensor::from_values(v, {static_cast<std::int64_t>(v.size())}, default_policy(DType::fp32));
}

TEST_F(KernelRuntime, AutotuneTimesCopiesAndRunsTheWinnerOnce) {
  std::vector<Kernel> ks = kernels_from_source(kAddScaled, "add.tsr");
  ASSERT_EQ(ks.size(), 1u);
  const Kernel& k = ks[0];
  EXPECT_EQ(k.tuned_names(), std::vector<std::string>{"U"});
  Tensor x = vec({1, 2, 3, 4});
  Tensor y = vec({10, 20, 30, 40});
  k.launch(std::int64_t{-1}, {x, y, 0.5}, options_);
  // start, three candidates, chosen.
  ASSERT_EQ(events_.size(), 5u);
  EXPECT_EQ(events_.front().kind, AutotuneEvent::Kind::start);
  EXPECT_EQ(events_.front().total, 3);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(events_[i].kind, AutotuneEvent::Kind::measured);
    EXPECT_EQ(events_[i].index, i);
    EXPECT_EQ(events_[i].constants.at("U"), i);
    EXPECT_GT(events_[i].median_seconds, 0.0);
  }
  ASSERT_EQ(events_.back().kind, AutotuneEvent::Kind::chosen);
  const std::int64_t u = events_.back().constants.at("U");
  // y was updated exactly once, with the winner's U.
  const std::vector<double> got = y.to_values();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], 10.0 * (i + 1) + 0.5 * (i + 1) * static_cast<double>(u)) << i;
  EXPECT_NE(k.inspect_ir("tile").find("value = " + std::to_string(u)), std::string::npos);

  // A second object on the same source reads the stored choice from disk.
  events_.clear();
  Kernel again = kernels_from_source(kAddScaled, "add.tsr")[0];
  EXPECT_EQ(again.autotune(std::int64_t{-1}, {x, vec({0, 0, 0, 0}), 0.5}, options_).at("U"), u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, AutotuneEvent::Kind::cached);
  EXPECT_NE(events_[0].describe().find("autotune add_scaled: using U="), std::string::npos);
  // Another shape is another key.
  events_.clear();
  again.launch(std::int64_t{-1}, {vec({1, 1}), vec({0, 0}), 1.0}, options_);
  EXPECT_EQ(events_.front().kind, AutotuneEvent::Kind::start);
}

TEST_F(KernelRuntime, JitFixesNamesAndGridFunctionsSeeThem) {
  Kernel k = kernels_from_source(kAddScaled, "add.tsr")[0].jit({{"U", 3}});
  EXPECT_TRUE(k.tuned_names().empty());
  Tensor y = vec({1, 1, 1});
  std::vector<std::int64_t> seen;
  GridFunction grid = [&](const KernelConstants& c) {
    seen.push_back(c.at("U"));
    return std::int64_t{2};  // only the first two elements get a tile
  };
  k.launch(grid, {vec({1, 2, 3}), y, 1.0}, options_);
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(seen, std::vector<std::int64_t>{3});
  EXPECT_EQ(y.to_values(), (std::vector<double>{4, 7, 1}));
  EXPECT_THROW(k.jit({{"U", 2}}), ArgumentError);
  EXPECT_THROW(k.jit({{"V", 2}}), ArgumentError);
  EXPECT_THROW(k.inspect_ir("schedule"), ArgumentError);
}

TEST_F(KernelRuntime, LoadKernelsReadsFilesAndLocatesErrors) {
  const std::filesystem::path ok = dir_ / "ok.tsr";
  std::filesystem::create_directories(dir_);
  std::ofstream(ok) << kAddScaled;
  std::vector<Kernel> ks = load_kernels(ok.string());
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name(), "add_scaled");
  EXPECT_THROW(load_kernels((dir_ / "absent.tsr").string()), ArgumentError);
  try {
    // Indented source with a column offset, as Python hands it over.
    kernels_from_source("@kernel\ndef k(y: f32[n]):\n    y[0] = 1.0\n", "f.py", 10, frontend::SourceDialect::tsr, 4);
    FAIL() << "writing a parameter not marked mut must fail";
  } catch (const KernelTypeError& e) {
    EXPECT_EQ(e.where().file, "f.py");
    EXPECT_EQ(e.where().line, 12);
    EXPECT_EQ(e.where().column, 9);  // column 5 of the dedented text, plus 4
  }
}

}  // namespace
}  // namespace tessera
