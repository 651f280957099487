#include "tessera/ir/type.h"

#include <cctype>

#include "tessera/support/error.h"

namespace tessera::ir {

std::string Dim::str() const {
  return is_symbolic() ? symbol : std::to_string(size);
}

std::string print_shape(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i].str();
  }
  return out + "]";
}

Shape fixed_shape(const std::vector<std::int64_t>& sizes) {
  Shape shape;
  shape.reserve(sizes.size());
  for (auto s : sizes) shape.push_back(Dim::fixed(s));
  return shape;
}

std::optional<std::vector<std::int64_t>> static_sizes(const Shape& shape) {
  std::vector<std::int64_t> sizes;
  sizes.reserve(shape.size());
  for (const auto& d : shape) {
    if (d.is_symbolic()) return std::nullopt;
    sizes.push_back(d.size);
  }
  return sizes;
}

std::string_view type_kind_name(TypeKind kind) {
  switch (kind) {
    case TypeKind::tensor: return "tensor";
    case TypeKind::lane: return "lane";
    case TypeKind::tile: return "tile";
    case TypeKind::smem: return "smem";
    case TypeKind::gmem: return "gmem";
  }
  return "?";
}

std::string_view swizzle_name(Swizzle swizzle) {
  return swizzle == Swizzle::xor_ ? "xor" : "none";
}

Swizzle parse_swizzle(std::string_view text) {
  if (text == "none") return Swizzle::none;
  if (text == "xor") return Swizzle::xor_;
  raise(ErrorCode::ArgumentInvalid, "unknown swizzle '" + std::string(text) + "'; expected \"none\" or \"xor\"");
}

std::string print_type(const Type& type) {
  std::string out = std::string(type_kind_name(type.kind)) + "<";
  if (type.kind != TypeKind::lane) out += print_shape(type.shape) + " ";
  std::string policy = print_policy(type.policy);
  // Tile IR kinds print the accumulation type only when it is not the
  // storage type's default (lane<fp16>, not lane<fp16 @accum(fp32)>), as the
  // Tile IR contract writes them; tensor types keep the full spelling.
  if (type.kind != TypeKind::tensor && type.policy.accum == default_accumulation(type.policy.storage)) {
    std::string accum = " @accum(" + std::string(name(type.policy.accum)) + ")";
    if (auto at = policy.find(accum); at != std::string::npos) policy.erase(at, accum.size());
  }
  out += policy;
  if (type.mut) out += " mut";
  if (type.swizzle != Swizzle::none) out += " swizzle(" + std::string(swizzle_name(type.swizzle)) + ")";
  if (type.sharding) out += " " + print_sharding(*type.sharding);
  return out + ">";
}

bool Sharding::is_replicated() const {
  if (!partial.empty()) return false;
  for (const auto& d : dims) {
    if (!d.empty()) return false;
  }
  return true;
}

int Sharding::dim_of(const std::string& axis) const {
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == axis) return static_cast<int>(d);
  }
  return -1;
}

std::string print_sharding(const Sharding& sharding) {
  std::string out = "shard[";
  for (std::size_t d = 0; d < sharding.dims.size(); ++d) {
    out += (d ? ", " : "") + (sharding.dims[d].empty() ? std::string("-") : sharding.dims[d]);
  }
  out += "]";
  if (!sharding.partial.empty()) {
    out += " partial(";
    for (std::size_t i = 0; i < sharding.partial.size(); ++i) out += (i ? ", " : "") + sharding.partial[i];
    out += ")";
  }
  return out;
}

namespace {

[[noreturn]] void type_error(std::string_view file, std::string_view text, std::size_t offset, std::string message) {
  raise(ErrorCode::ParseSyntax, std::move(message), locate(file, text, offset));
}

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// One term of a dim: digits or an identifier; returns false when neither is next.
bool read_term(std::string_view text, std::size_t& i, std::string_view file, std::int64_t* value) {
  std::size_t start = i;
  if (i < text.size() && is_digit(text[i])) {
    std::int64_t n = 0;
    while (i < text.size() && is_digit(text[i])) {
      if (n > (INT64_MAX - 9) / 10) type_error(file, text, start, "dimension size too large");
      n = n * 10 + (text[i++] - '0');
    }
    if (value) *value = n;
    return true;
  }
  if (i < text.size() && is_ident_start(text[i])) {
    while (i < text.size() && is_ident_char(text[i])) ++i;
    return true;
  }
  return false;
}

}  // namespace

