// Tessera's one error model (ARCHITECTURE.md decision 11).
//
// Every failure a user can cause is a tessera::Error: it carries a stable code
// (printed as "TE<number>"), the kind of error it is, a message that says what
// was expected, and, for errors in source text, a file:line:col location with
// the offending line and a caret under the column. Python raises the matching
// exception class (tessera.DtypeError, ...). User mistakes never abort.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

// The families of errors. Python mirrors each with one exception class.
enum class ErrorKind : std::uint8_t {
  Internal,
  Dtype,
  Shape,
  Parse,
  KernelType,
  Privilege,
  Effect,
  Compile,
  Device,
  Collective,
  OutOfMemory,
  Argument,  // a well-typed argument whose value is outside its domain
};

// Stable error codes. Numbers never change once released; the thousands digit
// is the kind. New codes are appended within their kind's range.
enum class ErrorCode : std::uint16_t {
  Internal = 1,
  DtypeUnknown = 1001,
  DtypeNotStorage = 1002,   // e.g. tf32, which is a math mode
  DtypeUnsupported = 1003,  // a dtype the operation cannot take
  ShapeMismatch = 2001,
  ShapeSymbolBinding = 2002,  // a symbolic dim bound to two different sizes
  ShapeConstraint = 2003,     // a tessera.require constraint does not hold
  ParseSyntax = 3001,
  ParseUnknownModifier = 3002,
  ParseDuplicateModifier = 3003,
  ParseUnknownOp = 3004,
  ParseUndefinedValue = 3005,
  KernelType = 4001,
  Privilege = 5001,
  Effect = 6001,
  Compile = 7001,
  VerifyFailed = 7002,  // IR that breaks an op's rules
  DeviceUnavailable = 8001,
  Device = 8002,
  Collective = 9001,
  OutOfMemory = 10001,
  ArgumentInvalid = 11001,
  IndexOutOfRange = 11002,
};

ErrorKind kind_of(ErrorCode code);
std::string_view kind_name(ErrorKind kind);  // "DtypeError", "ShapeError", ...

// A location in source text: 1-based line and column, the text of that line
// and how many characters the caret underline spans.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
  std::string line_text;
  int span = 1;

  bool valid() const { return line > 0 && column > 0; }
  // "file:line:col" (file omitted when empty).
  std::string prefix() const;
  // The source line and a caret line under the column, each newline-ended.
  std::string caret_lines() const;
};

// Builds a SourceLocation for offset `offset` (0-based) in `text`, which may
// span several lines.
SourceLocation locate(std::string_view file, std::string_view text, std::size_t offset, int span = 1);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, SourceLocation where = {});

  ErrorCode code() const { return code_; }
  ErrorKind kind() const { return kind_of(code_); }
  // "TE1001"
  std::string code_string() const;
  // The bare message, without code or location.
  const std::string& message() const { return message_; }
  const SourceLocation& where() const { return where_; }

 private:
  ErrorCode code_;
  std::string message_;
  SourceLocation where_;
};

// One class per kind so C++ callers can catch the family they handle.
#define TESSERA_DECLARE_ERROR(Name)                                      \
  class Name : public Error {                                            \
   public:                                                               \
    Name(ErrorCode code, std::string message, SourceLocation where = {}) \
        : Error(code, std::move(message), std::move(where)) {}           \
  };
TESSERA_DECLARE_ERROR(DtypeError)
TESSERA_DECLARE_ERROR(ShapeError)
TESSERA_DECLARE_ERROR(ParseError)
TESSERA_DECLARE_ERROR(KernelTypeError)
TESSERA_DECLARE_ERROR(PrivilegeError)
TESSERA_DECLARE_ERROR(EffectError)
TESSERA_DECLARE_ERROR(CompileError)
TESSERA_DECLARE_ERROR(DeviceError)
TESSERA_DECLARE_ERROR(CollectiveError)
TESSERA_DECLARE_ERROR(OutOfMemoryError)
TESSERA_DECLARE_ERROR(ArgumentError)
#undef TESSERA_DECLARE_ERROR

// The closest of `candidates` to `name` by edit distance, or "" when none is
// close enough to be a plausible typo. Used for "did you mean" hints.
std::string closest_match(std::string_view name, const std::vector<std::string_view>& candidates);

// A number as messages write it: shortest of fixed and exponent form, six
// significant digits ("0.5", "20", "1e-06", "-1").
std::string number_text(double x);

}  // namespace tessera

namespace tessera {
// Throws the Error subclass that matches `code`'s kind.
[[noreturn]] void raise(ErrorCode code, std::string message, SourceLocation where = {});
}  // namespace tessera
