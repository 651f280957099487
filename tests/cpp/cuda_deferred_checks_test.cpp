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

}  // namespace
}  // namespace tessera
