// Helpers shared by the distributed layer's tests: device names of virtual
// CPU meshes, and the message of an expected error.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::dist::test_util {

inline std::vector<std::string> cpus(int n) {
  std::vector<std::string> d;
  for (int i = 0; i < n; ++i) d.push_back("cpu:" + std::to_string(i));
  return d;
}

// The message of the Error `f` raises, checking its code; a test failure when it raises none.
template <class F>
std::string error_of(F f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

}  // namespace tessera::dist::test_util
