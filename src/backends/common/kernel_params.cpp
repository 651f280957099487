// Kernel signature checks shared by the C-family backends
// (backends/common/kernel_params.h).
#include "backends/common/kernel_params.h"

#include <cctype>

#include "tessera/support/error.h"

namespace tessera::codegen {

void check_kernel_param(const ir::Type& t, const std::string& param, const std::string& kernel,
                        std::string_view backend) {
  if (!t.is_gmem() && !t.is_lane()) {
    raise(ErrorCode::Compile, "kernel '" + kernel + "' parameter '" + param +
                                  "' must be a gmem buffer or a lane scalar, got " + ir::print_type(t));
  }
  if (!t.is_gmem()) return;
  const std::string prefix = std::string(backend) + ": parameter '" + param + "'";
  if (bit_width(t.dtype()) < 8) {
    raise(ErrorCode::Compile, prefix + " of kernel '" + kernel + "' is " + ir::print_type(t) +
                                  "; packed sub-byte buffers are not supported as kernel parameters yet, "
                                  "pass an 8-bit format (int8, fp8_e4m3) instead");
  }
  if (t.rank() < 1 || t.rank() > 8) {
    raise(ErrorCode::Compile,
          prefix + " has rank " + std::to_string(t.rank()) + "; buffers of rank 1 to 8 are supported");
  }
}

std::vector<std::string> dim_symbols(const ir::Dim& d) {
  std::vector<std::string> out;
  if (!d.is_symbolic()) return out;
  std::string tok;
  auto flush = [&] {
    if (!tok.empty() && std::isdigit(static_cast<unsigned char>(tok[0])) == 0) out.push_back(tok);
    tok.clear();
  };
  for (char c : d.symbol) {
    if (c == '/' || c == '*' || c == ' ') {
      flush();
    } else {
      tok += c;
    }
  }
  flush();
  return out;
}

std::string c_identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  return r;
}

}  // namespace tessera::codegen
