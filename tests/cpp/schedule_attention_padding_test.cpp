// Padded attention problems (graph/attention_ops.cpp, valid_queries and
// valid_keys; schedule/passes/pad_ragged_attention.cpp): on the valid rows
// a padded op gives the unpadded op's bits, whatever the padding keys hold,
// in the reference and in the compiled lane kernels; the pass pads only
// where the blocked kernels would run.
#include <gtest/gtest.h>

#include "schedule_test_support.h"
#include "tessera/ir/verifier.h"
#include "tessera/schedule/passes.h"

namespace tessera {
namespace {

using schedule_test::expect_bitwise_equal;
using schedule_test::sample;
using schedule_test::ScopedEnv;
using schedule_test::test_options;

// x [.., S, ..] along axis 2 padded to `length` rows: `fill` (a sample of
// the padded shape) past S, x before. With zero fill the padding is zeros.
Tensor pad_rows(const Tensor& x, std::int64_t length, const Tensor* fill) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t rows = shape[2];
  std::int64_t inner = 1;
  for (std::size_t d = 3; d < shape.size(); ++d) inner *= shape[d];
  shape[2] = length;
  const std::vector<double> from = x.to_values();
  std::vector<double> out = fill ? fill->to_values() : std::vector<double>(from.size() / rows * length, 0.0);
  const std::int64_t outer = static_cast<std::int64_t>(from.size()) / (rows * inner);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < rows * inner; ++i) {
      out[static_cast<std::size_t>(o * length * inner + i)] = from[static_cast<std::size_t>(o * rows * inner + i)];
    }
  }
  return Tensor::from_values(out, shape, x.policy());
}

// The first `rows` rows along axis 2.
Tensor first_rows(const Tensor& x, std::int64_t rows) {
  std::vector<std::int64_t> shape = x.shape();
  const std::int64_t length = shape[2];
  std::int64_t inner = 1;
  for (std::size_t d = 3; d < shape.size(); ++d) inner *= shape[d];
  const std::vector<double> from = x.to_values();
  const std::int64_t outer = static_cast<std::int64_t>(from.size()) / (length * inner);
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < rows * inner; ++i) out.push_back(from[static_cast<std::size_t>(o * length * inner + i)]);
  }
  shape[2] = rows;
  return Tensor::from_values(out, shape, x.policy());
}

std::string problem(std::int64_t sq, std::int64_t sk, bool causal, const std::string& valid) {
  const std::string q = "tensor<[2, 4, " + std::to_string(sq) + ", 64] fp32>";
  const std::string k = "tensor<[2, 2, " + std::to_string(sk) + ", 64] fp32>";
  const std::string rows = "tensor<[2, 4, " + std::to_string(sq) + "] fp32>";
  const std::string attrs = std::string("{causal = ") + (causal ? "true" : "false") + ", scale = 0.125" + valid + "}";
  return "func @f(%q: " + q + ", %k: " + k + ", %v: " + k + ") -> (" + q + ", " + rows + ") {\n"
         "  %a:2 = graph.flash_attn %q, %k, %v " + attrs + " : " + q + ", " + rows + "\n"
         "  return %a#0, %a#1\n}\n"
         "func @g(%q: " + q + ", %k: " + k + ", %v: " + k + ", %delta: " + rows + ", %lse: " + rows + ", %do: " + q +
         ") -> (" + q + ", " + k + ", " + k + ") {\n"
         "  %d:3 = graph.flash_attn_bwd %q, %k, %v, %delta, %lse, %do " + attrs + " : " + q + ", " + k + ", " + k + "\n"
         "  return %d#0, %d#1, %d#2\n}\n";
}

TEST(ScheduleAttentionPadding, PaddedProblemGivesTheUnpaddedBitsOnValidRows) {
  const NumericsPolicy f32 = default_policy(DType::fp32);
  const std::int64_t sq = 5, sk = 7, pq = 8, pk = 12;
  for (bool causal : {false, true}) {
    const std::string how = causal ? "causal" : "full";
    ir::Module plain = ir::parse_module(problem(sq, sk, causal, ""));
    ir::Module padded = ir::parse_module(problem(pq, pk, causal, ", valid_keys = 7, valid_queries = 5"));
    const Tensor q = sample({2, 4, sq, 64}, f32, 1, false), k = sample({2, 2, sk, 64}, f32, 2, false),
                 v = sample({2, 2, sk, 64}, f32, 3, false);
    // Padding keys hold values of their own: hidden, they change nothing.
    const Tensor qf = sample({2, 4, pq, 64}, f32, 4, false), kf = sample({2, 2, pk, 64}, f32, 5, false),
                 vf = sample({2, 2, pk, 64}, f32, 6, false);
    const std::vector<Tensor> args = {q, k, v};
    const std::vector<Tensor> pargs = {pad_rows(q, pq, &qf), pad_rows(k, pk, &kf), pad_rows(v, pk, &vf)};
    const auto want = graph::execute(plain, *plain.lookup("f"), args);
    const auto ref = graph::execute(padded, *padded.lookup("f"), pargs);
    const auto got = schedule::compile_executable(padded, "f", test_options())->run(pargs);
    for (std::size_t r = 0; r < 2; ++r) {
      expect_bitwise_equal(first_rows(ref[r], sq), want[r], how + " forward result " + std::to_string(r));
      expect_bitwise_equal(got[r], ref[r], how + " compiled forward result " + std::to_string(r));
    }
    // The backward: delta, lse and do zero-padded, as the pass pads them.
    const Tensor delta = sample({2, 4, sq}, f32, 7, false), dout = sample({2, 4, sq, 64}, f32, 8, false);
    const std::vector<Tensor> bargs = {q, k, v, delta, want[1], dout};
    const std::vector<Tensor> pbargs = {pargs[0], pargs[1], pargs[2], pad_rows(delta, pq, nullptr),
                                        pad_rows(want[1], pq, nullptr), pad_rows(dout, pq, nullptr)};
    const auto bwant = graph::execute(plain, *plain.lookup("g"), bargs);
    const auto bref = graph::execute(padded, *padded.lookup("g"), pbargs);
    const auto bgot = schedule::compile_executable(padded, "g", test_options())->run(pbargs);
    for (std::size_t r = 0; r < 3; ++r) {
      const std::int64_t rows = r == 0 ? sq : sk;
      expect_bitwise_equal(first_rows(bref[r], rows), bwant[r], how + " backward result " + std::to_string(r));
      expect_bitwise_equal(bgot[r], bref[r], how + " compiled backward result " + std::to_string(r));
    }
    // Padding keys are seen by no row: their dk and dv are zeros.
    for (std::size_t r = 1; r < 3; ++r) {
      const std::vector<double> g = bref[r].to_values();
      for (std::int64_t o = 0; o < 4; ++o) {
        for (std::int64_t i = sk * 64; i < pk * 64; ++i) ASSERT_EQ(g[static_cast<std::size_t>(o * pk * 64 + i)], 0.0);
      }
    }
  }
}

