// Kernel language semantic checks: every diagnostic (mutability, divergence,
// shared budget, types and shapes, names with suggestions), each located
// with file:line:col, plus programs that must be accepted.
#include <gtest/gtest.h>

#include "frontend_test_util.h"

namespace tessera::frontend {
namespace {

using testing::parse_error;

struct SemaCase {
  const char* name;
  const char* source;
  ErrorCode code;
  const char* message;  // a substring of the message
  int line, column;
};

// Shared prologue for most cases: a 128-tile group with two buffers.
#define GROUP "@kernel tile[(128,)]\ndef f(x: f32[n], y: mut f32[n], alpha: f32):\n"

const SemaCase kCases[] = {
    // Mutability.
    {"store to non-mut", "@kernel\ndef f(x: f32[n], y: f32[n]):\n    i = tile.linear_id()\n    y[i] = x[i]\n",
     ErrorCode::KernelType, "cannot write to parameter 'y': it is not declared mut", 4, 5},
    {"tile.store to non-mut", "@kernel\ndef f(x: f32[n]):\n    tile.store(x, index=0, value=1.0)\n",
     ErrorCode::KernelType, "cannot write to parameter 'x'", 3, 16},
    {"aug-assign to non-mut", "@kernel\ndef f(x: f32[n]):\n    x[0] += 1.0\n", ErrorCode::KernelType,
     "cannot write to parameter 'x'", 3, 5},
    {"rebinding a buffer", "@kernel\ndef f(x: f32[n], y: f32[n]):\n    x = y\n", ErrorCode::KernelType,
     "cannot rebind buffer parameter 'x'", 3, 5},
    // Divergence.
    {"barrier under lane-divergent if", GROUP "    i = tile.linear_id()\n    if i < 64:\n        tbarrier()\n",
     ErrorCode::KernelType,
     "tbarrier() is group-cooperative and must run under uniform control flow, but the condition on line 4", 5, 9},
    {"barrier under divergence carried by a loop",
     GROUP
     "    j = 0\n    for k in range(4):\n        if j == 0:\n            tbarrier()\n        j = tile.linear_id()\n",
     ErrorCode::KernelType, "condition on line 5", 6, 13},
    {"barrier in a loop with lane-varying bounds",
     GROUP "    for k in range(tile.linear_id(), n):\n        tbarrier()\n", ErrorCode::KernelType, "tbarrier()", 4, 9},
    {"cp_async under divergence",
     GROUP
     "    s = tshared.alloc[f32](128)\n    if tile.linear_id() == 0:\n        cp_async.shared.global(s, x[0:128])\n",
     ErrorCode::KernelType, "cp_async.shared.global() is group-cooperative", 5, 9},
    {"tshared.alloc under divergence", GROUP "    if tile.linear_id() == 0:\n        s = tshared.alloc[f32](128)\n",
     ErrorCode::KernelType, "tshared.alloc is group-cooperative", 4, 13},
    {"tile.mma under divergence",
     GROUP "    a = tile.zeros((16, 16))\n    if x[tile.linear_id()] > 0.0:\n        a = tile.mma(a, a, acc=a)\n",
     ErrorCode::KernelType, "tile.mma is group-cooperative", 5, 13},
    {"tile load under a divergent and",
     GROUP "    i = tile.linear_id()\n    while i < n and tile.linear_id() > 2:\n        t = tile.load(x, rows=(0, "
           "16))\n        i = i + 1\n",
     ErrorCode::KernelType, "tile.load of a tile is group-cooperative", 5, 13},
    {"value loaded from a written buffer is divergent",
     GROUP "    y[0] = 1.0\n    if y[0] > 0.0:\n        tbarrier()\n", ErrorCode::KernelType, "condition on line 4", 5,
     9},
    // Shared budget.
    {"over the declared budget",
     "@kernel tile[(128,)] shared(1_KiB)\ndef f(x: f32[n]):\n    a = tshared.alloc[f32](128)\n    b = "
     "tshared.alloc[f32](256)\n",
     ErrorCode::KernelType,
     "brings the group's shared memory to 1536 bytes, over the budget of 1024 bytes (declared shared(1_KiB))", 4, 9},
    {"over the default budget", "@kernel tile[(128,)]\ndef f(x: f32[n]):\n    a = tshared.alloc[f32]((128, 128))\n",
     ErrorCode::KernelType, "over the budget of 49152 bytes (the default", 3, 9},
    // Types and shapes.
    {"float index", GROUP "    y[0.5] = 1.0\n", ErrorCode::KernelType, "an index must be an integer, got fp32 scalar",
     3, 7},
    {"rank mismatch", GROUP "    y[0, 1] = 1.0\n", ErrorCode::KernelType, "'y' has 1 dimension but is indexed with 2",
     3, 5},
    {"non-bool condition", GROUP "    if n:\n        pass\n", ErrorCode::KernelType, "an if condition must be a bool",
     3, 8},
    {"variable changes type", GROUP "    a = 0\n    a = x[0]\n", ErrorCode::KernelType,
     "'a' is int64 scalar (assigned on line 3) but is assigned fp32 scalar here", 4, 9},
    {"aug-assign changes type", GROUP "    a = 0\n    a += 1.5\n", ErrorCode::KernelType, "a variable keeps one type",
     4, 5},
    {"integer true division", GROUP "    a = n / 2\n", ErrorCode::KernelType, "use '//'", 3, 9},
    {"float floor division", GROUP "    a = alpha // 2.0\n", ErrorCode::KernelType, "only defined on integers", 3, 9},
    {"bool arithmetic", GROUP "    a = (n > 1) + 1\n", ErrorCode::KernelType, "arithmetic '+' on bool values", 3, 9},
    {"tile arithmetic", GROUP "    a = tile.zeros((4, 4))\n    b = a + a\n", ErrorCode::KernelType,
     "arithmetic on tile values is not supported", 4, 9},
    {"mma shape mismatch", GROUP "    a = tile.zeros((16, 8))\n    c = tile.mma(a, a)\n", ErrorCode::KernelType,
     "a is [16, 8] and b is [16, 8]: a's columns must equal b's rows", 4, 9},
    {"mma acc shape", GROUP "    a = tile.zeros((16, 8))\n    b = tile.zeros((8, 4))\n    c = tile.mma(a, b, acc=a)\n",
     ErrorCode::KernelType, "acc must be a tile [16, 4]", 5, 28},
    {"mma accum disagrees with acc",
     GROUP "    a = tile.zeros((4, 4), f16)\n    c = tile.zeros((4, 4))\n    d = tile.mma(a, a, acc=c, accum=f16)\n",
     ErrorCode::KernelType, "accum=fp16 disagrees with acc", 5, 37},
    {"tile store window mismatch",
     GROUP "    a = tile.zeros((16, 16))\n    tile.store(y, rows=(0, 8), value=tile.zeros((16,)))\n",
     ErrorCode::KernelType, "the window is [8] but the value is tile [16] fp32", 4, 5},
    {"tile store of a scalar", GROUP "    tile.store(y, rows=(0, 8), value=1.0)\n", ErrorCode::KernelType,
     "stores a tile, got fp32 scalar", 3, 38},
    {"cp_async length mismatch", GROUP "    s = tshared.alloc[f32](128)\n    cp_async.shared.global(s, x[0:64])\n",
     ErrorCode::KernelType, "the slice copies 64 elements along dimension 0 but the destination holds 128", 4, 33},
    {"cp_async unknown length", GROUP "    s = tshared.alloc[f32](128)\n    cp_async.shared.global(s, x[0:n])\n",
     ErrorCode::KernelType, "compile-time constant", 4, 33},
    {"cp_async dtype mismatch",
     "@kernel tile[(128,)]\ndef f(x: f16[n]):\n    s = tshared.alloc[f32](128)\n    cp_async.shared.global(s, "
     "x[0:128])\n",
     ErrorCode::KernelType, "the source is fp16 but the destination is fp32", 4, 5},
    {"reduce_sum of a global buffer", GROUP "    a = reduce_sum(x)\n", ErrorCode::KernelType,
     "reduce_sum takes a shared buffer", 3, 20},
    {"tile load needs a window", GROUP "    a = tile.load(x)\n", ErrorCode::KernelType,
     "needs index= (one element) or rows=", 3, 9},
    {"tile extent not constant", GROUP "    a = tile.load(x, rows=(0, n))\n", ErrorCode::KernelType,
     "must be a compile-time integer", 3, 31},
    {"cols on a 1-D buffer", GROUP "    a = tile.load(x, rows=(0, 8), cols=(0, 8))\n", ErrorCode::KernelType, "is 1-D",
     3, 35},
    {"slice outside cp_async", GROUP "    a = x[0:4]\n", ErrorCode::KernelType, "a slice is only valid as the source",
     3, 11},
    {"tuple count mismatch", GROUP "    a, b = 1, 2, 3\n", ErrorCode::KernelType, "assigning 3 values to 2 targets", 3,
     12},
    {"return with a value", GROUP "    return 1\n", ErrorCode::KernelType, "kernels return nothing", 3, 12},
    {"early return", GROUP "    if n > 1:\n        return\n    pass\n", ErrorCode::KernelType,
     "only allowed as the kernel's last", 4, 9},
    {"ellipsis body", "@kernel\ndef f(x: f32[n]):\n    ...\n", ErrorCode::KernelType, "has no body ('...')", 3, 5},
    {"non-positive constant step", GROUP "    for k in range(0, n, 0):\n        pass\n", ErrorCode::KernelType,
     "a loop step must be positive", 3, 26},
    {"prefetch not constant", GROUP "    for k in tile.range(n, step=1, prefetch=n):\n        pass\n",
     ErrorCode::KernelType, "prefetch= must be a compile-time integer", 3, 45},
    {"loop over a non-range", GROUP "    for k in x:\n        pass\n", ErrorCode::KernelType, "iterates over range", 3,
     14},
    {"assigning a shape symbol", GROUP "    n = 3\n", ErrorCode::KernelType, "it is a shape symbol", 3, 5},
    {"assigning a built-in", GROUP "    tile = 3\n", ErrorCode::KernelType, "it is a built-in name", 3, 5},
    {"param shadows built-in", "@kernel\ndef f(tile: f32[n]):\n    pass\n", ErrorCode::KernelType,
     "shadows the built-in", 2, 7},
    {"symbol is also a parameter", "@kernel\ndef f(x: f32[n], n: int64):\n    pass\n", ErrorCode::KernelType,
     "is also a parameter name", 2, 7},
    {"swizzle value", GROUP "    s = tshared.alloc[f32](128, swizzle=\"zigzag\")\n", ErrorCode::KernelType,
     "swizzle= takes \"xor\" or \"none\"", 3, 41},
    // Names.
    {"misspelled built-in", GROUP "    i = tile.linar_id()\n", ErrorCode::KernelType,
     "unknown built-in 'tile.linar_id'; did you mean 'tile.linear_id'?", 3, 9},
    {"misspelled variable", GROUP "    y[0] = alpah * x[0]\n", ErrorCode::KernelType,
     "unknown name 'alpah'; did you mean 'alpha'?", 3, 12},
    {"misspelled function", GROUP "    tbarier()\n", ErrorCode::KernelType, "did you mean 'tbarrier'?", 3, 5},
    {"misspelled keyword", GROUP "    for k in tile.range(n, stpe=2):\n        pass\n", ErrorCode::KernelType,
     "unknown keyword 'stpe' for tile.range(); did you mean 'step'?", 3, 28},
    {"misspelled store keyword", GROUP "    tile.store(y, index=0, valeu=1.0)\n", ErrorCode::KernelType,
     "did you mean 'value'?", 3, 28},
    {"unknown name without a hint", GROUP "    a = zzzzzz\n", ErrorCode::KernelType, "unknown name 'zzzzzz'", 3, 9},
    {"defined in one branch only", GROUP "    if n > 1:\n        a = 1\n    y[0] = a\n", ErrorCode::KernelType,
     "'a' may be undefined here: 'a' is only assigned in one branch of the if on line 3", 5, 12},
    {"defined only inside a loop", GROUP "    for k in range(3):\n        a = 1\n    y[0] = a\n", ErrorCode::KernelType,
     "only defined inside the loop on line 3", 5, 12},
    {"function used as a value", GROUP "    a = tbarrier\n", ErrorCode::KernelType, "is a function: call it", 3, 9},
    {"tf32 in a cast", GROUP "    a = tf32(alpha)\n", ErrorCode::KernelType, "unknown name 'tf32'", 3, 9},
};

TEST(FrontendSema, EveryDiagnosticIsLocated) {
  for (const SemaCase& c : kCases) {
    SCOPED_TRACE(c.name);
    Error e = parse_error(c.source);
    EXPECT_EQ(e.code(), c.code) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    EXPECT_EQ(e.where().line, c.line) << e.what();
    EXPECT_EQ(e.where().column, c.column) << e.what();
    std::string text = e.what();
    EXPECT_NE(text.find("k.tsr:"), std::string::npos) << text;
    EXPECT_NE(text.find("^"), std::string::npos) << text;
  }
}

TEST(FrontendSema, KernelTypeErrorsAreTheKernelTypeClass) {
  try {
    parse_kernels("@kernel\ndef f(x: f32[n]):\n    x[0] = 1.0\n", "k.tsr");
    FAIL() << "no error";
  } catch (const KernelTypeError& e) {
    EXPECT_EQ(e.code_string(), "TE4001");
    EXPECT_NE(std::string(e.what()).find("  x[0] = 1.0\n      ^\n"), std::string::npos) << e.what();
  }
}

TEST(FrontendSema, UniformControlIsAccepted) {
  // Group-cooperative ops under conditions every tile agrees on.
  EXPECT_NO_THROW(parse_kernels(GROUP "    s = tshared.alloc[f32](128)\n"
                                      "    if group_linear_id() < grid_groups and n > 4:\n"
                                      "        cp_async.shared.global(s, x[0:128])\n"
                                      "        tbarrier()\n"
                                      "    for k in range(0, n, group_tile_count()):\n"
                                      "        tbarrier()\n"
                                      "    a = x[3] * alpha\n"
                                      "    if a > 0.0:\n"
                                      "        tbarrier()\n",
                                "k.tsr"));
  // Without a group shape every tile is alone in its group: linear_id is uniform.
  EXPECT_NO_THROW(
      parse_kernels("@kernel\ndef f(x: f32[n]):\n    if tile.linear_id() < n:\n        tbarrier()\n", "k.tsr"));
}

TEST(FrontendSema, SpecializationNamesAreChecked) {
  std::vector<KernelDecl> ks = parse_kernels(testing::read_text(testing::conformance_path("gemm_tile.tsr")), "g.tsr");
  try {
    check_kernel(ks[0], {{"BMM", 32}});
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(e.message().find("no compile-time parameter 'BMM'; did you mean 'BM'?"), std::string::npos) << e.what();
  }
  // A specialization that overflows the budget: 2 * (128*32 + 32*64) * 4 bytes = 48 KiB > 32 KiB.
  try {
    check_kernel(ks[0], {{"BM", 128}});
    FAIL() << "no error";
  } catch (const KernelTypeError& e) {
    EXPECT_NE(e.message().find("over the budget of 32768 bytes"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_kernel(ks[0], {{"BM", 32}, {"M", 4096}, {"N", 4096}, {"K", 4096}}));
}

}  // namespace
}  // namespace tessera::frontend
