// The CUDA Tile IR bytecode writer: encodings checked byte for byte against
// the format's rules, then whole modules decoded by NVIDIA's disassembler and
// assembled to an sm_90 cubin by tileiras where those are installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tessera/backends/cuda_tile/bytecode.h"
#include "tessera/backends/cuda_tile/toolchain.h"
#include "tessera/support/error.h"

namespace ct = tessera::cuda_tile;
using ct::Elem;
using Bytes = std::vector<std::uint8_t>;

namespace {

// y[i] = sum(x*x over 4 squarings) + ...: a module using views with padding,
// block ids, arithmetic, a loop with a carried tile, a reduction and broadcast.
Bytes vector_kernel() {
  ct::Module m("tessera");
  const ct::TypeRef pf = m.tile_of(m.pointer(Elem::f32), {});
  const ct::TypeRef i64 = m.tile(Elem::i64, {});
  ct::Body& b = m.begin_entry("vk", {pf, pf, i64}, {"x", "y", "n"});
  const auto ps = b.params();
  const ct::TypeRef tv = m.tensor_view(Elem::f32, {ct::Module::kDynamic}, {1});
  const ct::TypeRef pv = m.partition_view({128}, tv, ct::Padding::zero);
  const ct::Value xv = b.make_partition_view(pv, b.make_tensor_view(tv, ps[0], {ps[2]}, {}));
  const ct::Value yv = b.make_partition_view(pv, b.make_tensor_view(tv, ps[1], {ps[2]}, {}));
  const auto id = b.tile_block_id();
  const ct::TypeRef t = m.tile(Elem::f32, {128});
  const ct::Value s = b.binary("addf", b.load_view(t, xv, {id[0]}), b.load_view(t, yv, {id[0]}));
  const ct::TypeRef i32 = m.tile(Elem::i32, {});
  const auto loop = b.begin_for(b.constant_int(i32, 0), b.constant_int(i32, 4), b.constant_int(i32, 1), {s});
  const auto res = b.end_for({b.binary("mulf", loop[1], loop[1])});
  const auto r = b.begin_reduce(res[0], 0, 0.0, m.tile(Elem::f32, {}));
  const ct::Value sum = b.end_reduce(b.binary("addf", r[0], r[1]));
  const ct::Value z = b.binary("addf", b.broadcast(t, b.reshape(m.tile(Elem::f32, {1}), sum)), res[0]);
  b.store_view(z, yv, {id[0]});
  b.ret();
  m.end_entry();
  return m.bytes();
}

}  // namespace

TEST(CudaTileBytecode, VarintsAreLittleEndianSevenBitGroups) {
  Bytes out;
  ct::put_varint(out, 0);
  ct::put_varint(out, 127);
  ct::put_varint(out, 128);
  ct::put_varint(out, 300);
  EXPECT_EQ(out, (Bytes{0x00, 0x7F, 0x80, 0x01, 0xAC, 0x02}));
  out.clear();
  ct::put_signed_varint(out, -1);  // zigzag: -1 -> 1, 1 -> 2, -64 -> 127
  ct::put_signed_varint(out, 1);
  ct::put_signed_varint(out, -64);
  EXPECT_EQ(out, (Bytes{0x01, 0x02, 0x7F}));
}

TEST(CudaTileBytecode, EmptyModuleHasHeaderSectionsAndEndMarker) {
  ct::Module m("empty");
  const Bytes b = m.bytes();
  // magic, version 13.3 tag 0
  ASSERT_GE(b.size(), 12u);
  EXPECT_EQ(Bytes(b.begin(), b.begin() + 12), (Bytes{0x7F, 'T', 'i', 'l', 'e', 'I', 'R', 0x00, 13, 3, 0, 0}));
  // First section: functions (id 2, aligned flag), length 1 (count 0),
  // alignment 8, one 0xCB to reach offset 16, then the count.
  EXPECT_EQ(Bytes(b.begin() + 12, b.begin() + 16), (Bytes{0x82, 0x01, 0x08, 0xCB}));
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b.back(), 0x00);
}

