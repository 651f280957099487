// Numerics policy text form: printing and a small recursive-descent parser.
#include "tessera/numerics/policy.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

#include "tessera/support/error.h"

namespace tessera {

DType default_accumulation(DType storage) {
  if (storage == DType::fp64) return DType::fp64;
  if (storage == DType::int64) return DType::int64;
  // Complex values accumulate part by part: fp32 parts for complex64, fp64
  // for complex128 (the accumulation type names the type of each part).
  if (is_complex(storage)) return complex_part(storage);
  if (!is_float(storage)) return DType::int32;
  return DType::fp32;
}

NumericsPolicy default_policy(DType storage) {
  NumericsPolicy policy;
  policy.storage = storage;
  policy.accum = default_accumulation(storage);
  return policy;
}

namespace {

std::string print_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  // Keep a decimal point so the number reads as a real, as in @loss_scale(2.0).
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

class PolicyParser {
 public:
  PolicyParser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  NumericsPolicy parse() {
    skip_space();
    const std::size_t storage_at = pos_;
    const std::string storage = identifier("a storage dtype");
    NumericsPolicy policy = default_policy(dtype_at(storage, storage_at));
    bool seen_accum = false, seen_rounding = false, seen_overflow = false;
    skip_space();
    while (pos_ < text_.size()) {
      expect('@');
      const std::size_t at = pos_;
      const std::string modifier = identifier("a modifier after '@'");
      if (modifier == "accum") {
        once(seen_accum, modifier, at, modifier.size());
        expect('(');
        skip_space();
        const std::size_t dtype_pos = pos_;
        policy.accum = dtype_at(identifier("an accumulation dtype"), dtype_pos);
        expect(')');
      } else if (modifier == "stochastic_round" || modifier == "toward_zero" || modifier == "nearest_even") {
        once(seen_rounding, "rounding", at, modifier.size());
        policy.rounding = modifier == "stochastic_round" ? Rounding::stochastic
                          : modifier == "toward_zero"    ? Rounding::toward_zero
                                                         : Rounding::nearest_even;
      } else if (modifier == "saturate" || modifier == "inf_nan") {
        once(seen_overflow, "overflow mode", at, modifier.size());
        policy.overflow = modifier == "saturate" ? Overflow::saturate : Overflow::inf_nan;
      } else if (modifier == "loss_scale") {
        if (policy.loss_scale) fail(ErrorCode::ParseDuplicateModifier, "loss_scale given twice", at, modifier.size());
        expect('(');
        policy.loss_scale = number();
        expect(')');
      } else {
        static const std::vector<std::string_view> known{"accum",    "stochastic_round", "toward_zero", "nearest_even",
                                                         "saturate", "inf_nan",          "loss_scale"};
        std::string message = "unknown policy modifier '@" + modifier + "'";
        const std::string hint = closest_match(modifier, known);
        // End the sentence either way (without a hint it used to run on into the list).
        message += hint.empty() ? std::string(".") : "; did you mean '@" + hint + "'?";
        message +=
            " Modifiers are @accum(dtype), @stochastic_round, @toward_zero, @nearest_even, "
            "@saturate, @inf_nan, @loss_scale(number)";
        fail(ErrorCode::ParseUnknownModifier, message, at, modifier.size());
      }
      skip_space();
    }
    return policy;
  }

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& message, std::size_t at, std::size_t span = 1) {
    raise(code, message, locate(file_, text_, at, static_cast<int>(span)));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) {
      const std::string found = pos_ >= text_.size() ? "end of text" : "'" + std::string(1, text_[pos_]) + "'";
      fail(ErrorCode::ParseSyntax, "expected '" + std::string(1, c) + "', found " + found, pos_);
    }
    ++pos_;
    skip_space();
  }

  std::string identifier(const char* what) {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) {
      const std::string found = pos_ >= text_.size() ? "end of text" : "'" + std::string(1, text_[pos_]) + "'";
      fail(ErrorCode::ParseSyntax, std::string("expected ") + what + ", found " + found, pos_);
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  DType dtype_at(const std::string& spelled, std::size_t at) {
    try {
      return parse_dtype(spelled);
    } catch (const DtypeError& error) {
      // Re-raise with the location of the name inside the policy text.
      raise(error.code(), error.message(), locate(file_, text_, at, static_cast<int>(spelled.size())));
    }
  }

  double number() {
    skip_space();
    const std::size_t start = pos_;
    double value = 0.0;
    const auto result = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
    if (result.ec != std::errc() || result.ptr == text_.data() + start) {
      fail(ErrorCode::ParseSyntax, "expected a number", start);
    }
    pos_ = static_cast<std::size_t>(result.ptr - text_.data());
    if (!(value > 0.0) || !std::isfinite(value)) {
      fail(ErrorCode::ParseSyntax, "loss scale must be a positive finite number", start, pos_ - start);
    }
    return value;
  }

  void once(bool& seen, const std::string& what, std::size_t at, std::size_t span) {
    if (seen) fail(ErrorCode::ParseDuplicateModifier, what + " given twice", at, span);
    seen = true;
  }

  std::string_view text_;
  std::string_view file_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string print_policy(const NumericsPolicy& policy) {
  std::string text = std::string(name(policy.storage)) + " @accum(" + std::string(name(policy.accum)) + ")";
  if (policy.rounding == Rounding::stochastic) text += " @stochastic_round";
  if (policy.rounding == Rounding::toward_zero) text += " @toward_zero";
  if (policy.overflow == Overflow::saturate) text += " @saturate";
  if (policy.loss_scale) text += " @loss_scale(" + print_number(*policy.loss_scale) + ")";
  return text;
}

NumericsPolicy parse_policy(std::string_view text, std::string_view file) {
  return PolicyParser(text, file).parse();
}

}  // namespace tessera
