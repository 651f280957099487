// Types shared by every IR level.
//
// A tensor type is a shape whose dims are each a fixed size or a symbol
// ("B"), plus the numerics policy of its elements (storage, accumulation,
// rounding, overflow, loss scale). Later levels add kinds (tiles, shared
// buffers, scalars) and a sharding; the text form is
//
//     tensor<[B, 64] fp8_e4m3 @accum(fp32)>
//
// and print_type(parse_type(t)) == t for every type.
#pragma once

#include <cstdint>
#include <optional>
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

enum class TypeKind : std::uint8_t { tensor };

struct Type {
  TypeKind kind = TypeKind::tensor;
  Shape shape;
  NumericsPolicy policy;

  static Type tensor(Shape shape, NumericsPolicy policy) { return Type{TypeKind::tensor, std::move(shape), policy}; }
  std::size_t rank() const { return shape.size(); }
  DType dtype() const { return policy.storage; }
  bool operator==(const Type&) const = default;
};

std::string print_type(const Type& type);
// Parses the text form; `file`/`text`/`offset` place errors (ParseError with
// file:line:col) when the type is part of a larger source.
Type parse_type(std::string_view type_text, std::string_view file = "<type>");

}  // namespace tessera::ir
