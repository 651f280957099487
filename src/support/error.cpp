// Error formatting, locations and typo suggestions.
#include "tessera/support/error.h"

#include <algorithm>
#include <cstdio>

namespace tessera {

ErrorKind kind_of(ErrorCode code) {
  switch (static_cast<unsigned>(code) / 1000) {
    case 1: return ErrorKind::Dtype;
    case 2: return ErrorKind::Shape;
    case 3: return ErrorKind::Parse;
    case 4: return ErrorKind::KernelType;
    case 5: return ErrorKind::Privilege;
    case 6: return ErrorKind::Effect;
    case 7: return ErrorKind::Compile;
    case 8: return ErrorKind::Device;
    case 9: return ErrorKind::Collective;
    case 10: return ErrorKind::OutOfMemory;
    case 11: return ErrorKind::Argument;
    default: return ErrorKind::Internal;
  }
}

std::string_view kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Internal: return "TesseraError";
    case ErrorKind::Dtype: return "DtypeError";
    case ErrorKind::Shape: return "ShapeError";
    case ErrorKind::Parse: return "ParseError";
    case ErrorKind::KernelType: return "KernelTypeError";
    case ErrorKind::Privilege: return "PrivilegeError";
    case ErrorKind::Effect: return "EffectError";
    case ErrorKind::Compile: return "CompileError";
    case ErrorKind::Device: return "DeviceError";
    case ErrorKind::Collective: return "CollectiveError";
    case ErrorKind::OutOfMemory: return "OutOfMemoryError";
    case ErrorKind::Argument: return "ArgumentError";
  }
  return "TesseraError";
}

std::string SourceLocation::prefix() const {
  std::string out = file.empty() ? std::string() : file + ":";
  return out + std::to_string(line) + ":" + std::to_string(column);
}

std::string SourceLocation::caret_lines() const {
  std::string out = "  " + line_text + "\n  ";
  // Keep tabs in the padding so the caret lines up under tabbed source.
  for (int i = 0; i + 1 < column && i < static_cast<int>(line_text.size()); ++i) {
    out += line_text[static_cast<std::size_t>(i)] == '\t' ? '\t' : ' ';
  }
  out += '^';
  for (int i = 1; i < span; ++i) out += '~';
  return out + "\n";
}

SourceLocation locate(std::string_view file, std::string_view text, std::size_t offset, int span) {
  offset = std::min(offset, text.size());
  SourceLocation loc;
  loc.file = std::string(file);
  std::size_t line_start = text.rfind('\n', offset == 0 ? std::string_view::npos : offset - 1);
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  if (offset == 0) line_start = 0;
  std::size_t line_end = text.find('\n', offset);
  if (line_end == std::string_view::npos) line_end = text.size();
  loc.line =
      1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(line_start), '\n'));
  loc.column = 1 + static_cast<int>(offset - line_start);
  loc.line_text = std::string(text.substr(line_start, line_end - line_start));
  loc.span = std::max(1, span);
  return loc;
}

namespace {
std::string format_error(ErrorCode code, const std::string& message, const SourceLocation& where) {
  char code_text[16];
  std::snprintf(code_text, sizeof code_text, "TE%04u", static_cast<unsigned>(code));
  std::string out;
  if (where.valid()) out.append(where.prefix()).append(": ");
  out.append("error[").append(code_text).append("]: ").append(message);
  if (where.valid() && !where.line_text.empty()) out.append("\n").append(where.caret_lines());
  return out;
}
}  // namespace

Error::Error(ErrorCode code, std::string message, SourceLocation where)
    : std::runtime_error(format_error(code, message, where)),
      code_(code),
      message_(std::move(message)),
      where_(std::move(where)) {}

std::string Error::code_string() const {
  char text[16];
  std::snprintf(text, sizeof text, "TE%04u", static_cast<unsigned>(code_));
  return text;
}

std::string closest_match(std::string_view name, const std::vector<std::string_view>& candidates) {
  // Levenshtein distance, case-insensitive; accept at most a third of the name.
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  std::string_view best;
  std::size_t best_distance = std::max<std::size_t>(1, name.size() / 3) + 1;
  std::vector<std::size_t> row;
  for (std::string_view candidate : candidates) {
    row.resize(candidate.size() + 1);
    for (std::size_t j = 0; j <= candidate.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= name.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= candidate.size(); ++j) {
        std::size_t above = row[j];
        std::size_t substitute = diagonal + (lower(name[i - 1]) == lower(candidate[j - 1]) ? 0 : 1);
        row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
        diagonal = above;
      }
    }
    // A name that is a prefix of a candidate ("fp8" -> "fp8_e4m3") is a hint too.
    std::size_t distance = row[candidate.size()];
    if (candidate.substr(0, name.size()) == name && !name.empty()) distance = std::min<std::size_t>(distance, 1);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return std::string(best);
}

}  // namespace tessera

namespace tessera {
void raise(ErrorCode code, std::string message, SourceLocation where) {
  switch (kind_of(code)) {
    case ErrorKind::Dtype: throw DtypeError(code, std::move(message), std::move(where));
    case ErrorKind::Shape: throw ShapeError(code, std::move(message), std::move(where));
    case ErrorKind::Parse: throw ParseError(code, std::move(message), std::move(where));
    case ErrorKind::KernelType: throw KernelTypeError(code, std::move(message), std::move(where));
    case ErrorKind::Privilege: throw PrivilegeError(code, std::move(message), std::move(where));
    case ErrorKind::Effect: throw EffectError(code, std::move(message), std::move(where));
    case ErrorKind::Compile: throw CompileError(code, std::move(message), std::move(where));
    case ErrorKind::Device: throw DeviceError(code, std::move(message), std::move(where));
    case ErrorKind::Collective: throw CollectiveError(code, std::move(message), std::move(where));
    case ErrorKind::OutOfMemory: throw OutOfMemoryError(code, std::move(message), std::move(where));
    case ErrorKind::Argument: throw ArgumentError(code, std::move(message), std::move(where));
    case ErrorKind::Internal: break;
  }
  throw Error(code, std::move(message), std::move(where));
}
std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

}  // namespace tessera
