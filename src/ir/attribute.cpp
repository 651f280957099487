#include "tessera/ir/attribute.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tessera/support/error.h"

namespace tessera::ir {

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::boolean: return "bool";
    case AttrKind::integer: return "int";
    case AttrKind::real: return "float";
    case AttrKind::string: return "string";
    case AttrKind::int_list: return "int list";
    case AttrKind::real_list: return "float list";
    case AttrKind::policy: return "policy";
    case AttrKind::shape: return "shape";
  }
  return "?";
}

namespace {

// Shortest text that parses back to exactly `v`, always recognisable as a
// float (contains '.', 'e', "inf" or "nan").
std::string print_real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string escape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

namespace {
// How many of a list's `size` elements print (print_attribute's elide_over).
std::size_t elided_length(std::size_t size, std::size_t elide_over) {
  return elide_over > 0 && size > elide_over ? 4 : size;
}
std::string elision(std::size_t size, std::size_t shown) {
  return shown < size ? ", ... " + std::to_string(size) + " values" : "";
}
}  // namespace

std::string print_attribute(const Attribute& a, std::size_t elide_over) {
  switch (kind_of(a)) {
    case AttrKind::boolean: return std::get<bool>(a) ? "true" : "false";
    case AttrKind::integer: return std::to_string(std::get<std::int64_t>(a));
    case AttrKind::real: return print_real(std::get<double>(a));
    case AttrKind::string: return escape(std::get<std::string>(a));
    case AttrKind::int_list: {
      std::string out = "[";
      const auto& v = std::get<std::vector<std::int64_t>>(a);
      const std::size_t shown = elided_length(v.size(), elide_over);
      for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
      return out + elision(v.size(), shown) + "]";
    }
    case AttrKind::real_list: {
      std::string out = "dense<[";
      const auto& v = std::get<std::vector<double>>(a);
      const std::size_t shown = elided_length(v.size(), elide_over);
      for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + print_real(v[i]);
      return out + elision(v.size(), shown) + "]>";
    }
    case AttrKind::policy: return "policy<" + print_policy(std::get<NumericsPolicy>(a)) + ">";
    case AttrKind::shape: return "shape<" + print_shape(std::get<Shape>(a)) + ">";
  }
  return "?";
}

AttrMap::AttrMap(std::initializer_list<std::pair<std::string, Attribute>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

void AttrMap::set(std::string name, Attribute value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.insert(it, {std::move(name), std::move(value)});
  }
}

const Attribute* AttrMap::find(std::string_view name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, std::string_view n) { return item.first < n; });
  if (it != items_.end() && it->first == name) return &it->second;
  return nullptr;
}

void AttrMap::erase(std::string_view name) {
  std::erase_if(items_, [&](const auto& item) { return item.first == name; });
}

namespace {
template <typename T>
const T& get_as(const AttrMap& m, std::string_view name) {
  const Attribute* a = m.find(name);
  if (!a) raise(ErrorCode::Internal, "attribute '" + std::string(name) + "' is missing");
  const T* v = std::get_if<T>(a);
  if (!v) raise(ErrorCode::Internal, "attribute '" + std::string(name) + "' has the wrong kind");
  return *v;
}
}  // namespace

bool AttrMap::get_bool(std::string_view n) const {
  return get_as<bool>(*this, n);
}
std::int64_t AttrMap::get_int(std::string_view n) const {
  return get_as<std::int64_t>(*this, n);
}
double AttrMap::get_real(std::string_view n) const {
  return get_as<double>(*this, n);
}
const std::string& AttrMap::get_string(std::string_view n) const {
  return get_as<std::string>(*this, n);
}
const std::vector<std::int64_t>& AttrMap::get_ints(std::string_view n) const {
  return get_as<std::vector<std::int64_t>>(*this, n);
}
const std::vector<double>& AttrMap::get_reals(std::string_view n) const {
  return get_as<std::vector<double>>(*this, n);
}
const NumericsPolicy& AttrMap::get_policy(std::string_view n) const {
  return get_as<NumericsPolicy>(*this, n);
}
const Shape& AttrMap::get_shape(std::string_view n) const {
  return get_as<Shape>(*this, n);
}

std::string print_attr_map(const AttrMap& attrs, std::size_t elide_over) {
  if (attrs.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : attrs.items()) {
    if (!first) out += ", ";
    first = false;
    out += name + " = " + print_attribute(value, elide_over);
  }
  return out + "}";
}

}  // namespace tessera::ir
