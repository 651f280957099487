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

// y[i] = f(x[i]) for i < n through tiles of pointers: iota, zero-extension,
// masked load_ptr with padding, unordered cmpf, fma, bitcast, shifts, ifs
// with and without results and else regions, masked and unmasked store_ptr.
Bytes pointer_kernel() {
  ct::Module m("tessera");
  const ct::TypeRef pf = m.tile_of(m.pointer(Elem::f32), {});
  const ct::TypeRef i64 = m.tile(Elem::i64, {});
  ct::Body& b = m.begin_entry("pk", {pf, pf, i64}, {"x", "y", "n"});
  const auto ps = b.params();
  const ct::TypeRef ptrs = m.tile_of(m.pointer(Elem::f32), {128});
  const ct::TypeRef ptr1 = m.tile_of(m.pointer(Elem::f32), {1});
  const ct::TypeRef t = m.tile(Elem::f32, {128});
  const ct::TypeRef ti32 = m.tile(Elem::i32, {128});
  const ct::TypeRef ti64 = m.tile(Elem::i64, {128});
  const ct::Value idx = b.convert(ti64, b.iota(ti32), /*is_unsigned=*/true);
  const ct::Value xp = b.offset(b.broadcast(ptrs, b.reshape(ptr1, ps[0])), idx);
  const ct::Value yp = b.offset(b.broadcast(ptrs, b.reshape(ptr1, ps[1])), idx);
  const ct::Value mask = b.cmp(idx, b.broadcast(ti64, b.reshape(m.tile(Elem::i64, {1}), ps[2])), ct::Cmp::lt);
  const ct::Value v = b.load_ptr(t, xp, mask, b.constant_float(t, 0.0));
  const ct::Value old_y = b.load_ptr(t, yp, std::nullopt, std::nullopt);
  const ct::Value is_nan = b.cmp(v, v, ct::Cmp::ne, /*unordered=*/true);
  const ct::Value one = b.constant_int(ti32, 1);
  const ct::Value bits = b.bitcast(ti32, b.fma(v, v, old_y));
  const ct::Value shifted = b.binary("shrui", b.binary("shri", b.binary("shli", bits, one), one), one);
  const ct::Value z = b.select(is_nan, v, b.bitcast(t, shifted));
  const ct::Value big = b.cmp(ps[2], b.constant_int(i64, 64), ct::Cmp::gt);
  b.begin_if(big, {t});
  b.begin_else({z});
  const auto r = b.end_if({b.unary("negf", z)});
  b.begin_if(big, {});
  b.store_ptr(yp, r[0], mask);
  b.end_if({});
  b.begin_if(big, {});
  b.begin_else({});
  b.store_ptr(yp, z, std::nullopt);
  b.end_if({});
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
    b.constant_float(m.tile(Elem::f8e4m3fn, {}), 1.0);
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::Compile);
    EXPECT_NE(std::string(e.what()).find("f8"), std::string::npos) << e.what();
  }
}

