// The profiler (tessera/runtime/profiler.h).
#include "tessera/runtime/profiler.h"

#include <atomic>
#include <mutex>
#include <optional>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::profiler {
namespace {

using Clock = std::chrono::steady_clock;

// A GPU span's events, resolved when the profiler stops.
struct GpuTiming {
  std::size_t record = 0;
  int device = 0;
  std::shared_ptr<cuda::Event> begin, end;
};

struct State {
  std::mutex mutex;
  std::atomic<bool> on{false};
  Clock::time_point origin;
  std::vector<Record> records;
  std::vector<GpuTiming> gpu;
  // Per device: an event recorded when the device was first seen, and its
  // host time, which place the device's spans on the host's timeline.
  struct Base {
    int device;
    std::shared_ptr<cuda::Event> event;
    double host_us;
  };
  std::vector<Base> bases;
};

State& state() {
  static State s;
  return s;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(Clock::now() - state().origin).count();
}

}  // namespace

bool active() {
  return state().on.load(std::memory_order_relaxed);
}

void start() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.on) raise(ErrorCode::ArgumentInvalid, "the profiler is already running (tessera.profile does not nest)");
  s.records.clear();
  s.gpu.clear();
  s.bases.clear();
  s.origin = Clock::now();
  s.on = true;
}

std::vector<Record> stop() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.on) raise(ErrorCode::ArgumentInvalid, "the profiler is not running");
  s.on = false;
  for (const GpuTiming& g : s.gpu) {
    Record& r = s.records.at(g.record);
    r.duration_us = 1e3 * cuda::elapsed_ms(*g.begin, *g.end);
    for (const auto& b : s.bases) {
      if (b.device == g.device) r.start_us = b.host_us + 1e3 * cuda::elapsed_ms(*b.event, *g.begin);
    }
  }
  std::vector<Record> out = std::move(s.records);
  s.records.clear();
  s.gpu.clear();
  s.bases.clear();
  return out;
}

struct Span::Impl {
  std::size_t index = 0;
  bool gpu = false;
  bool open = true;
  Clock::time_point t0;
  std::shared_ptr<cuda::Event> end_event;
};

Span::Span(Record record) : impl_(std::make_unique<Impl>()) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  impl_->gpu = record.device != "cpu";
  record.start_us = now_us();
  impl_->index = s.records.size();
  if (impl_->gpu) {
    const int ordinal = cuda::parse_device(record.device);
    bool known = false;
    for (const auto& b : s.bases) known = known || b.device == ordinal;
    if (!known) {
      auto base = std::make_shared<cuda::Event>(ordinal);
      base->record_default_stream();
      s.bases.push_back({ordinal, base, now_us()});
    }
    auto begin = std::make_shared<cuda::Event>(ordinal);
    begin->record_default_stream();
    impl_->end_event = std::make_shared<cuda::Event>(ordinal);
    s.gpu.push_back({impl_->index, ordinal, begin, impl_->end_event});
  }
  s.records.push_back(std::move(record));
  impl_->t0 = Clock::now();
}

void Span::end() {
  if (!impl_->open) return;
  impl_->open = false;
  if (impl_->gpu) {
    impl_->end_event->record_default_stream();
    return;
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - impl_->t0).count();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (impl_->index < s.records.size()) s.records[impl_->index].duration_us = us;
}

Span::~Span() {
  try {
    end();
  } catch (...) {
  }
}

void record_compile(const std::string& function, const std::string& device, std::size_t kernels, bool cache_hit,
                    double seconds) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.on) return;
  Record r;
  r.kind = "compile";
  r.name = function + " (" + std::to_string(kernels) + (kernels == 1 ? " kernel)" : " kernels)");
  r.function = function;
  r.device = device;
  r.duration_us = seconds * 1e6;
  r.start_us = now_us() - r.duration_us;
  r.cache_hit = cache_hit;
  s.records.push_back(std::move(r));
}

double peak_bandwidth_gbs(const std::string& device) {
  if (device == "cpu" || !cuda::available()) return 0.0;
  const cuda::DeviceProperties p = cuda::device_properties(cuda::parse_device(device));
  // Double data rate: two transfers per memory clock, over the bus width.
  return 2.0 * static_cast<double>(p.memory_clock_khz) * 1e3 * static_cast<double>(p.memory_bus_bits) / 8.0 / 1e9;
}

}  // namespace tessera::profiler
