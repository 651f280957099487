// Parser robustness: thousands of randomly damaged copies of valid IR text
// (fixed seed) must each either parse or raise tessera::Error, never crash,
// hang or throw anything else. Whatever does parse must print and re-parse to
// the same text and pass the verifier.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "ir_test_ops.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"

namespace tessera::ir {
namespace {

constexpr const char* kSeedText = R"(// seed module
func @f(%x: tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>, %y: tensor<[64] fp8_e4m3 @accum(fp32) @saturate>) -> (tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>, tensor<[B, 64] bool>) {
  %0 = graph.add %x, %y : tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>
  %1 = graph.gelu %0 {approximate = "tanh"} : tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>
  %2:2 = test.attrs %1, %y {b = true, f = -0.5, i = -3, ints = [1, 2], pol = policy<bf16 @accum(fp32) @stochastic_round>, reals = dense<[0.1, nan, -inf]>, s = "q\"uote\\", shp = shape<[B, 4]>} : tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>, tensor<[64] fp8_e4m3 @accum(fp32) @saturate>
  %3 = "graph.lt"(%2#0, %y) : (tensor<[B, 64] fp8_e4m3 @accum(fp32) @saturate>, tensor<[64] fp8_e4m3 @accum(fp32) @saturate>) -> (tensor<[B, 64] bool>)
  test.sink %2#1
  test.barrier
  return %1, %3
}

func @g() -> () {
  return
}
)";

// Characters that make damage interesting: the grammar's punctuation.
constexpr std::string_view kAlphabet = "%@#:=,(){}[]<>\"\\/-.0123456789aBxe_ \n\t";

// Nested regions whose ops use values of the enclosing block: every prefix
// of this function (a parse that stops inside a region) must raise cleanly.
// Destroying such a half-built function used a freed value's use list
// before Block::~Block dropped nested operands too (found by
// fuzz/ir_parser_fuzz under AddressSanitizer; a TESSERA_SANITIZE build of
// this test catches it).
constexpr const char* kNestedText = R"(func @group_sum(%x: gmem<[n] fp32>, %out: gmem<[G] fp32 mut>) -> () attributes {group_shape = [128], kernel = true, shared_bytes = 8192} {
  %0 = tile.smem_alloc {policy = policy<fp32>, shape = shape<[128]>} : smem<[128] fp32>
  %1 = tile.linear_id : lane<int64>
  %2 = tile.const {policy = policy<fp32>, value = 0.0} : lane<fp32>
  %3 = tile.symbol {name = "n"} : lane<int64>
  %4 = tile.group_size : lane<int64>
  %5 = tile.for %1, %3, %4, %2 : lane<fp32> {
    ^(%k: lane<int64>, %acc: lane<fp32>):
    %6 = tile.load_elem %x, %k : lane<fp32>
    %7 = tile.add %acc, %6 : lane<fp32>
    tile.yield %7
  }
  tile.store_elem %0, %1, %5
  tile.barrier
  %8 = tile.const {policy = policy<int64>, value = 0} : lane<int64>
  %9 = tile.cmp %1, %8 {pred = "eq"} : lane<bool>
  tile.if %9 {
    %10 = tile.reduce_sum %0 : lane<fp32>
    %11 = tile.group_id : lane<int64>
    tile.store_elem %out, %11, %10
    tile.yield
  } {
    tile.yield
  }
  return
}
)";

TEST(IrParserFuzz, EveryPrefixOfNestedRegionsParsesOrRaises) {
  const std::string text = kNestedText;
  ASSERT_NO_THROW(verify(parse_module(text, "nested.tir")));
  int rejected = 0;
  for (std::size_t n = 0; n < text.size(); ++n) {
    try {
      Module m = parse_module(text.substr(0, n), "prefix.tir");
      verify(m);
    } catch (const Error& e) {
      EXPECT_NE(e.code(), ErrorCode::Internal) << "prefix of " << n << ": " << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, static_cast<int>(text.size()) / 2);
}

TEST(IrParserFuzz, DamagedTextParsesOrRaisesTesseraError) {
  testing::register_test_ops();
  const std::string seed = kSeedText;
  // The seed itself is valid.
  Module ok = parse_module(seed, "seed.tir");
  ASSERT_EQ(print_module(parse_module(print_module(ok))), print_module(ok));

  std::mt19937_64 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string text = seed;
    // One to three edits per case: replace, delete, insert or truncate.
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      std::size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[at] = kAlphabet[rng() % kAlphabet.size()]; break;
        case 1: text.erase(at, 1); break;
        case 2: text.insert(at, 1, kAlphabet[rng() % kAlphabet.size()]); break;
        default: text.resize(at); break;
      }
    }
    try {
      Module m = parse_module(text, "fuzz.tir");
      verify(m);
      std::string printed = print_module(m);
      EXPECT_EQ(print_module(parse_module(printed)), printed) << "case " << iteration << ":\n" << text;
      ++parsed;
    } catch (const Error& e) {
      // Diagnostics always say where, except internal ones (which would be a bug).
      EXPECT_NE(e.code(), ErrorCode::Internal) << "case " << iteration << ": " << e.what() << "\n" << text;
      EXPECT_TRUE(e.where().valid()) << "case " << iteration << ": " << e.what() << "\n" << text;
      ++rejected;
    }
  }
  // Both outcomes happen (the damage is neither always harmless nor always fatal).
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace tessera::ir
