// The error model: stable codes, kinds, exception classes, source locations
// with caret lines, and "did you mean" suggestions.
#include "tessera/support/error.h"

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>
#include <vector>

namespace tessera {
namespace {

TEST(ErrorCode, CodeStringIsTEAndFourDigits) {
  EXPECT_EQ(Error(ErrorCode::DtypeUnknown, "m").code_string(), "TE1001");
  EXPECT_EQ(Error(ErrorCode::ParseDuplicateModifier, "m").code_string(), "TE3003");
  // Codes below 1000 are zero-padded, codes of five digits are printed whole.
  EXPECT_EQ(Error(ErrorCode::Internal, "m").code_string(), "TE0001");
  EXPECT_EQ(Error(ErrorCode::OutOfMemory, "m").code_string(), "TE10001");
  EXPECT_EQ(Error(ErrorCode::ArgumentInvalid, "m").code_string(), "TE11001");
}

// Every code, with the kind and the kind's name its thousands digit implies.
struct CodeCase {
  ErrorCode code;
  ErrorKind kind;
  const char* kind_name;
};
const std::vector<CodeCase>& all_codes() {
  static const std::vector<CodeCase> cases{
      {ErrorCode::Internal, ErrorKind::Internal, "TesseraError"},
      {ErrorCode::DtypeUnknown, ErrorKind::Dtype, "DtypeError"},
      {ErrorCode::DtypeNotStorage, ErrorKind::Dtype, "DtypeError"},
      {ErrorCode::DtypeUnsupported, ErrorKind::Dtype, "DtypeError"},
      {ErrorCode::ShapeMismatch, ErrorKind::Shape, "ShapeError"},
      {ErrorCode::ParseSyntax, ErrorKind::Parse, "ParseError"},
      {ErrorCode::ParseUnknownModifier, ErrorKind::Parse, "ParseError"},
      {ErrorCode::ParseDuplicateModifier, ErrorKind::Parse, "ParseError"},
      {ErrorCode::KernelType, ErrorKind::KernelType, "KernelTypeError"},
      {ErrorCode::Privilege, ErrorKind::Privilege, "PrivilegeError"},
      {ErrorCode::Effect, ErrorKind::Effect, "EffectError"},
      {ErrorCode::Compile, ErrorKind::Compile, "CompileError"},
      {ErrorCode::DeviceUnavailable, ErrorKind::Device, "DeviceError"},
      {ErrorCode::Device, ErrorKind::Device, "DeviceError"},
      {ErrorCode::Collective, ErrorKind::Collective, "CollectiveError"},
      {ErrorCode::OutOfMemory, ErrorKind::OutOfMemory, "OutOfMemoryError"},
      {ErrorCode::ArgumentInvalid, ErrorKind::Argument, "ArgumentError"},
  };
  return cases;
}

TEST(ErrorCode, KindOfFollowsTheThousandsDigit) {
  for (const CodeCase& c : all_codes()) {
    SCOPED_TRACE(static_cast<unsigned>(c.code));
    EXPECT_EQ(kind_of(c.code), c.kind);
    EXPECT_EQ(kind_name(kind_of(c.code)), c.kind_name);
    EXPECT_EQ(Error(c.code, "m").kind(), c.kind);
  }
}

// raise() must throw exactly the subclass of the code's kind, so C++ callers
// (and the Python bindings, which map classes to exceptions) can catch it.
template <typename Expected>
void expect_raises(ErrorCode code) {
  SCOPED_TRACE(static_cast<unsigned>(code));
  try {
    raise(code, "boom");
    ADD_FAILURE() << "raise returned";
  } catch (const Error& error) {
    EXPECT_EQ(typeid(error), typeid(Expected)) << "threw " << typeid(error).name();
    EXPECT_EQ(error.code(), code);
    EXPECT_EQ(error.message(), "boom");
  }
}

TEST(ErrorRaise, ThrowsTheSubclassOfTheCodesKind) {
  expect_raises<Error>(ErrorCode::Internal);
  expect_raises<DtypeError>(ErrorCode::DtypeUnknown);
  expect_raises<DtypeError>(ErrorCode::DtypeNotStorage);
  expect_raises<DtypeError>(ErrorCode::DtypeUnsupported);
  expect_raises<ShapeError>(ErrorCode::ShapeMismatch);
  expect_raises<ParseError>(ErrorCode::ParseSyntax);
  expect_raises<ParseError>(ErrorCode::ParseUnknownModifier);
  expect_raises<ParseError>(ErrorCode::ParseDuplicateModifier);
  expect_raises<KernelTypeError>(ErrorCode::KernelType);
  expect_raises<PrivilegeError>(ErrorCode::Privilege);
  expect_raises<EffectError>(ErrorCode::Effect);
  expect_raises<CompileError>(ErrorCode::Compile);
  expect_raises<DeviceError>(ErrorCode::DeviceUnavailable);
  expect_raises<DeviceError>(ErrorCode::Device);
  expect_raises<CollectiveError>(ErrorCode::Collective);
  expect_raises<OutOfMemoryError>(ErrorCode::OutOfMemory);
  expect_raises<ArgumentError>(ErrorCode::ArgumentInvalid);
}

TEST(ErrorRaise, SubclassesAreCatchableAsTheirFamily) {
  EXPECT_THROW(raise(ErrorCode::DtypeUnknown, "x"), DtypeError);
  EXPECT_THROW(raise(ErrorCode::ParseSyntax, "x"), ParseError);
  EXPECT_THROW(raise(ErrorCode::ParseSyntax, "x"), std::runtime_error);
}

TEST(SourceLocation, LocateOnMultiLineText) {
  const std::string text = "first line\n  second @bad\n\nfourth";
  // 's' of "second": offset 13 -> line 2, column 3.
  SourceLocation loc = locate("a.tsr", text, 13);
  EXPECT_EQ(loc.file, "a.tsr");
  EXPECT_EQ(loc.line, 2);
  EXPECT_EQ(loc.column, 3);
  EXPECT_EQ(loc.line_text, "  second @bad");
  // '@': offset 20 -> line 2, column 10.
  loc = locate("a.tsr", text, text.find('@'), 4);
  EXPECT_EQ(loc.line, 2);
  EXPECT_EQ(loc.column, 10);
  EXPECT_EQ(loc.span, 4);
  // Start of text, first character of a line, an empty line, the last line.
  loc = locate("", text, 0);
  EXPECT_EQ(loc.line, 1);
  EXPECT_EQ(loc.column, 1);
  EXPECT_EQ(loc.line_text, "first line");
  loc = locate("", text, 11);
  EXPECT_EQ(loc.line, 2);
  EXPECT_EQ(loc.column, 1);
  loc = locate("", text, 25);
  EXPECT_EQ(loc.line, 3);
  EXPECT_EQ(loc.column, 1);
  EXPECT_EQ(loc.line_text, "");
  loc = locate("", text, text.find("fourth") + 2);
  EXPECT_EQ(loc.line, 4);
  EXPECT_EQ(loc.column, 3);
  EXPECT_EQ(loc.line_text, "fourth");
  // One past the end (an "unexpected end of text" error) stays on the last line.
  loc = locate("", text, text.size());
  EXPECT_EQ(loc.line, 4);
  EXPECT_EQ(loc.column, 7);
  // A newline character belongs to the line it ends.
  loc = locate("", text, 10);
  EXPECT_EQ(loc.line, 1);
  EXPECT_EQ(loc.column, 11);
}

TEST(SourceLocation, PrefixOmitsEmptyFile) {
  EXPECT_EQ(locate("f.tsr", "ab\ncd", 4).prefix(), "f.tsr:2:2");
  EXPECT_EQ(locate("", "ab\ncd", 4).prefix(), "2:2");
}

TEST(SourceLocation, InvalidWhenUnset) {
  EXPECT_FALSE(SourceLocation{}.valid());
  EXPECT_TRUE(locate("", "x", 0).valid());
}

TEST(ErrorWhat, HasLocationCodeMessageAndCaret) {
  const std::string text = "fp32\nfp8 @accum(bad) @x";
  const std::size_t at = text.find("bad");
  const Error error(ErrorCode::DtypeUnknown, "unknown dtype 'bad'", locate("p.tsr", text, at, 3));
  const std::string what = error.what();
  // Line 2, column 12 (1-based) of "fp8 @accum(bad) @x".
  EXPECT_EQ(what,
            "p.tsr:2:12: error[TE1001]: unknown dtype 'bad'\n"
            "  fp8 @accum(bad) @x\n"
            "             ^~~\n");
  // The caret sits under the 'b': same column in the line above it.
  const std::size_t source_line = what.find("  fp8");
  const std::size_t caret_line = what.find('^');
  ASSERT_NE(caret_line, std::string::npos);
  const std::size_t caret_column = caret_line - (what.rfind('\n', caret_line) + 1);
  EXPECT_EQ(what[source_line + caret_column], 'b');
}

TEST(ErrorWhat, WithoutLocationIsCodeAndMessage) {
  EXPECT_STREQ(Error(ErrorCode::ShapeMismatch, "shapes differ").what(), "error[TE2001]: shapes differ");
}

TEST(ErrorWhat, CaretKeepsTabsSoItLinesUp) {
  const std::string text = "\tx @oops";
  const Error error(ErrorCode::ParseSyntax, "m", locate("", text, 3));
  EXPECT_NE(std::string(error.what()).find("\n  \tx @oops\n  \t  ^\n"), std::string::npos) << error.what();
}

TEST(ClosestMatch, SuggestsPlausibleTypos) {
  const std::vector<std::string_view> dtypes{"fp64", "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "bfloat16"};
  EXPECT_EQ(closest_match("fp8", dtypes), "fp8_e4m3");       // a prefix
  EXPECT_EQ(closest_match("bflaot16", dtypes), "bfloat16");  // a transposition
  EXPECT_EQ(closest_match("fp33", dtypes), "fp32");          // one substitution
  EXPECT_EQ(closest_match("FP16", dtypes), "fp16");          // case-insensitive
  EXPECT_EQ(closest_match("garbage", dtypes), "");
  EXPECT_EQ(closest_match("zzzzzzzzzzzz", dtypes), "");
  EXPECT_EQ(closest_match("fp8", {}), "");
}

}  // namespace
}  // namespace tessera
