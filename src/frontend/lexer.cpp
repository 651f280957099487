// The kernel language lexer: Python's token and indentation rules, plus size
// literals (`8_KiB`) used by shared(...) budgets.
#include "frontend/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace tessera::frontend {

SourceLocation locate_source(std::string_view file, std::string_view text, int first_line, std::size_t offset,
                             std::size_t span) {
  SourceLocation loc = locate(file, text, offset, static_cast<int>(span));
  loc.line += first_line - 1;
  return loc;
}

namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Longest operators first so that `//=` wins over `//` and `/`.
constexpr std::string_view kOperators[] = {
    "//=", "**=", "...", "->", "+=", "-=", "*=", "/=", "%=", "//", "**", "<=", ">=", "==", "!=", "+", "-", "*",
    "/",   "%",   "@",   "<",  ">",  "=",  "(",  ")",  "[",  "]",  "{",  "}",  ",",  ":",  ".",  ";", "~"};

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file, int first_line)
      : text_(text), file_(file), first_line_(first_line) {}

  std::vector<Token> run() {
    bool at_line_start = true;
    while (pos_ < text_.size()) {
      if (at_line_start && depth_ == 0) {
        if (!handle_indentation()) continue;  // blank or comment-only line
        at_line_start = false;
      }
      char c = text_[pos_];
      if (c == '\n') {
        if (depth_ == 0) {
          push(TokenKind::newline, pos_, 1);
          at_line_start = true;
        }
        ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\\') {
        // Line continuation: a backslash must end its line.
        std::size_t next = pos_ + 1;
        if (next < text_.size() && text_[next] == '\r') ++next;
        if (next >= text_.size() || text_[next] != '\n') fail(pos_, "a backslash must end the line (continuation)");
        pos_ = next + 1;
      } else if (is_name_start(c)) {
        std::size_t start = pos_;
        while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
        // String prefixes (r"", b"", f"") are not part of the language.
        if (pos_ < text_.size() && (text_[pos_] == '"' || text_[pos_] == '\'') && pos_ - start <= 2)
          fail(start, "string prefixes such as '" + std::string(text_.substr(start, pos_ - start)) +
                          "' are not supported in kernels");
        Token t = make(TokenKind::name, start, pos_ - start);
        t.text = std::string(text_.substr(start, pos_ - start));
        tokens_.push_back(std::move(t));
      } else if (is_digit(c) || (c == '.' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))) {
        number();
      } else if (c == '"' || c == '\'') {
        string();
      } else {
        operator_token();
      }
    }
    if (depth_ != 0) fail(bracket_stack_.back(), "this bracket is never closed");
    if (!tokens_.empty() && tokens_.back().kind != TokenKind::newline) push(TokenKind::newline, text_.size(), 0);
    while (indents_.size() > 1) {
      indents_.pop_back();
      push(TokenKind::dedent, text_.size(), 0);
    }
    push(TokenKind::end, text_.size(), 0);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& message, std::size_t span = 1) {
    raise(ErrorCode::ParseSyntax, message, locate_source(file_, text_, first_line_, at, span));
  }

  Token make(TokenKind kind, std::size_t offset, std::size_t length) {
    Token t;
    t.kind = kind;
    t.offset = offset;
    t.length = length;
    return t;
  }
  void push(TokenKind kind, std::size_t offset, std::size_t length) { tokens_.push_back(make(kind, offset, length)); }

  // Measures the indentation of the line at pos_; returns false (having
  // consumed the line) when it is blank or holds only a comment.
  bool handle_indentation() {
    std::size_t start = pos_;
    int width = 0;
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\f')) {
      width = text_[pos_] == '\t' ? (width / 8 + 1) * 8 : width + 1;
      ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ >= text_.size()) return false;
    if (text_[pos_] == '\n') {
      ++pos_;
      return false;
    }
    if (text_[pos_] == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      if (pos_ < text_.size()) ++pos_;
      return false;
    }
    if (indents_.empty()) {
      indents_.push_back(width);  // the first line sets the base level
    } else if (width > indents_.back()) {
      indents_.push_back(width);
      push(TokenKind::indent, start, pos_ - start);
    } else {
      while (indents_.size() > 1 && width < indents_.back()) {
        indents_.pop_back();
        push(TokenKind::dedent, pos_, 0);
      }
      if (width != indents_.back()) fail(pos_, "unindent does not match any outer indentation level");
    }
    return true;
  }

  void number() {
    std::size_t start = pos_;
    // Hexadecimal and binary integers.
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() &&
        (text_[pos_ + 1] == 'x' || text_[pos_ + 1] == 'X' || text_[pos_ + 1] == 'b' || text_[pos_ + 1] == 'B')) {
      int base = (text_[pos_ + 1] == 'x' || text_[pos_ + 1] == 'X') ? 16 : 2;
      pos_ += 2;
      std::uint64_t value = 0;
      std::size_t digits = 0;
      while (pos_ < text_.size() && (is_name_char(text_[pos_]))) {
        char d = text_[pos_];
        int v = is_digit(d)              ? d - '0'
                : (d >= 'a' && d <= 'f') ? d - 'a' + 10
                : (d >= 'A' && d <= 'F') ? d - 'A' + 10
                                         : -1;
        if (d == '_') {
          ++pos_;
          continue;
        }
        if (v < 0 || v >= base)
          fail(pos_, std::string("invalid digit '") + d + "' in a base-" + std::to_string(base) + " literal");
        if (value >
            (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - static_cast<std::uint64_t>(v)) /
                static_cast<std::uint64_t>(base))
          fail(start, "integer literal does not fit in int64", pos_ - start + 1);
        value = value * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(v);
        ++digits;
        ++pos_;
      }
      if (digits == 0) fail(start, "integer literal has no digits", pos_ - start);
      Token t = make(TokenKind::integer, start, pos_ - start);
      t.int_value = static_cast<std::int64_t>(value);
      tokens_.push_back(std::move(t));
      return;
    }
    std::string digits;
    bool is_real = false;
    auto take_digits = [&] {
      while (pos_ < text_.size() && (is_digit(text_[pos_]) || text_[pos_] == '_')) {
        if (text_[pos_] == '_') {
          // `8_KiB`: an underscore followed by a letter starts a size suffix.
          if (pos_ + 1 < text_.size() && is_name_start(text_[pos_ + 1]) && text_[pos_ + 1] != '_') return;
          if (pos_ + 1 >= text_.size() || !is_digit(text_[pos_ + 1]))
            fail(pos_, "an underscore in a number must sit between digits");
        } else {
          digits += text_[pos_];
        }
        ++pos_;
      }
    };
    take_digits();
    if (pos_ < text_.size() && text_[pos_] == '.' && !(pos_ + 1 < text_.size() && text_[pos_ + 1] == '.')) {
      is_real = true;
      digits += '.';
      ++pos_;
      take_digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      std::size_t save = pos_;
      std::string exponent = "e";
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) exponent += text_[pos_++];
      if (pos_ < text_.size() && is_digit(text_[pos_])) {
        is_real = true;
        digits += exponent;
        take_digits();
      } else {
        pos_ = save;
      }
    }
    // Size suffix: 8_KiB, 2_MiB, 1_GiB, 64_B.
    std::int64_t scale = 1;
    if (pos_ + 1 < text_.size() && text_[pos_] == '_' && is_name_start(text_[pos_ + 1])) {
      std::size_t suffix_start = ++pos_;
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
      std::string_view suffix = text_.substr(suffix_start, pos_ - suffix_start);
      if (suffix == "B")
        scale = 1;
      else if (suffix == "KiB")
        scale = std::int64_t{1} << 10;
      else if (suffix == "MiB")
        scale = std::int64_t{1} << 20;
      else if (suffix == "GiB")
        scale = std::int64_t{1} << 30;
      else
        fail(suffix_start, "unknown size suffix '" + std::string(suffix) + "' (use B, KiB, MiB or GiB)", suffix.size());
      if (is_real) fail(start, "a size literal needs an integer count (write 8_KiB)", pos_ - start);
    }
    if (pos_ < text_.size() && is_name_char(text_[pos_])) fail(pos_, "invalid character in a number");
    Token t = make(is_real ? TokenKind::real : TokenKind::integer, start, pos_ - start);
    if (is_real) {
      errno = 0;
      t.real_value = std::strtod(digits.c_str(), nullptr);
      if (errno == ERANGE && (t.real_value > 1 || t.real_value < -1))
        fail(start, "float literal is out of range", pos_ - start);
    } else {
      std::uint64_t value = 0;
      constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      for (char d : digits) {
        auto v = static_cast<std::uint64_t>(d - '0');
        if (value > (kMax - v) / 10) fail(start, "integer literal does not fit in int64", pos_ - start);
        value = value * 10 + v;
      }
      if (value > kMax / static_cast<std::uint64_t>(scale))
        fail(start, "size literal does not fit in int64", pos_ - start);
      t.int_value = static_cast<std::int64_t>(value) * scale;
    }
    tokens_.push_back(std::move(t));
  }

  void string() {
    std::size_t start = pos_;
    char quote = text_[pos_];
    bool triple = text_.substr(pos_, 3) == std::string(3, quote);
    pos_ += triple ? 3 : 1;
    std::string value;
    while (true) {
      if (pos_ >= text_.size()) fail(start, "unterminated string literal");
      char c = text_[pos_];
      if (triple ? text_.substr(pos_, 3) == std::string(3, quote) : c == quote) {
        pos_ += triple ? 3 : 1;
        break;
      }
      if (c == '\n' && !triple) fail(start, "unterminated string literal (a newline inside a one-line string)");
      if (c == '\\' && pos_ + 1 < text_.size()) {
        char e = text_[pos_ + 1];
        value += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        pos_ += 2;
        continue;
      }
      value += c;
      ++pos_;
    }
    Token t = make(TokenKind::string, start, pos_ - start);
    t.text = std::move(value);
    tokens_.push_back(std::move(t));
  }

  void operator_token() {
    for (std::string_view op : kOperators) {
      if (text_.substr(pos_, op.size()) != op) continue;
      char c = op[0];
      if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        ++depth_;
        bracket_stack_.push_back(pos_);
        if (depth_ > 256) fail(pos_, "brackets nested too deeply (more than 256 levels)");
      } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (depth_ == 0) fail(pos_, std::string("unmatched '") + c + "'");
        char open = text_[bracket_stack_.back()];
        if ((c == ')' && open != '(') || (c == ']' && open != '[') || (c == '}' && open != '{'))
          fail(pos_, std::string("'") + c + "' does not match '" + open + "'");
        --depth_;
        bracket_stack_.pop_back();
      }
      Token t = make(TokenKind::op, pos_, op.size());
      t.text = std::string(op);
      tokens_.push_back(std::move(t));
      pos_ += op.size();
      return;
    }
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    constexpr const char* kHex = "0123456789abcdef";
    std::string shown =
        c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    fail(pos_, "unexpected character '" + shown + "'");
  }

  std::string_view text_;
  std::string_view file_;
  int first_line_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::vector<std::size_t> bracket_stack_;
  std::vector<int> indents_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text, std::string_view file, int first_line) {
  return Lexer(text, file, first_line).run();
}

}  // namespace tessera::frontend