// fp16 and bf16 constants hold the value rounded to the format: 1/3 in bf16
// is 0x3EAB (nearest even), little-endian in the constant section.
TEST(CudaTileBytecode, HalfConstantsAreRoundedToTheirFormat) {
  ct::Module m("t");
  ct::Body& b = m.begin_entry("k", {}, {});
  b.constant_float(m.tile(Elem::bf16, {}), 1.0 / 3.0);
  b.constant_float(m.tile(Elem::f16, {}), 1.0 / 3.0);
  b.ret();
  m.end_entry();
  const std::vector<std::uint8_t> bytes = m.bytes();
  auto has = [&](std::uint8_t lo, std::uint8_t hi) {
    for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
      if (bytes[i] == lo && bytes[i + 1] == hi) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(0xAB, 0x3E));  // bf16(1/3)
  EXPECT_TRUE(has(0x55, 0x35));  // fp16(1/3) = 0x3555
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

TEST(CudaTileBytecode, IfWithoutResultsHasAnEmptyElseRegion) {
  ct::Module m("t");
  const ct::TypeRef b1 = m.tile(Elem::i1, {});
  ct::Body& b = m.begin_entry("k", {b1}, {"c"});
  b.begin_if(b.params()[0], {});
  EXPECT_TRUE(b.end_if({}).empty());
  b.ret();
  m.end_entry();
  const Bytes bytes = m.bytes();
  // if: opcode 50, no results, condition 0, two regions; the then region:
  // one block, no arguments, one op (yield: opcode 109, no results, no
  // operands); the else region: no blocks.
  const Bytes body{50, 0x00, 0x00, 0x02, 0x01, 0x00, 0x01, 109, 0x00, 0x00, 0x00, 92};
  EXPECT_NE(std::search(bytes.begin(), bytes.end(), body.begin(), body.end()), bytes.end());
  EXPECT_NE(m.text().find("if %0 {\n      yield\n    }"), std::string::npos) << m.text();
}

TEST(CudaTileBytecode, IfResultsAreNumberedAfterItsRegions) {
  ct::Module m("t");
  const ct::TypeRef b1 = m.tile(Elem::i1, {});
  const ct::TypeRef f = m.tile(Elem::f32, {});
  ct::Body& b = m.begin_entry("k", {b1, f}, {"c", "x"});
  b.begin_if(b.params()[0], {f});
  b.begin_else({b.params()[1]});
  const ct::Value neg = b.unary("negf", b.params()[1]);
  EXPECT_EQ(neg.id, 2u);
  const auto r = b.end_if({neg});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, 2u);  // the else region's values are out of scope again
  EXPECT_EQ(r[0].type, f);
  b.ret();
  m.end_entry();
  EXPECT_NE(m.text().find("%2 = if %0 -> (tile<f32>) {"), std::string::npos) << m.text();
  EXPECT_NE(m.text().find("} else {"), std::string::npos) << m.text();
}

TEST(CudaTileBytecode, IfWithResultsNeedsAnElseAndMatchingYields) {
  ct::Module m("t");
  const ct::TypeRef b1 = m.tile(Elem::i1, {});
  const ct::TypeRef f = m.tile(Elem::f32, {});
  ct::Body& b = m.begin_entry("k", {b1, f}, {"c", "x"});
  b.begin_if(b.params()[0], {f});
  EXPECT_THROW(b.end_if({b.params()[1]}), tessera::Error);
  EXPECT_THROW(b.begin_else({b.params()[0]}), tessera::Error);
}

TEST(CudaTileBytecode, LoadPtrFlagsSayWhichOptionalOperandsFollow) {
  ct::Module m("t");
  const ct::TypeRef p = m.tile_of(m.pointer(Elem::f32), {8});
  const ct::TypeRef t = m.tile(Elem::f32, {8});
  const ct::TypeRef mk = m.tile(Elem::i1, {8});
  ct::Body& b = m.begin_entry("k", {p, mk, t}, {"p", "m", "pad"});
  b.load_ptr(t, b.params()[0], b.params()[1], b.params()[2]);
  b.load_ptr(t, b.params()[0], b.params()[1], std::nullopt);
  b.store_ptr(b.params()[0], b.params()[2], b.params()[1]);
  EXPECT_THROW(b.load_ptr(t, b.params()[0], b.params()[1], b.params()[1]), tessera::Error);  // padding of another type
  EXPECT_THROW(b.load_ptr(t, b.params()[0], std::nullopt, b.params()[2]), tessera::Error);  // padding without a mask
  b.ret();
  m.end_entry();
  const Bytes bytes = m.bytes();
  const auto tid = static_cast<std::uint8_t>(t.id), tok = static_cast<std::uint8_t>(m.token().id);
  // load_ptr_tko: opcode 61, tile and token types, flags (mask: bit 2,
  // padding: bit 3), weak, pointers, mask, padding.
  const Bytes masked{61, tid, tok, 0x0C, 0x00, 0x00, 0x01, 0x02};
  const Bytes unpadded{61, tid, tok, 0x04, 0x00, 0x00, 0x01};
  // store_ptr_tko: opcode 101, token type, flags (mask: bit 2), weak, pointers, value, mask.
  const Bytes store{101, tok, 0x04, 0x00, 0x00, 0x02, 0x01};
  for (const Bytes& want : {masked, unpadded, store}) {
    EXPECT_NE(std::search(bytes.begin(), bytes.end(), want.begin(), want.end()), bytes.end());
  }
}

