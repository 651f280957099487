// Bulk conversion throughput on one core, as a ratio to a plain copy of the
// same number of bytes measured in the same run.
//
// Each conversion reads n float32 values and writes n encodings; the
// baseline is memcpy of the same n * 4 bytes. A ratio near 1 means the
// conversion runs at copy speed.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessera/numerics/convert.h"

namespace {

constexpr std::size_t kCount = 1 << 22;  // 4 Mi values: 16 MiB in, beyond the caches

const std::vector<float>& inputs() {
  static const std::vector<float> values = [] {
    std::vector<float> v(kCount);
    std::mt19937 gen(42);
    std::normal_distribution<float> dist(0.0f, 100.0f);
    for (float& x : v) x = dist(gen);
    return v;
  }();
  return values;
}

void BM_copy(benchmark::State& state) {
  const auto& in = inputs();
  std::vector<float> out(kCount);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), kCount * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kCount));
}

void BM_encode(benchmark::State& state, tessera::DType dtype, tessera::Rounding rounding) {
  const auto& in = inputs();
  std::vector<std::uint8_t> out(kCount * static_cast<std::size_t>(tessera::storage_bytes(dtype)));
  tessera::EncodeOptions options;
  options.rounding = rounding;
  for (auto _ : state) {
    tessera::encode(in.data(), kCount, dtype, out.data(), options);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kCount));
}

void BM_decode(benchmark::State& state, tessera::DType dtype) {
  std::vector<std::uint8_t> bits(kCount * static_cast<std::size_t>(tessera::storage_bytes(dtype)));
  tessera::encode(inputs().data(), kCount, dtype, bits.data());
  std::vector<float> out(kCount);
  for (auto _ : state) {
    tessera::decode(bits.data(), kCount, dtype, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kCount));
}

using tessera::DType;
using tessera::Rounding;
BENCHMARK(BM_copy)->Name("copy_fp32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_encode, fp32_to_bf16, DType::bf16, Rounding::nearest_even)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_encode, fp32_to_fp16, DType::fp16, Rounding::nearest_even)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_encode, fp32_to_fp8_e4m3, DType::fp8_e4m3, Rounding::nearest_even)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_encode, fp32_to_fp8_e5m2, DType::fp8_e5m2, Rounding::nearest_even)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_encode, fp32_to_fp8_e4m3_stochastic, DType::fp8_e4m3, Rounding::stochastic)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_decode, bf16_to_fp32, DType::bf16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_decode, fp8_e4m3_to_fp32, DType::fp8_e4m3)->Unit(benchmark::kMillisecond);

// Collects each benchmark's time per iteration so the ratios can be printed.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        times_[run.benchmark_name()] = run.GetAdjustedRealTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const auto base = times_.find("copy_fp32");
    if (base == times_.end()) return;
    std::printf("\nThroughput relative to copying the same %zu float32 values (copy = 1.00):\n", kCount);
    for (const auto& [name, time] : times_) {
      std::printf("  %-45s %6.2f  (%7.1f Mvalues/s)\n", name.c_str(), base->second / time,
                  static_cast<double>(kCount) / (time / 1e3) / 1e6);
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
