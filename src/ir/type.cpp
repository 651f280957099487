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

std::string print_type(const Type& type) {
  return "tensor<" + print_shape(type.shape) + " " + print_policy(type.policy) + ">";
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

}  // namespace

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
  expect("tensor");
  expect("<");
  expect("[");
  Shape shape;
  skip();
  if (i < text.size() && text[i] == ']') {
    ++i;
  } else {
    while (true) {
      skip();
      std::size_t start = i;
      if (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        std::int64_t n = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
          if (n > (INT64_MAX - 9) / 10) type_error(file, text, start, "dimension size too large");
          n = n * 10 + (text[i++] - '0');
        }
        shape.push_back(Dim::fixed(n));
      } else if (i < text.size() && is_ident_start(text[i])) {
        while (i < text.size() && is_ident_char(text[i])) ++i;
        shape.push_back(Dim::named(std::string(text.substr(start, i - start))));
      } else {
        type_error(file, text, start, "expected a dimension (a size or a symbol name)");
      }
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
  skip();
  std::size_t close = text.find('>', i);
  if (close == std::string_view::npos) type_error(file, text, text.size(), "expected '>' closing the tensor type");
  std::string_view policy_text = text.substr(i, close - i);
  while (!policy_text.empty() && std::isspace(static_cast<unsigned char>(policy_text.back())))
    policy_text.remove_suffix(1);
  if (policy_text.empty()) type_error(file, text, i, "expected an element dtype or policy in tensor type");
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
  if (i != text.size()) type_error(file, text, i, "unexpected text after tensor type");
  return Type::tensor(std::move(shape), policy);
}

}  // namespace tessera::ir