TEST(CudaTileBytecode, TypesAreInternedAndEncodedByTag) {
  ct::Module m("t");
  const ct::TypeRef f32 = m.elem(Elem::f32);
  const ct::TypeRef t = m.tile(Elem::f32, {64, 32});
  EXPECT_EQ(m.tile(Elem::f32, {64, 32}), t);  // one entry per distinct type
  EXPECT_EQ(f32.id, 0u);
  EXPECT_EQ(t.id, 1u);
  EXPECT_EQ(m.type_text(t), "tile<64x32xf32>");
  EXPECT_EQ(m.type_text(m.tile_of(m.pointer(Elem::bf16), {})), "tile<ptr<bf16>>");
  EXPECT_EQ(m.type_text(m.partition_view({16, 8}, m.tensor_view(Elem::f16, {ct::Module::kDynamic, 8}, {ct::Module::kDynamic, 1}),
                                         ct::Padding::zero)),
            "partition_view<tile=(16x8), padding_value = zero, tensor_view<?x8xf16, strides=[?,1]>>");
  // The type section holds, at the tile's offset: tag 0x0d, element 0, rank
  // 2, then 64 and 32 as 8-byte little-endian integers.
  const Bytes b = m.bytes();
  const Bytes tile_enc{0x0d, 0x00, 0x02, 64, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_NE(std::search(b.begin(), b.end(), tile_enc.begin(), tile_enc.end()), b.end());
}

TEST(CudaTileBytecode, OpsEncodeOpcodeTypesAttributesAndOperands) {
  ct::Module m("t");
  const ct::TypeRef t = m.tile(Elem::f32, {16});
  ct::Body& b = m.begin_entry("k", {t, t}, {"a", "b"});
  b.binary("addf", b.params()[0], b.params()[1]);
  b.ret();
  m.end_entry();
  const Bytes bytes = m.bytes();
  // addf: opcode 2, result type, flags (no flush to zero), rounding (nearest
  // even), operands 0 and 1; return: opcode 92, no results, no operands.
  const Bytes body{0x02, static_cast<std::uint8_t>(t.id), 0x00, 0x00, 0x00, 0x01, 92, 0x00, 0x00};
  EXPECT_NE(std::search(bytes.begin(), bytes.end(), body.begin(), body.end()), bytes.end());
  EXPECT_NE(m.text().find("%2 = addf %0, %1 : tile<16xf32>"), std::string::npos) << m.text();
}

TEST(CudaTileBytecode, UnclosedRegionIsAnError) {
  ct::Module m("t");
  const ct::TypeRef i32 = m.tile(Elem::i32, {});
  ct::Body& b = m.begin_entry("k", {i32}, {"n"});
  b.begin_for(b.params()[0], b.params()[0], b.params()[0], {});
  EXPECT_THROW(m.end_entry(), tessera::Error);
}

TEST(CudaTileBytecode, UnsupportedConstantIsACompileError) {
  ct::Module m("t");
  ct::Body& b = m.begin_entry("k", {}, {});
  try {
    b.constant_float(m.tile(Elem::bf16, {}), 1.0);
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Compile);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos);
  }
}

TEST(CudaTileBytecode, DisassemblerDecodesTheModule) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found) GTEST_SKIP() << t.reason;
  const std::string text = ct::disassemble(vector_kernel());
  if (text.empty()) GTEST_SKIP() << "no tileirdisasm beside " << t.tileiras;
  for (const char* want : {"entry @vk(", "make_partition_view", "padding_value = zero", "load_view_tko weak",
                           "for %", "iter_values(", "reduce %", "dim=0", "broadcast", "store_view_tko weak", "return"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(CudaTileBytecode, TileirasAssemblesAnSm90Cubin) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found) GTEST_SKIP() << t.reason;
  if (!t.reason.empty()) GTEST_SKIP() << t.reason;
  const Bytes cubin = ct::run_tileiras(vector_kernel(), "sm_90");
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(Bytes(cubin.begin(), cubin.begin() + 4), (Bytes{0x7F, 'E', 'L', 'F'}));
}

TEST(CudaTileBytecode, TileirasRejectionIsACompileErrorWithItsOutput) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found || !t.reason.empty()) GTEST_SKIP() << (t.found ? t.reason : std::string("tileiras not found"));
  Bytes broken = vector_kernel();
  broken[8] = 99;  // an unknown major version
  try {
    ct::run_tileiras(broken, "sm_90");
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Compile);
    EXPECT_NE(std::string(e.what()).find("tileiras"), std::string::npos);
  }
}
