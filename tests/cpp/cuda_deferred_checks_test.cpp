// Deferred checks (tessera/runtime/cuda.h) are host bookkeeping: they run in
// order at the device's next host read, the first that raises propagates,
// and the later ones are dropped. No GPU is needed.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

TEST(CudaDeferredChecks, RunInOrderAndTheFirstFaultEndsThem) {
  const int device = 7;  // bookkeeping only: no device is touched
  std::vector<int> ran;
  cuda::defer_check(device, [&] { ran.push_back(1); });
  cuda::defer_check(device, [&] {
    ran.push_back(2);
    raise(ErrorCode::IndexOutOfRange, "kernel k2 (graph.gather): load index 9 out of range");
  });
  cuda::defer_check(device, [&] { ran.push_back(3); });
  EXPECT_EQ(cuda::pending_checks(device), 3u);
  EXPECT_EQ(cuda::pending_checks(device + 1), 0u);
  try {
    cuda::run_deferred_checks(device);
    FAIL() << "expected the second check's error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange);
    EXPECT_NE(std::string(e.what()).find("kernel k2 (graph.gather)"), std::string::npos);
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_EQ(cuda::pending_checks(device), 0u);
  EXPECT_NO_THROW(cuda::run_deferred_checks(device));
}

TEST(CudaDeferredChecks, AKeyedCheckIsPendingOnce) {
  // Runs sharing one fault record (an executable's, a graph's) leave one
  // check of it, however many runs are queued before the next read.
  const int device = 9;
  const int record = 0, other = 0;
  int reads = 0, others = 0, unkeyed = 0;
  for (int run = 0; run < 5; ++run) {
    cuda::defer_check(device, &record, [&] { ++reads; });
    cuda::defer_check(device, &other, [&] { ++others; });
    cuda::defer_check(device, [&] { ++unkeyed; });
  }
  EXPECT_EQ(cuda::pending_checks(device), 7u);  // one per key, and each unkeyed check
  cuda::run_deferred_checks(device);
  EXPECT_EQ(reads, 1);
  EXPECT_EQ(others, 1);
  EXPECT_EQ(unkeyed, 5);
  // Once it has run, the key's next check is pending again.
  cuda::defer_check(device, &record, [&] { ++reads; });
  EXPECT_EQ(cuda::pending_checks(device), 1u);
  cuda::run_deferred_checks(device);
  EXPECT_EQ(reads, 2);
}

}  // namespace
}  // namespace tessera