TEST(CudaTileBytecode, ConvertCanZeroExtendAndCmpfCanBeUnordered) {
  ct::Module m("t");
  const ct::TypeRef i32 = m.tile(Elem::i32, {4});
  const ct::TypeRef f = m.tile(Elem::f32, {4});
  ct::Body& b = m.begin_entry("k", {i32, f}, {"i", "x"});
  const ct::TypeRef i64 = m.tile(Elem::i64, {4});
  b.convert(i64, b.params()[0], /*is_unsigned=*/true);
  b.convert(i64, b.params()[0]);
  b.cmp(b.params()[1], b.params()[1], ct::Cmp::ne, /*unordered=*/true);
  b.ret();
  m.end_entry();
  const Bytes bytes = m.bytes();
  const auto i64id = static_cast<std::uint8_t>(i64.id);
  // exti: opcode 37, type, signedness (0 unsigned, 1 signed), operand.
  const Bytes zext{37, i64id, 0x00, 0x00}, sext{37, i64id, 0x01, 0x00};
  // cmpf: opcode 14, i1 type, predicate not_equal (1), ordering unordered (0), operands.
  const Bytes cmp{14, static_cast<std::uint8_t>(m.tile(Elem::i1, {4}).id), 0x01, 0x00, 0x01, 0x01};
  for (const Bytes& want : {zext, sext, cmp}) {
    EXPECT_NE(std::search(bytes.begin(), bytes.end(), want.begin(), want.end()), bytes.end());
  }
  EXPECT_NE(m.text().find("exti %0 unsigned : tile<4xi32> -> tile<4xi64>"), std::string::npos) << m.text();
  EXPECT_NE(m.text().find("cmpf not_equal %1, %1 unordered"), std::string::npos) << m.text();
}

TEST(CudaTileBytecode, DisassemblerDecodesPointerOpsAndIfs) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found) GTEST_SKIP() << t.reason;
  const std::string text = ct::disassemble(pointer_kernel());
  if (text.empty()) GTEST_SKIP() << "no tileirdisasm beside " << t.tileiras;
  for (const char* want : {"iota", "exti", "unsigned", "load_ptr_tko weak", "unordered", "fma", "bitcast", "shli",
                           "shri", "if %", "else", "yield", "store_ptr_tko weak", "return"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(CudaTileBytecode, TileirasAssemblesPointerOpsAndIfs) {
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found) GTEST_SKIP() << t.reason;
  if (!t.reason.empty()) GTEST_SKIP() << t.reason;
  const Bytes cubin = ct::run_tileiras(pointer_kernel(), "sm_90");
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(Bytes(cubin.begin(), cubin.begin() + 4), (Bytes{0x7F, 'E', 'L', 'F'}));
}

TEST(CudaTileBytecode, EntryOccupancyHintIsEncodedAndDecoded) {
  ct::Module m("t");
  const ct::TypeRef f = m.tile(Elem::f32, {});
  ct::Body& b = m.begin_entry("k", {f}, {"x"});
  m.entry_hints("sm_90", 2);
  b.ret();
  m.end_entry();
  EXPECT_NE(m.text().find("entry @k(%0 /*x*/: tile<f32>) optimization_hints = <sm_90 = {occupancy = 2}> {"),
            std::string::npos)
      << m.text();
  const Bytes bytes = m.bytes();
  // Function flags: kernel | hints; then the tagged optimization_hints (0x0b), one architecture.
  const Bytes flags{0x06, 0x00, 0x0b, 0x01};
  EXPECT_NE(std::search(bytes.begin(), bytes.end(), flags.begin(), flags.end()), bytes.end());
  const ct::Toolchain& t = ct::toolchain();
  if (!t.found) GTEST_SKIP() << t.reason;
  const std::string text = ct::disassemble(bytes);
  if (text.empty()) GTEST_SKIP() << "no tileirdisasm beside " << t.tileiras;
  EXPECT_NE(text.find("occupancy = 2"), std::string::npos) << text;
}
