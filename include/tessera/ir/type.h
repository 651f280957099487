// Types shared by every IR level.
//
// A tensor type is a shape whose dims are each a fixed size or a symbol
// ("B"), plus the numerics policy of its elements (storage, accumulation,
// rounding, overflow, loss scale). The Tile IR (docs/design/0003-tile-ir.md)
// adds four kinds; the text forms are
//
//     tensor<[B, 64] fp8_e4m3 @accum(fp32)>   Graph IR value
//     lane<fp32>                             one scalar per tile (no shape)
//     tile<[64, 64] fp32>                    a block of values held by the group
//     smem<[64, 64] bf16 swizzle(xor)>       a shared-memory buffer of the group
//     gmem<[M, K/tp] fp16 mut>               a global buffer; `mut` = writable
//     tensor<[512, 256] fp32 shard[-, tp] partial(dp)>
//                                            a shard of a sharded function
//
// A symbolic dim may be compound, a product or quotient of symbols and
// integers ("K/tp", "N*2"); it is kept and printed verbatim (no spaces).
// print_type(parse_type(t)) == t for every type.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/numerics/policy.h"

namespace tessera::ir {

// One dimension: a fixed size (>= 0) or a named symbol bound at call time.
struct Dim {
  std::int64_t size = 0;  // meaningful when symbol is empty
  std::string symbol;

  static Dim fixed(std::int64_t n) { return Dim{n, {}}; }
  static Dim named(std::string name) { return Dim{-1, std::move(name)}; }
  bool is_symbolic() const { return !symbol.empty(); }
  bool is_fixed(std::int64_t n) const { return symbol.empty() && size == n; }
  bool operator==(const Dim&) const = default;
  std::string str() const;  // "64" or "B"
};

using Shape = std::vector<Dim>;

std::string print_shape(const Shape& shape);  // "[B, 64]"
Shape fixed_shape(const std::vector<std::int64_t>& sizes);
// The sizes when every dim is fixed; nullopt otherwise.
std::optional<std::vector<std::int64_t>> static_sizes(const Shape& shape);

// How a value of a sharded (per-shard) function relates to its global
// tensor (docs/design/0007-sharding.md): per dim the mesh axis that splits
// it ("" when the dim is whole on every device), and the mesh axes over
// which the value is one term of a pending sum. Printed
// "shard[-, tp] partial(dp)"; the type's shape is the shard's own shape.
struct Sharding {
  std::vector<std::string> dims;
  std::vector<std::string> partial;

  static Sharding replicated(std::size_t rank) { return Sharding{std::vector<std::string>(rank), {}}; }
  bool is_partial() const { return !partial.empty(); }
  bool is_replicated() const;  // no dim split, nothing pending
  // The dim `axis` splits, or -1.
  int dim_of(const std::string& axis) const;
  bool operator==(const Sharding&) const = default;
};
std::string print_sharding(const Sharding& sharding);  // "shard[-, tp] partial(dp)"

enum class TypeKind : std::uint8_t { tensor, lane, tile, smem, gmem };
std::string_view type_kind_name(TypeKind kind);  // "tensor", "lane", ...

// The bank-conflict layout of a shared buffer (smem only).
enum class Swizzle : std::uint8_t { none, xor_ };
std::string_view swizzle_name(Swizzle swizzle);  // "none", "xor"
// "none" or "xor"; anything else raises ArgumentError naming the value.
Swizzle parse_swizzle(std::string_view text);

struct Type {
  TypeKind kind = TypeKind::tensor;
  Shape shape;  // empty for lane
  NumericsPolicy policy;
  bool mut = false;                 // gmem only: the kernel may write the buffer
  Swizzle swizzle = Swizzle::none;  // smem only
  // tensor only, in sharded functions. Op inference never sees it (it runs
  // on the shard shapes); the partitioner sets it on every value.
  std::optional<Sharding> sharding;

  static Type tensor(Shape shape, NumericsPolicy policy) { return make(TypeKind::tensor, std::move(shape), policy); }
  static Type lane(NumericsPolicy policy) { return make(TypeKind::lane, {}, policy); }
  static Type lane(DType dtype) { return lane(default_policy(dtype)); }
  static Type tile(Shape shape, NumericsPolicy policy) { return make(TypeKind::tile, std::move(shape), policy); }
  static Type smem(Shape shape, NumericsPolicy policy, Swizzle swizzle = Swizzle::none) {
    Type t = make(TypeKind::smem, std::move(shape), policy);
    t.swizzle = swizzle;
    return t;
  }
  static Type gmem(Shape shape, NumericsPolicy policy, bool is_mut = false) {
    Type t = make(TypeKind::gmem, std::move(shape), policy);
    t.mut = is_mut;
    return t;
  }

  std::size_t rank() const { return shape.size(); }
  DType dtype() const { return policy.storage; }
  bool is_tensor() const { return kind == TypeKind::tensor; }
  bool is_lane() const { return kind == TypeKind::lane; }
  bool is_tile() const { return kind == TypeKind::tile; }
  bool is_smem() const { return kind == TypeKind::smem; }
  bool is_gmem() const { return kind == TypeKind::gmem; }
  // smem or gmem: something load_elem / store_elem / tile_load address.
  bool is_buffer() const { return is_smem() || is_gmem(); }
  bool operator==(const Type&) const = default;
  // This type without its sharding.
  Type unsharded() const {
    Type t = *this;
    t.sharding.reset();
    return t;
  }

 private:
  static Type make(TypeKind kind, Shape shape, NumericsPolicy policy) {
    Type t;
    t.kind = kind;
    t.shape = std::move(shape);
    t.policy = policy;
    return t;
  }
};

std::string print_type(const Type& type);
// Reads one dim starting at text[i] (a size, a symbol or a compound symbol
// such as K/tp) and moves i past it. Errors are ParseError placed in `text`.
Dim read_dim(std::string_view text, std::size_t& i, std::string_view file = "<type>");
// Parses the text form; `file`/`text`/`offset` place errors (ParseError with
// file:line:col) when the type is part of a larger source.
Type parse_type(std::string_view type_text, std::string_view file = "<type>");
// "tensor<[2, 3] fp32>, tensor<[] bf16>" -> its types (split at the commas
// outside <>, [] and ()); the form `call` and `schedule.kernel` keep their
// result types in. print_type_list is the inverse.
std::vector<Type> parse_type_list(std::string_view text);
std::string print_type_list(std::span<const Type> types);

}  // namespace tessera::ir