Dim read_dim(std::string_view text, std::size_t& i, std::string_view file) {
  std::size_t start = i;
  std::int64_t n = -1;
  if (!read_term(text, i, file, &n)) type_error(file, text, start, "expected a dimension (a size or a symbol name)");
  bool leading_number = n >= 0;
  std::string symbol = leading_number ? std::string() : std::string(text.substr(start, i - start));
  // Compound dims: symbol (('/' | '*') (symbol | integer))*, written without spaces.
  while (i < text.size() && (text[i] == '/' || text[i] == '*')) {
    if (leading_number) {
      type_error(file, text, start, "a compound dimension starts with a symbol (write N*2, not 2*N)");
    }
    symbol += text[i++];
    std::size_t term = i;
    if (!read_term(text, i, file, nullptr)) {
      type_error(file, text, term, "expected a symbol or an integer after '" + std::string(1, text[term - 1]) + "'");
    }
    std::string_view piece = text.substr(term, i - term);
    if (piece == "0" && symbol.back() == '/') type_error(file, text, term, "a dimension cannot divide by 0");
    symbol += piece;
  }
  return leading_number ? Dim::fixed(n) : Dim::named(std::move(symbol));
}

Type parse_type(std::string_view text, std::string_view file) {
  std::size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto expect = [&](std::string_view token) {
    skip();
    if (text.substr(i, token.size()) != token) {
      type_error(file, text, i, "expected '" + std::string(token) + "' in type");
    }
    i += token.size();
  };
  skip();
  std::size_t kind_at = i;
  while (i < text.size() && is_ident_char(text[i])) ++i;
  std::string_view kind_word = text.substr(kind_at, i - kind_at);
  TypeKind kind;
  if (kind_word == "tensor") {
    kind = TypeKind::tensor;
  } else if (kind_word == "lane") {
    kind = TypeKind::lane;
  } else if (kind_word == "tile") {
    kind = TypeKind::tile;
  } else if (kind_word == "smem") {
    kind = TypeKind::smem;
  } else if (kind_word == "gmem") {
    kind = TypeKind::gmem;
  } else {
    type_error(file, text, kind_at,
               "expected a type kind (tensor, lane, tile, smem or gmem), found '" + std::string(kind_word) + "'");
  }
  std::string kind_name(kind_word);
  expect("<");
  Shape shape;
  if (kind != TypeKind::lane) {
    expect("[");
    skip();
    if (i < text.size() && text[i] == ']') {
      ++i;
    } else {
      while (true) {
        skip();
        shape.push_back(read_dim(text, i, file));
        skip();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == ']') {
          ++i;
          break;
        }
        type_error(file, text, i, "expected ',' or ']' in shape");
      }
    }
  }
  skip();
  std::size_t close = text.find('>', i);
  if (close == std::string_view::npos) {
    type_error(file, text, text.size(), "expected '>' closing the " + kind_name + " type");
  }
  std::string_view policy_text = text.substr(i, close - i);
  auto trim = [&] {
    while (!policy_text.empty() && std::isspace(static_cast<unsigned char>(policy_text.back())))
      policy_text.remove_suffix(1);
  };
  trim();
  // Trailing modifiers of buffer types: "mut" (gmem), "swizzle(xor)" (smem).
  bool is_mut = false;
  Swizzle swizzle = Swizzle::none;
  std::optional<Sharding> sharding;
  std::vector<std::string> partial_axes;
  auto axis_names = [&](std::string_view inner, std::size_t at, bool dash_ok) {
    std::vector<std::string> names;
    std::size_t start = 0;
    for (std::size_t k = 0; k <= inner.size(); ++k) {
      if (k < inner.size() && inner[k] != ',') continue;
      std::string_view name = inner.substr(start, k - start);
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) name.remove_prefix(1);
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
      bool ident = !name.empty() && is_ident_start(name[0]);
      for (char c : name) ident = ident && is_ident_char(c);
      if (dash_ok && name == "-") {
        names.emplace_back();
      } else if (ident) {
        names.emplace_back(name);
      } else if (!(inner.empty() && k == 0)) {
        type_error(file, text, at + start,
                   std::string("expected a mesh axis name") + (dash_ok ? " or '-'" : "") + ", found '" +
                       std::string(name) + "'");
      }
      start = k + 1;
    }
    return names;
  };
  while (true) {
    auto ends_word = [&](std::string_view word) {
      if (policy_text.size() <= word.size() || policy_text.substr(policy_text.size() - word.size()) != word)
        return false;
      return std::isspace(static_cast<unsigned char>(policy_text[policy_text.size() - word.size() - 1])) != 0;
    };
    if (ends_word("mut")) {
      std::size_t at = i + policy_text.size() - 3;
      if (kind != TypeKind::gmem) type_error(file, text, at, "'mut' applies only to gmem types, not " + kind_name);
      if (is_mut) type_error(file, text, at, "'mut' is given twice");
      is_mut = true;
      policy_text.remove_suffix(3);
      trim();
      continue;
    }
    if (!policy_text.empty() && policy_text.back() == ')') {
      std::size_t open_partial = policy_text.rfind(" partial(");
      if (open_partial != std::string_view::npos && !sharding && partial_axes.empty()) {
        std::size_t at = i + open_partial + 9;
        partial_axes = axis_names(policy_text.substr(open_partial + 9, policy_text.size() - open_partial - 10), at,
                                  false);
        if (partial_axes.empty()) type_error(file, text, at, "partial(...) names no mesh axis");
        policy_text = policy_text.substr(0, open_partial);
        trim();
        continue;
      }
    }
    if (!policy_text.empty() && policy_text.back() == ']' && !sharding) {
      std::size_t open_shard = policy_text.rfind(" shard[");
      if (open_shard != std::string_view::npos) {
        std::size_t at = i + open_shard + 1;
        if (kind != TypeKind::tensor) type_error(file, text, at, "'shard[...]' applies only to tensor types");
        Sharding sh;
        sh.dims = axis_names(policy_text.substr(open_shard + 7, policy_text.size() - open_shard - 8), at + 6, true);
        sharding = std::move(sh);
        policy_text = policy_text.substr(0, open_shard);
        trim();
        continue;
      }
    }
    if (!policy_text.empty() && policy_text.back() == ')') {
      std::size_t open = policy_text.rfind("swizzle(");
      if (open != std::string_view::npos && open > 0 &&
          std::isspace(static_cast<unsigned char>(policy_text[open - 1]))) {
        std::size_t at = i + open;
        if (kind != TypeKind::smem) {
          type_error(file, text, at, "'swizzle(...)' applies only to smem types, not " + kind_name);
        }
        std::string_view inner = policy_text.substr(open + 8, policy_text.size() - open - 9);
        if (inner == "xor") {
          swizzle = Swizzle::xor_;
        } else {
          type_error(file, text, at + 8,
                     "unknown swizzle '" + std::string(inner) + "'; write swizzle(xor) or leave it out for none");
        }
        policy_text = policy_text.substr(0, open);
        trim();
        continue;
      }
    }
    break;
  }
  if (policy_text.empty()) type_error(file, text, i, "expected an element dtype or policy in " + kind_name + " type");
  NumericsPolicy policy;
  try {
    policy = parse_policy(policy_text, file);
  } catch (const Error& e) {
    // Re-place the error inside the whole type text.
    std::size_t col = e.where().column > 0 ? static_cast<std::size_t>(e.where().column - 1) : 0;
    raise(e.code(), e.message(), locate(file, text, i + col));
  }
  i = close + 1;
  skip();
  if (i != text.size()) type_error(file, text, i, "unexpected text after " + kind_name + " type");
  Type t;
  switch (kind) {
    case TypeKind::tensor: t = Type::tensor(std::move(shape), policy); break;
    case TypeKind::lane: t = Type::lane(policy); break;
    case TypeKind::tile: t = Type::tile(std::move(shape), policy); break;
    case TypeKind::smem: t = Type::smem(std::move(shape), policy, swizzle); break;
    case TypeKind::gmem: t = Type::gmem(std::move(shape), policy, is_mut); break;
  }
  if (!partial_axes.empty() && !sharding) type_error(file, text, i, "'partial(...)' follows a 'shard[...]'");
  if (sharding) {
    if (sharding->dims.size() != t.shape.size()) {
      type_error(file, text, i,
                 "shard[...] names " + std::to_string(sharding->dims.size()) + " dim(s) for a tensor of rank " +
                     std::to_string(t.shape.size()));
    }
    sharding->partial = std::move(partial_axes);
    t.sharding = std::move(sharding);
  }
  return t;
}

}  // namespace tessera::ir

namespace tessera::ir {

std::vector<Type> parse_type_list(std::string_view text) {
  std::vector<Type> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '<' || c == '[' || c == '(') ++depth;
    if (c == '>' || c == ']' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      std::string_view piece = text.substr(start, i - start);
      if (piece.find_first_not_of(" \t\n") != std::string_view::npos) out.push_back(parse_type(piece, "<result_types>"));
      start = i + 1;
    }
  }
  return out;
}

std::string print_type_list(std::span<const Type> types) {
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) out += (i ? ", " : "") + print_type(types[i]);
  return out;
}

}  // namespace tessera::ir
