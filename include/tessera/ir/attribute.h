// Attributes: the compile-time constants attached to an op.
//
// An attribute is a bool, an integer, a float, a string, a list of integers,
// a list of floats (dense constant data), a numerics policy or a shape. Ops
// keep them in an AttrMap sorted by name so printing is deterministic. Text
// forms (all parse back exactly):
//
//     true  42  -1.5  0x1p-3 is written 0.125  nan  inf  "text"
//     [0, 1]  dense<[1.0, 2.5]>  policy<bf16 @accum(fp32)>  shape<[B, 64]>
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/ir/type.h"

namespace tessera::ir {

enum class AttrKind : std::uint8_t { boolean, integer, real, string, int_list, real_list, policy, shape };
std::string_view attr_kind_name(AttrKind kind);

using Attribute = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                               std::vector<double>, NumericsPolicy, Shape>;

inline AttrKind kind_of(const Attribute& a) {
  return static_cast<AttrKind>(a.index());
}
// `elide_over` > 0: a list longer than that prints its first four elements
// and its length, "dense<[1.0, 2.0, 3.0, 4.0, ... 65536 values]>": a display
// form (inspect_ir) that does not parse back.
std::string print_attribute(const Attribute& a, std::size_t elide_over = 0);

// Name -> attribute, kept sorted by name.
class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<std::string, Attribute>> items);

  void set(std::string name, Attribute value);
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const Attribute* find(std::string_view name) const;
  void erase(std::string_view name);

  // Typed getters; a missing or mistyped attribute raises an internal error
  // (the verifier checks user-written IR before kernels read it).
  bool get_bool(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  double get_real(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  const std::vector<std::int64_t>& get_ints(std::string_view name) const;
  const std::vector<double>& get_reals(std::string_view name) const;
  const NumericsPolicy& get_policy(std::string_view name) const;
  const Shape& get_shape(std::string_view name) const;

  const std::vector<std::pair<std::string, Attribute>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const AttrMap&) const = default;

 private:
  std::vector<std::pair<std::string, Attribute>> items_;
};

// "{axes = [1], keepdims = true}" or "" when empty.
std::string print_attr_map(const AttrMap& attrs, std::size_t elide_over = 0);

}  // namespace tessera::ir
