// Watched work (tessera/runtime/cuda.h) on a real GPU: a kernel that spins
// until a flag is set stands for a collective whose peer never comes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace cu = tessera::cuda;

namespace {

constexpr const char* kSpin = R"cuda(
extern "C" __global__ void spin(volatile int* flag) {
  while (*flag == 0) {
  }
}
extern "C" __global__ void nothing() {}
)cuda";

struct Spinner {
  cu::Module module;
  cu::DevicePtr flag = 0;
  Spinner() : module(cu::Module::load(0, cu::compile(kSpin, "spin.cu", 0))) {
    flag = cu::device_malloc(0, sizeof(int));
    const int zero = 0;
    cu::copy_to_device(0, flag, &zero, sizeof zero);
  }
  ~Spinner() { cu::device_free(0, flag); }
  void start() const {
    cu::LaunchConfig c;
    module.function("spin")(c, flag);
  }
  // Ends the kernel from a stream of its own (the default one is busy).
  void release() const {
    const int one = 1;
    cu::Stream side(0);
    cu::copy_to_device_async(flag, &one, sizeof one, side);
    side.synchronize();
  }
};

bool skip() { return !cu::available(); }

}  // namespace

TEST(GpuWatch, WorkPastItsTimeoutIsAbortedAndRaised) {
  if (skip()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  Spinner s;
  s.start();
  std::string aborted;
  cu::watch(0, {"spin #1", 0.5, [] { return std::string(); }, [&](const std::string& why) {
                  aborted = why;
                  s.release();
                  return std::string(" (released)");
                }});
  EXPECT_EQ(cu::watched(0), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    cu::synchronize(0);
    FAIL() << "the wait did not raise";
  } catch (const tessera::CollectiveError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("spin #1: not done 0.5 s after it was queued"), std::string::npos) << text;
    EXPECT_NE(text.find("(released)"), std::string::npos) << text;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 30.0);
  EXPECT_NE(aborted.find("spin #1"), std::string::npos);
  cu::synchronize(0);  // the abort ended the kernel
  EXPECT_EQ(cu::watched(0), 0u);
}

TEST(GpuWatch, AnErrorPolledWhileWaitingRaisesAtOnce) {
  if (skip()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  Spinner s;
  s.start();
  cu::watch(0, {"spin #2", 600, [] { return std::string("member cuda:1 failed: boom"); },
                [&](const std::string&) {
                  s.release();
                  return std::string();
                }});
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> host(1);
  try {
    cu::copy_to_host(0, host.data(), s.flag, sizeof(int));
    FAIL() << "the copy did not raise";
  } catch (const tessera::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("spin #2: member cuda:1 failed: boom"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  cu::synchronize(0);
}

TEST(GpuWatch, FinishedWorkIsNeverPolled) {
  if (skip()) GTEST_SKIP() << "no CUDA device: " << cu::unavailable_reason();
  Spinner s;
  cu::LaunchConfig c;
  s.module.function("nothing")(c);
  int polls = 0;
  cu::watch(0, {"nothing", 600, [&] {
                  ++polls;
                  return std::string("never asked once the work is done");
                },
                nullptr});
  cu::Event done(0);
  done.record_default_stream();
  while (!done.done()) {
  }
  cu::synchronize(0);  // the watched work is done: no poll, no error
  EXPECT_EQ(polls, 0);
  EXPECT_EQ(cu::watched(0), 0u);
}
