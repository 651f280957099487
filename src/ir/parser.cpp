// The IR parser: reads the custom and generic text forms (tessera/ir/text.h).
//
// A hand-written recursive-descent reader over the whole text, so every
// diagnostic can point at a file:line:col with the source line and a caret.
// Ops are created through OpBuilder, which completes and checks attributes
// and infers result types; the types written in the text are then compared
// with the inferred ones, so a wrong type is a diagnostic rather than IR that
// silently disagrees with its op's rules.
//
// Ops with regions (Tile IR control flow) write them after the result types,
// each as `{ ^(%arg: type, ...): op... }` (the `^(...)` header only when the
// block has arguments). Names defined inside a region are visible only there.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/ir/dialect.h"
#include "tessera/ir/text.h"
#include "tessera/support/error.h"

namespace tessera::ir {
namespace {

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
// Characters of SSA value names (%x, %0, %arg1) and function symbols (@f).
bool is_name_char(char c) {
  return is_ident_char(c) || c == '.' || c == '$';
}
// Op names: dialect.op.
bool is_op_name_char(char c) {
  return is_ident_char(c) || c == '.';
}

// A name bound in the current function: one value, or an op's results.
struct Binding {
  std::vector<Value*> values;
  std::size_t offset;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Module parse_module() {
    Module module;
    std::unordered_map<std::string, std::size_t> seen;
    while (true) {
      skip();
      if (at_end()) break;
      std::size_t at = pos_;
      auto func = parse_function();
      const std::string& name = function_name(*func);
      if (auto it = seen.find(name); it != seen.end()) {
        fail(at, "function @" + name + " is defined twice (first at line " + std::to_string(line_of(it->second)) + ")",
             4);
      }
      seen.emplace(name, at);
      module.add_function(std::move(func));
    }
    return module;
  }

