// The random template against the reference executor: the same Philox
// counters, so rand, randn and dropout agree bit for bit on the CPU.
#include "schedule_test_support.h"

namespace tessera {
namespace {

using schedule_test::check_against_reference;
using schedule_test::sample;

TEST(ScheduleRandom, RandRandnDropoutMatchReferenceBitwise) {
  for (const char* storage : {"fp32", "bf16 @accum(fp32)", "fp16", "fp8_e4m3 @accum(fp32)", "fp64"}) {
    SCOPED_TRACE(storage);
    const std::string s = storage;
    const std::string t = "tensor<[N, 33] " + s + ">";
    const std::string text =
        "func @r(%x: " + t + ") -> (tensor<[40, 33] " + s + ">, tensor<[7, 33] " + s + ">, " + t + ", " + t + ") {\n"
        "  %0 = graph.rand {policy = policy<" + s + ">, seed = 7, shape = shape<[40, 33]>, offset = 5} : tensor<[40, 33] " + s + ">\n"
        "  %1 = graph.randn {policy = policy<" + s + ">, seed = 8, shape = shape<[7, 33]>} : tensor<[7, 33] " + s + ">\n"
        "  %2 = graph.dropout %x {p = 0.25, seed = 9, offset = 1000} : " + t + "\n"
        "  %3 = graph.dropout %x {p = 0.0, seed = 9} : " + t + "\n"
        "  return %0, %1, %2, %3\n}\n";
    check_against_reference(text, "r", {sample({21, 33}, parse_policy(storage), 1)});
  }
}

TEST(ScheduleRandom, HugeSeedsAndOffsets) {
  const std::string text = R"(
func @h() -> (tensor<[64] fp32>) {
  %0 = graph.rand {policy = policy<fp32>, seed = 9007199254740993, shape = shape<[64]>, offset = 4294967290} : tensor<[64] fp32>
  return %0
}
)";
  check_against_reference(text, "h", {});
}

}  // namespace
}  // namespace tessera