TEST(ScheduleAttentionPadding, InvalidCornersAreErrors) {
  auto parse = [](const std::string& valid, bool causal = false, const std::string& extra = "") {
    ir::Module m = ir::parse_module(problem(8, 12, causal, valid + extra));
    ir::verify(m);
  };
  EXPECT_THROW(parse(", valid_keys = 13"), Error);
  EXPECT_THROW(parse(", valid_queries = -1"), Error);
  EXPECT_THROW(parse(", valid_keys = 4", false, ", dropout = 0.5"), Error);
  EXPECT_THROW(parse(", valid_keys = 4, valid_queries = 6", true), Error);  // causal: 6 rows, 4 keys
  try {
    parse(", valid_keys = 13");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid_keys is 13; it must be in [1, 12]"), std::string::npos) << e.what();
  }
}

// The pass pads problems the blocked kernels would take but for their
// lengths, and only where the blocked kernels run: by default on the CPU
// (docs/design/0044), and fp32 ones on GPUs too (docs/design/0052).
TEST(ScheduleAttentionPadding, PassPadsRaggedLengthsWhereTheBlockedKernelsRun) {
  const std::string text = R"(
func @f(%q: tensor<[1, 2, 100, 64] bf16>, %k: tensor<[1, 2, 77, 64] bf16>, %v: tensor<[1, 2, 77, 64] bf16>)
    -> (tensor<[1, 2, 100, 64] bf16>) {
  %a:2 = graph.flash_attn %q, %k, %v {scale = 0.125} : tensor<[1, 2, 100, 64] bf16>, tensor<[1, 2, 100] fp32>
  return %a#0
}
)";
  auto count_in = [&](const std::string& source, const char* op, bool cuda) {
    ir::Module m = ir::parse_module(source);
    schedule::pad_ragged_attention(*m.lookup("f"), cuda);
    int n = 0;
    for (const auto& o : ir::function_body(*m.lookup("f")).ops()) n += o->name() == op;
    return n;
  };
  auto count = [&](const char* op) { return count_in(text, op, false); };
  EXPECT_EQ(count("graph.slice_embed"), 3);  // the CPU's default: the blocked kernels
  std::string fp32 = text;
  for (std::size_t at; (at = fp32.find("bf16")) != std::string::npos;) fp32.replace(at, 4, "fp32");
  EXPECT_EQ(count_in(fp32, "graph.slice_embed", false), 3);
  EXPECT_EQ(count_in(fp32, "graph.slice_embed", true), 3);  // GPUs take fp32's blocked kernels by default
  {
    ScopedEnv lanes("TESSERA_ATTENTION_BLOCKED", "0");
    EXPECT_EQ(count_in(fp32, "graph.slice_embed", true), 0);  // the lane kernels take any length
    EXPECT_EQ(count_in(fp32, "graph.slice_embed", false), 0);
  }
  {
    ScopedEnv blocked("TESSERA_ATTENTION_BLOCKED", "1");
    EXPECT_EQ(count("graph.slice_embed"), 3);  // q to 128 rows, k and v to 128 keys
    EXPECT_EQ(count("graph.slice"), 2);        // o and lse cut back
    ir::Module m = ir::parse_module(text);
    schedule::pad_ragged_attention(*m.lookup("f"), false);
    ir::verify(m);
    for (const auto& o : ir::function_body(*m.lookup("f")).ops()) {
      // By copy kernels: a strided view would be gathered through the host on a GPU.
      if (o->name() == "graph.slice") {
        EXPECT_TRUE(o->attrs().get_bool("copy"));
      }
      if (o->name() != "graph.flash_attn") continue;
      EXPECT_EQ(o->attrs().get_int("valid_queries"), 100);
      EXPECT_EQ(o->attrs().get_int("valid_keys"), 77);
      EXPECT_EQ(o->operand(0)->type().shape[2].size, 128);
    }
  }
  {
    ScopedEnv blocked("TESSERA_ATTENTION_BLOCKED", "0");
    EXPECT_EQ(count("graph.slice_embed"), 0);
  }
}

}  // namespace
}  // namespace tessera