 private:
  // ---- Low-level reading ----------------------------------------------------

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // Skips whitespace and `//` comments.
  void skip() {
    while (!at_end()) {
      char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '/' && peek(1) == '/') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  int line_of(std::size_t offset) const { return where(offset).line; }

  // Every op records its location, so lines are found by binary search over
  // line starts computed once (locate() would rescan the text each time).
  SourceLocation where(std::size_t offset, int span = 1) const {
    if (line_starts_.empty()) {
      line_starts_.push_back(0);
      for (std::size_t i = 0; i < text_.size(); ++i) {
        if (text_[i] == '\n') line_starts_.push_back(i + 1);
      }
    }
    offset = std::min(offset, text_.size());
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    std::size_t line_index = static_cast<std::size_t>(it - line_starts_.begin()) - 1;
    std::size_t start = line_starts_[line_index];
    std::size_t end = text_.find('\n', start);
    if (end == std::string_view::npos) end = text_.size();
    SourceLocation loc;
    loc.file = std::string(file_);
    loc.line = static_cast<int>(line_index) + 1;
    loc.column = static_cast<int>(offset - start) + 1;
    loc.line_text = std::string(text_.substr(start, end - start));
    loc.span = std::max(1, span);
    return loc;
  }

  [[noreturn]] void fail(std::size_t offset, std::string message, int span = 1,
                         ErrorCode code = ErrorCode::ParseSyntax) const {
    raise(code, std::move(message), where(offset, span));
  }

  // "'x'", "'word'" or "end of text", for "expected A, found B".
  std::string found() const {
    if (at_end()) return "end of text";
    std::size_t end = pos_;
    while (end < text_.size() && is_op_name_char(text_[end])) ++end;
    if (end == pos_) end = pos_ + 1;
    return "'" + std::string(text_.substr(pos_, end - pos_)) + "'";
  }

  // Where "found end of text" points: just after the last non-blank character,
  // so the caret sits on a visible line.
  std::size_t error_offset() const {
    if (!at_end()) return pos_;
    std::size_t end = text_.size();
    while (end > 0 && std::isspace(static_cast<unsigned char>(text_[end - 1]))) --end;
    return end;
  }

  void expect(std::string_view token, std::string_view context = {}) {
    skip();
    if (text_.substr(pos_, token.size()) != token) {
      fail(error_offset(),
           "expected '" + std::string(token) + "'" + (context.empty() ? "" : " " + std::string(context)) + ", found " +
               found(),
           1);
    }
    pos_ += token.size();
  }

  bool consume(char c) {
    skip();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  std::string read_while(bool (*pred)(char)) {
    std::size_t start = pos_;
    while (!at_end() && pred(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Raises `e` again placed in the whole text: `e` was located inside the
  // one-line substring starting at `start`.
  [[noreturn]] void relocate(const Error& e, std::size_t start) const {
    std::size_t offset = start;
    if (e.where().valid()) offset += static_cast<std::size_t>(e.where().column - 1);
    raise(e.code(), e.message(), where(offset, e.where().span));
  }

  // ---- Types ----------------------------------------------------------------

  Type parse_type_here() {
    skip();
    std::size_t start = pos_;
    std::size_t word_end = pos_;
    while (word_end < text_.size() && is_ident_char(text_[word_end])) ++word_end;
    std::string_view kind = text_.substr(pos_, word_end - pos_);
    if (kind != "tensor" && kind != "lane" && kind != "tile" && kind != "smem" && kind != "gmem") {
      fail(error_offset(), "expected a type such as tensor<[B, 64] fp16> or lane<fp32>, found " + found());
    }
    // A type is written on one line; its policy text holds no '>'.
    std::size_t end = pos_;
    while (end < text_.size() && text_[end] != '>' && text_[end] != '\n') ++end;
    if (end >= text_.size() || text_[end] != '>') fail(end, "expected '>' closing the " + std::string(kind) + " type");
    std::string_view type_text = text_.substr(start, end + 1 - start);
    try {
      Type t = parse_type(type_text, file_);
      pos_ = end + 1;
      return t;
    } catch (const Error& e) {
      relocate(e, start);
    }
  }

  // "(t0, t1)" -> types and the offset of each.
  std::vector<Type> parse_type_list(std::vector<std::size_t>* offsets = nullptr) {
    expect("(");
    std::vector<Type> types;
    skip();
    if (consume(')')) return types;
    while (true) {
      skip();
      if (offsets) offsets->push_back(pos_);
      types.push_back(parse_type_here());
      if (consume(',')) continue;
      expect(")", "closing the type list");
      return types;
    }
  }

  // ---- Attributes -----------------------------------------------------------

  std::string parse_string_literal() {
    std::size_t start = pos_;
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (at_end() || text_[pos_] == '\n') fail(start, "unterminated string (missing closing '\"')");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = peek();
      if (e == '"' || e == '\\') {
        out += e;
      } else if (e == 'n') {
        out += '\n';
      } else {
        fail(pos_ - 1, "unknown escape in string; use \\\", \\\\ or \\n", 2);
      }
      ++pos_;
    }
  }

  // A number token: -?digits[.digits][(e|E)[+-]digits]. Reals are whatever
  // has a '.' or an exponent; integers must fit in 64 bits.
  Attribute parse_number() {
    std::size_t start = pos_;
    std::size_t i = pos_;
    if (i < text_.size() && text_[i] == '-') ++i;
    std::size_t digits = i;
    while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]))) ++i;
    if (i == digits) fail(start, "expected a number after '-'");
    bool real = false;
    if (i < text_.size() && text_[i] == '.') {
      real = true;
      ++i;
      while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]))) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      std::size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      std::size_t exp_digits = j;
      while (j < text_.size() && std::isdigit(static_cast<unsigned char>(text_[j]))) ++j;
      if (j == exp_digits) fail(i, "expected digits in the exponent");
      real = true;
      i = j;
    }
    if (i < text_.size() && is_ident_char(text_[i])) fail(i, "unexpected '" + std::string(1, text_[i]) + "' in number");
    std::string_view token = text_.substr(start, i - start);
    int span = static_cast<int>(token.size());
    pos_ = i;
    if (real) {
      double v = 0;
      auto res = std::from_chars(token.data(), token.data() + token.size(), v);
      if (res.ec != std::errc() || res.ptr != token.data() + token.size()) {
        fail(start, "float literal " + std::string(token) + " is out of range of a 64-bit float", span);
      }
      return v;
    }
    std::int64_t v = 0;
    auto res = std::from_chars(token.data(), token.data() + token.size(), v);
    if (res.ec != std::errc() || res.ptr != token.data() + token.size()) {
      fail(start, "integer " + std::string(token) + " does not fit in 64 bits", span);
    }
    return v;
  }

  double parse_real_element() {
    skip();
    if (is_ident_start(peek()) || (peek() == '-' && is_ident_start(peek(1)))) {
      std::size_t start = pos_;
      bool negative = consume('-');
      std::string word = read_while(is_ident_char);
      if (word == "inf")
        return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      if (word == "nan" && !negative) return std::numeric_limits<double>::quiet_NaN();
      fail(start, "expected a number, nan, inf or -inf, found '" + std::string(text_.substr(start, pos_ - start)) + "'",
           static_cast<int>(pos_ - start));
    }
    if (peek() != '-' && !std::isdigit(static_cast<unsigned char>(peek()))) {
      fail(error_offset(), "expected a number, found " + found());
    }
    Attribute a = parse_number();
    if (auto* i = std::get_if<std::int64_t>(&a)) return static_cast<double>(*i);
    return std::get<double>(a);
  }

  Shape parse_dims() {
    expect("[");
    Shape shape;
    if (consume(']')) return shape;
    while (true) {
      skip();
      if (!std::isdigit(static_cast<unsigned char>(peek())) && !is_ident_start(peek())) {
        fail(error_offset(), "expected a dimension (a size or a symbol name), found " + found());
      }
      std::size_t start = pos_;
      if (std::isdigit(static_cast<unsigned char>(peek()))) {
        // Reject "2.5" before read_dim stops at the '.'.
        Attribute a = parse_number();
        if (!std::get_if<std::int64_t>(&a)) {
          fail(start, "a dimension must be an integer size or a symbol name", static_cast<int>(pos_ - start));
        }
        pos_ = start;
      }
      shape.push_back(read_dim(text_, pos_, file_));
      if (consume(',')) continue;
      expect("]", "closing the shape");
      return shape;
    }
  }

  Attribute parse_attribute() {
    skip();
    std::size_t start = pos_;
    char c = peek();
    if (c == '"') return parse_string_literal();
    if (c == '[') {
      ++pos_;
      std::vector<std::int64_t> ints;
      if (consume(']')) return ints;
      while (true) {
        skip();
        std::size_t at = pos_;
        if (peek() != '-' && !std::isdigit(static_cast<unsigned char>(peek()))) {
          fail(error_offset(), "expected an integer in the list, found " + found());
        }
        Attribute a = parse_number();
        auto* n = std::get_if<std::int64_t>(&a);
        if (!n) {
          fail(at, "a [...] list holds integers; write dense<[...]> for floats", static_cast<int>(pos_ - at));
        }
        ints.push_back(*n);
        if (consume(',')) continue;
        expect("]", "closing the integer list");
        return ints;
      }
    }
    if (c == '-' && is_ident_start(peek(1))) {
      ++pos_;
      std::string word = read_while(is_ident_char);
      if (word == "inf") return -std::numeric_limits<double>::infinity();
      fail(start, "expected an attribute value, found '-" + word + "'", static_cast<int>(word.size() + 1));
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return parse_number();
    if (is_ident_start(c)) {
      std::string word = read_while(is_ident_char);
      if (word == "true") return true;
      if (word == "false") return false;
      if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (word == "inf") return std::numeric_limits<double>::infinity();
      if (word == "dense") {
        expect("<", "after 'dense'");
        expect("[", "in dense<[...]>");
        std::vector<double> reals;
        if (!consume(']')) {
          while (true) {
            reals.push_back(parse_real_element());
            if (consume(',')) continue;
            expect("]", "closing the dense list");
            break;
          }
        }
        expect(">", "closing dense<...>");
        return reals;
      }
      if (word == "shape") {
        expect("<", "after 'shape'");
        Shape s = parse_dims();
        expect(">", "closing shape<...>");
        return s;
      }
      if (word == "policy") {
        expect("<", "after 'policy'");
        std::size_t text_start = pos_;
        std::size_t end = pos_;
        while (end < text_.size() && text_[end] != '>' && text_[end] != '\n') ++end;
        if (end >= text_.size() || text_[end] != '>') fail(end, "expected '>' closing policy<...>");
        std::string_view policy_text = text_.substr(text_start, end - text_start);
        while (!policy_text.empty() && std::isspace(static_cast<unsigned char>(policy_text.back()))) {
          policy_text.remove_suffix(1);
        }
        if (policy_text.empty()) fail(text_start, "expected a dtype or numerics policy in policy<...>");
        try {
          NumericsPolicy p = parse_policy(policy_text, file_);
          pos_ = end + 1;
          return p;
        } catch (const Error& e) {
          relocate(e, text_start);
        }
      }
      fail(start,
           "expected an attribute value (true, false, a number, nan, inf, \"string\", [ints], dense<[...]>, "
           "policy<...> or shape<[...]>), found '" +
               word + "'",
           static_cast<int>(word.size()));
    }
    fail(error_offset(), "expected an attribute value, found " + found());
  }

  struct ParsedAttrs {
    AttrMap attrs;
    std::vector<std::pair<std::string, std::size_t>> offsets;  // name -> where it was written
  };

  // "{name = value, ...}"; the '{' is next.
  ParsedAttrs parse_attr_dict() {
    ParsedAttrs out;
    expect("{");
    skip();
    if (consume('}')) return out;
    while (true) {
      skip();
      std::size_t at = pos_;
      if (!is_ident_start(peek())) fail(error_offset(), "expected an attribute name, found " + found());
      std::string name = read_while(is_ident_char);
      if (out.attrs.has(name)) {
        fail(at, "attribute '" + name + "' is given twice", static_cast<int>(name.size()));
      }
      expect("=", "after attribute name '" + name + "'");
      out.attrs.set(name, parse_attribute());
      out.offsets.emplace_back(name, at);
      if (consume(',')) continue;
      expect("}", "closing the attribute dictionary");
      return out;
    }
  }

  // complete_attrs, with an error about one written attribute pointed at it.
  AttrMap complete_at(const OpDef& def, const ParsedAttrs& parsed, std::size_t op_at, int op_span) const {
    try {
      return complete_attrs(def, parsed.attrs);
    } catch (const Error& e) {
      for (const auto& [name, offset] : parsed.offsets) {
        if (e.message().find("attribute '" + name + "'") != std::string::npos) {
          raise(e.code(), e.message(), where(offset, static_cast<int>(name.size())));
        }
      }
      raise(e.code(), e.message(), where(op_at, op_span));
    }
  }

  // True when a '{' at pos_ opens an attribute dictionary ("{name ...}" or
  // "{}") rather than a region, whose first token is a value (%x), a block
  // header (^), a quoted op name or a dotted op name (tile.yield).
  bool at_attr_dict() {
    std::size_t save = pos_;
    bool result = false;
    if (peek() == '{') {
      ++pos_;
      skip();
      if (peek() == '}') {
        result = true;
      } else if (is_ident_start(peek())) {
        read_while(is_ident_char);
        result = peek() != '.';
      }
    }
    pos_ = save;
    return result;
  }

  // Binds `name` in the innermost open region (or the function).
  void bind(const std::string& name, Binding binding) {
    values_[name] = std::move(binding);
    if (!scopes_.empty()) scopes_.back().push_back(name);
  }

  // "{ ^(%a: type, ...): op... }" appended to `op` as a new region.
  void parse_region(Operation& op) {
    skip();
    std::size_t open = pos_;
    expect("{", "opening a region");
    Block& block = op.add_region().add_block();
    scopes_.emplace_back();
    skip();
    if (peek() == '^') {
      ++pos_;
      expect("(", "opening the block arguments after '^'");
      if (!consume(')')) {
        while (true) {
          skip();
          std::size_t at = pos_;
          if (peek() != '%') fail(error_offset(), "expected a block argument such as %i, found " + found());
          std::string arg = parse_value_name();
          check_not_defined(arg, at);
          expect(":", "after block argument '%" + arg + "'");
          Type t = parse_type_here();
          bind(arg, Binding{{block.add_argument(std::move(t), arg)}, at});
          if (consume(',')) continue;
          expect(")", "closing the block arguments");
          break;
        }
      }
      expect(":", "after the block arguments");
    }
    const Operation* terminator = nullptr;
    while (true) {
      skip();
      if (at_end()) {
        fail(error_offset(), "expected '}' closing the region of '" + std::string(op.name()) + "' (opened at line " +
                                 std::to_string(line_of(open)) + "), found end of text");
      }
      if (peek() == '}') break;
      std::size_t op_at = pos_;
      if (terminator) {
        fail(op_at, "'" + std::string(terminator->name()) + "' must be the last op of its region");
      }
      Operation* inner = parse_op(block);
      if (inner->def().is_terminator) terminator = inner;
    }
    ++pos_;
    for (const std::string& name : scopes_.back()) values_.erase(name);
    scopes_.pop_back();
  }

  // The regions following an op: each starts with '{'.
  void parse_regions(Operation& op) {
    skip();
    while (peek() == '{') {
      parse_region(op);
      skip();
    }
  }

  // ---- Values ---------------------------------------------------------------

  // "%name" with the '%' next; returns the name.
  std::string parse_value_name() {
    std::size_t at = pos_;
    ++pos_;
    std::string name = read_while(is_name_char);
    if (name.empty()) fail(at, "expected a value name after '%'");
    return name;
  }

  // A use: %name or %name#k.
  Value* parse_value_use() {
    skip();
    std::size_t at = pos_;
    if (peek() != '%') fail(error_offset(), "expected a value such as %x or %0, found " + found());
    std::string name = parse_value_name();
    std::optional<std::int64_t> index;
    if (peek() == '#') {
      ++pos_;
      std::size_t digits = pos_;
      std::string n = read_while([](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; });
      if (n.empty() || n.size() > 9) fail(digits, "expected a result number after '#'");
      index = std::stoll(n);
    }
    std::string ref = std::string(text_.substr(at, pos_ - at));
    int span = static_cast<int>(ref.size());
    auto it = values_.find(name);
    if (it == values_.end()) fail(at, "use of undefined value '" + ref + "'", span, ErrorCode::ParseUndefinedValue);
    const auto& values = it->second.values;
    if (!index) {
      if (values.size() != 1) {
        fail(at,
             "value '%" + name + "' names " + std::to_string(values.size()) + " results; use %" + name + "#0 .. %" +
                 name + "#" + std::to_string(values.size() - 1),
             span, ErrorCode::ParseUndefinedValue);
      }
      return values[0];
    }
    if (static_cast<std::size_t>(*index) >= values.size()) {
      fail(at,
           "use of undefined value '" + ref + "': '%" + name + "' has " + std::to_string(values.size()) + " result(s)",
           span, ErrorCode::ParseUndefinedValue);
    }
    return values[static_cast<std::size_t>(*index)];
  }

  void check_not_defined(const std::string& name, std::size_t at) const {
    if (auto it = values_.find(name); it != values_.end()) {
      fail(at,
           "value '%" + name + "' is defined twice (first defined at line " +
               std::to_string(line_of(it->second.offset)) + ")",
           static_cast<int>(name.size() + 1), ErrorCode::ParseUndefinedValue);
    }
  }

  // True when the text at pos_ starts the next op ("%0 =" or "%1:2 ="), not an operand.
  bool at_result_definition() {
    std::size_t save = pos_;
    bool result = false;
    if (peek() == '%') {
      ++pos_;
      read_while(is_name_char);
      skip();
      if (peek() == '=') {
        result = true;
      } else if (peek() == ':') {
        ++pos_;
        skip();
        bool digits = std::isdigit(static_cast<unsigned char>(peek())) != 0;
        read_while([](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; });
        skip();
        result = digits && peek() == '=';
      }
    }
    pos_ = save;
    return result;
  }

  // ---- Functions and ops ------------------------------------------------------

  std::unique_ptr<Operation> parse_function() {
    skip();
    std::size_t func_at = pos_;
    std::string keyword = read_while(is_op_name_char);
    if (keyword != "func") {
      pos_ = func_at;
      fail(func_at, "expected 'func' at the top level, found " + found());
    }
    expect("@", "before the function name");
    std::string name;
    if (peek() == '"') {
      name = parse_string_literal();
    } else {
      name = read_while(is_name_char);
      if (name.empty()) fail(error_offset(), "expected a function name after '@', found " + found());
    }
    values_.clear();
    auto func = make_function(name, where(func_at, 4));
    Block& body = function_body(*func);

    expect("(", "opening the parameter list");
    if (!consume(')')) {
      while (true) {
        skip();
        std::size_t at = pos_;
        if (peek() != '%') fail(error_offset(), "expected a parameter such as %x, found " + found());
        std::string arg = parse_value_name();
        check_not_defined(arg, at);
        expect(":", "after parameter '%" + arg + "'");
        Type t = parse_type_here();
        bind(arg, Binding{{body.add_argument(std::move(t), arg)}, at});
        if (consume(',')) continue;
        expect(")", "closing the parameter list");
        break;
      }
    }
    expect("->", "before the function's result types");
    std::vector<Type> result_types = parse_type_list();
    skip();
    if (text_.substr(pos_, 10) == "attributes") {
      pos_ += 10;
      skip();
      std::size_t at = pos_;
      ParsedAttrs extra = parse_attr_dict();
      if (extra.attrs.has("sym_name")) fail(at, "sym_name is given by the name after '@'");
      extra.attrs.set("sym_name", name);
      func->attrs() = complete_at(func->def(), extra, func_at, 4);
    }
    skip();
    std::size_t open = pos_;
    expect("{", "opening the function body");
    Operation* terminator = nullptr;
    while (true) {
      skip();
      if (at_end()) {
        fail(error_offset(), "expected '}' closing function @" + name + " (opened at line " +
                                 std::to_string(line_of(open)) + "), found end of text");
      }
      if (peek() == '}') break;
      std::size_t op_at = pos_;
      if (terminator) {
        fail(op_at, "'" + std::string(terminator->name()) + "' must be the last op of function @" + name);
      }
      Operation* op = parse_op(body);
      if (op->def().is_terminator) terminator = op;
    }
    std::size_t close = pos_;
    ++pos_;
    if (!terminator || terminator->name() != "return") {
      fail(close, "function @" + name + " must end with 'return'");
    }
    check_return_types(*terminator, result_types, name);
    return func;
  }

  void check_return_types(const Operation& ret, const std::vector<Type>& declared, const std::string& name) const {
    if (ret.num_operands() != declared.size()) {
      raise(ErrorCode::VerifyFailed,
            "'return' gives " + std::to_string(ret.num_operands()) + " value(s) but function @" + name + " declares " +
                std::to_string(declared.size()) + " result(s)",
            ret.location());
    }
    for (std::size_t i = 0; i < declared.size(); ++i) {
      if (ret.operand(i)->type() != declared[i]) {
        raise(ErrorCode::VerifyFailed,
              "'return' operand #" + std::to_string(i) + " has type " + print_type(ret.operand(i)->type()) +
                  " but function @" + name + " declares result type " + print_type(declared[i]),
              ret.location());
      }
    }
  }

  Operation* parse_op(Block& body) {
    skip();
    // Results: "%0 =", "%1:2 =" or none.
    std::string result_name;
    std::size_t result_at = pos_;
    std::size_t num_results = 0;
    if (peek() == '%') {
      result_name = parse_value_name();
      check_not_defined(result_name, result_at);
      num_results = 1;
      skip();
      if (peek() == ':') {
        ++pos_;
        skip();
        std::size_t at = pos_;
        std::string n = read_while([](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; });
        if (n.empty() || n.size() > 6 || std::stoll(n) < 1) {
          fail(at, "expected the number of results (1 or more) after '%" + result_name + ":'");
        }
        num_results = static_cast<std::size_t>(std::stoll(n));
      }
      expect("=", "after the result name");
    }
    skip();
    std::size_t op_at = pos_;
    bool generic = peek() == '"';
    std::string op_name;
    if (generic) {
      op_name = parse_string_literal();
    } else {
      op_name = read_while(is_op_name_char);
      if (op_name.empty()) fail(error_offset(), "expected an op name, found " + found());
    }
    int op_span = static_cast<int>(pos_ - op_at);
    SourceLocation loc = where(op_at, op_span);
    const OpDef* def = &Registry::global().get(op_name, loc);
    if (def->name == "func") fail(op_at, "functions cannot be nested inside a function", op_span);

    std::vector<Value*> operands;
    std::vector<Type> written_operand_types;
    std::vector<std::size_t> operand_type_offsets;
    std::vector<Type> written_result_types;
    ParsedAttrs attrs;
    if (generic) {
      expect("(", "opening the operand list");
      if (!consume(')')) {
        while (true) {
          operands.push_back(parse_value_use());
          if (consume(',')) continue;
          expect(")", "closing the operand list");
          break;
        }
      }
      skip();
      if (at_attr_dict()) attrs = parse_attr_dict();
      expect(":", "before the op's type signature");
      skip();
      std::size_t types_at = pos_;
      written_operand_types = parse_type_list(&operand_type_offsets);
      expect("->", "in the op's type signature");
      written_result_types = parse_type_list();
      if (written_operand_types.size() != operands.size()) {
        fail(types_at, "'" + op_name + "' has " + std::to_string(operands.size()) +
                           " operand(s) but its signature lists " + std::to_string(written_operand_types.size()) +
                           " operand type(s)");
      }
      for (std::size_t i = 0; i < operands.size(); ++i) {
        if (operands[i]->type() != written_operand_types[i]) {
          raise(ErrorCode::VerifyFailed,
                "in '" + op_name + "': operand #" + std::to_string(i) + " type " +
                    print_type(written_operand_types[i]) + " does not match the value's type " +
                    print_type(operands[i]->type()),
                where(operand_type_offsets[i]));
        }
      }
      if (result_name.empty() ? !written_result_types.empty() : written_result_types.size() != num_results) {
        fail(op_at,
             "'" + op_name + "' lists " + std::to_string(written_result_types.size()) + " result type(s) but " +
                 std::to_string(num_results) + " result(s) are named",
             op_span);
      }
    } else {
      skip();
      if (peek() == '%' && !at_result_definition()) {
        while (true) {
          operands.push_back(parse_value_use());
          if (consume(',')) continue;
          break;
        }
      }
      skip();
      if (at_attr_dict()) attrs = parse_attr_dict();
      if (num_results > 0) {
        expect(":", "before the result type");
        for (std::size_t i = 0; i < num_results; ++i) {
          if (i) expect(",", "between result types");
          written_result_types.push_back(parse_type_here());
        }
      }
    }

    AttrMap full = complete_at(*def, attrs, op_at, op_span);
    Operation* op = OpBuilder(body).create(*def, std::move(operands), std::move(full), loc);
    if (op->num_results() != num_results) {
      raise(ErrorCode::VerifyFailed,
            "in '" + op_name + "': the op has " + std::to_string(op->num_results()) + " result(s) but " +
                std::to_string(num_results) + " are named" +
                (num_results == 0 ? "" : " (write %" + result_name + ":" + std::to_string(op->num_results()) + ")"),
            loc);
    }
    for (std::size_t i = 0; i < num_results; ++i) {
      const Type& inferred = op->result(i)->type();
      if (written_result_types[i] != inferred) {
        raise(ErrorCode::VerifyFailed,
              "in '" + op_name + "': result " + (num_results > 1 ? "#" + std::to_string(i) + " " : "") + "type " +
                  print_type(written_result_types[i]) + " does not match inferred " + print_type(inferred),
              loc);
      }
    }
    parse_regions(*op);
    if (num_results > 0) bind(result_name, Binding{op->results(), result_at});
    return op;
  }

  std::string_view text_;
  std::string file_;
  mutable std::vector<std::size_t> line_starts_;  // filled on first use by where()
  std::size_t pos_ = 0;
  std::unordered_map<std::string, Binding> values_;
  // Names bound inside each open region, unbound when it closes.
  std::vector<std::vector<std::string>> scopes_;
};

}  // namespace

Module parse_module(std::string_view text, std::string_view file) {
  return Parser(text, file).parse_module();
}

}  // namespace tessera::ir
