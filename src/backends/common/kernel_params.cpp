// Kernel signature checks shared by the C-family backends
// (backends/common/kernel_params.h).
#include "backends/common/kernel_params.h"

#include <cctype>

#include "backends/common/index_bounds.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::codegen {

KernelHeader read_kernel_header(const ir::Operation& func, std::string_view backend) {
  if (!tile::is_kernel(func)) {
    raise(ErrorCode::Compile, std::string(backend) + ": function '" + ir::function_name(func) +
                                  "' is not a kernel (attribute kernel = true is missing)");
  }
  ir::verify_function(func);
  KernelHeader h;
  h.name = ir::function_name(func);
  if (const ir::Attribute* gs = func.attrs().find("group_shape"); gs && ir::kind_of(*gs) == ir::AttrKind::int_list) {
    h.group_shape = std::get<std::vector<std::int64_t>>(*gs);
  }
  h.group_size = tile::group_tile_count(func);
  if (h.group_size < 1) raise(ErrorCode::Compile, "kernel '" + h.name + "' has an empty group shape");
  return h;
}

cpu::KernelParam describe_kernel_param(const ir::Value& arg, std::size_t index, const std::string& kernel,
                                       std::string_view backend, bool sub_byte_buffers) {
  cpu::KernelParam p;
  p.name = arg.name().empty() ? "arg" + std::to_string(index) : arg.name();
  p.type = arg.type();
  p.is_buffer = p.type.is_gmem();
  p.is_mut = p.type.is_gmem() && p.type.mut;
  check_kernel_param(p.type, p.name, kernel, backend, sub_byte_buffers);
  return p;
}

std::int64_t resolve_static_dim(const ir::Dim& d, const std::map<std::string, std::int64_t>& specialize,
                                const std::string& kernel, std::string_view backend) {
  if (!d.is_symbolic()) return d.size;
  if (auto it = specialize.find(d.symbol); it != specialize.end()) return it->second;
  raise(ErrorCode::Compile, std::string(backend) + ": dim '" + d.symbol + "' of a tile or shared buffer in kernel '" +
                                kernel + "' must be known at compile time; specialize it (k.jit(" + d.symbol +
                                "=...))");
}

void check_kernel_param(const ir::Type& t, const std::string& param, const std::string& kernel,
                        std::string_view backend, bool sub_byte_buffers) {
  if (!t.is_gmem() && !t.is_lane()) {
    raise(ErrorCode::Compile, "kernel '" + kernel + "' parameter '" + param +
                                  "' must be a gmem buffer or a lane scalar, got " + ir::print_type(t));
  }
  if (!t.is_gmem()) return;
  const std::string prefix = std::string(backend) + ": parameter '" + param + "'";
  if (is_packed(t.dtype()) && !sub_byte_buffers) {
    raise(ErrorCode::Compile, prefix + " of kernel '" + kernel + "' is " + ir::print_type(t) +
                                  "; this backend takes no packed sub-byte buffers yet, "
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

std::unordered_set<std::string> unbounded_symbols(const std::vector<cpu::KernelParam>& params,
                                                  const std::map<std::string, std::int64_t>& specialize) {
  std::unordered_set<std::string> out;
  for (const cpu::KernelParam& p : params)
    if (!p.is_buffer) out.insert(p.name);
  for (const auto& [name, value] : specialize)
    if (value < 0 || static_cast<std::uint64_t>(value) >= kIndexLimit) out.insert(name);
  return out;
}

std::string c_identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  return r;
}

}  // namespace tessera::codegen
