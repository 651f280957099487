// Tokens of the kernel language (Python's lexical structure).
//
// The lexer turns source text into names, numbers, strings, operators and
// the layout tokens NEWLINE / INDENT / DEDENT, exactly as Python does:
// newlines inside brackets and after a backslash are ignored, blank and
// comment-only lines produce nothing, and the first line's indentation is
// the base level (so the indented text of a method works as well).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::frontend {

enum class TokenKind : std::uint8_t { name, integer, real, string, op, newline, indent, dedent, end };

struct Token {
  TokenKind kind = TokenKind::end;
  std::size_t offset = 0;
  std::size_t length = 0;
  std::string text;  // name, operator, or the decoded string value
  std::int64_t int_value = 0;
  double real_value = 0;
};

// The location of byte `offset` of `text`, whose first line is line
// `first_line` of `file`.
SourceLocation locate_source(std::string_view file, std::string_view text, int first_line, std::size_t offset,
                             std::size_t span = 1);

// Raises ParseError (located through `file`, `first_line`) on malformed text:
// an unterminated string, a bad number or size suffix, an integer too large
// for int64, inconsistent indentation, unbalanced brackets, or a character the
// language does not use.
std::vector<Token> tokenize(std::string_view text, std::string_view file, int first_line);

}  // namespace tessera::frontend
