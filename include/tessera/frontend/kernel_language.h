// The kernel language front end: source text -> checked kernels -> Tile IR.
//
// Kernels are written either in `.tsr` files, in the specification's syntax
// (`@kernel tile[(128,)] shared(8_KiB)`, `x: f32[n]`, `y: mut f32[n]`), or as
// Python functions decorated with `@tessera.kernel` whose annotations are
// valid Python (`x: tessera.f32["n"]`, `y: tessera.mut(tessera.f32["n"])`).
// The same C++ parser reads both; docs/guide/kernel_language.md is the
// language reference and docs/design/0003-tile-ir.md the execution model.
//
// parse_kernels() parses and checks (types, mutability, divergence, shared
// budget, names); lower_kernel() emits one Tile IR kernel function for a
// specialization (compile-time constants such as {"BM": 128, "M": 4096}).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/numerics/dtype.h"
#include "tessera/support/error.h"

namespace tessera::ir {
class Module;
class Operation;
}  // namespace tessera::ir

namespace tessera::frontend {

namespace ast {
struct Kernel;
}

enum class SourceDialect : std::uint8_t {
  tsr,     // a .tsr file: the specification's syntax
  python,  // the text of a Python function (inspect.getsource)
};

// One dimension of a buffer parameter as written: a size, a symbol, or a
// symbol divided/multiplied by a symbol or size ("K/tp", "N*2").
struct DimSpec {
  std::string lhs;  // symbol, or empty when the dim is a plain size
  std::int64_t size = 0;
  char op = 0;             // 0, '/' or '*'
  std::string rhs_symbol;  // right operand when a symbol
  std::int64_t rhs_size = 0;

  bool is_fixed() const { return lhs.empty() && op == 0; }
  std::string str() const;  // "n", "128", "K/tp"
};

struct KernelParam {
  std::string name;
  bool is_buffer = false;  // a global buffer (has dims) rather than a scalar
  bool is_mut = false;     // buffers only: writable
  DType dtype = DType::fp32;
  std::vector<DimSpec> dims;
  SourceLocation location;
};

// Compile-time values for one specialization: shape symbols ("M") and
// autotune/jit names ("BM").
using Constants = std::map<std::string, std::int64_t, std::less<>>;

struct KernelDecl {
  std::string name;
  std::vector<KernelParam> params;
  // Tiles per group (1-D or 2-D, row-major); empty = one tile per group.
  std::vector<std::int64_t> group_shape;
  // The declared shared(...) budget in bytes; nullopt = the default.
  std::optional<std::int64_t> shared_bytes;
  // @kernel.autotune(space=dict(BM=[128, 256], ...)): each name with its
  // candidates in the order written. These names are the kernel's
  // compile-time parameters; unspecialized, a name takes its first candidate.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> autotune_space;
  // Plain shape symbols of the parameters, in order of first appearance
  // (those inside compound dims such as `tp` in `K/tp` included).
  std::vector<std::string> shape_symbols;
  // @kernel(target="cuda_tile"): the NVIDIA target of launches on cuda
  // tensors ("cuda" or "cuda_tile"); empty = "cuda".
  std::string target;
  SourceLocation location;  // the kernel's name in its `def`
  std::shared_ptr<const ast::Kernel> ast;

  std::int64_t group_size() const;
};

// The budget a kernel without shared(...) gets (docs/design/0003-tile-ir.md).
inline constexpr std::int64_t kDefaultSharedBytes = 48 * 1024;

// Parses every kernel in `source` and checks each one (with autotune names at
// their first candidate). `first_line` is the line number of the text's first
// line in `file` (Python passes the function's line). Errors: ParseError for
// syntax, KernelTypeError for semantic mistakes, DtypeError for unknown
// dtype names, each located with file:line:col and a caret line.
std::vector<KernelDecl> parse_kernels(std::string_view source, std::string_view file = "<kernel>", int first_line = 1,
                                      SourceDialect dialect = SourceDialect::tsr);

// Checks a kernel for a specialization (names in `constants` replace the
// autotune defaults and shape symbols). Raises like parse_kernels; an unknown
// constant name is an ArgumentError with a suggestion.
void check_kernel(const KernelDecl& kernel, const Constants& constants = {});

// Emits the kernel as a Tile IR `func` (attribute kernel = true) into
// `module` for the specialization `constants`, and returns it. Shape symbols
// not in `constants` become tile.symbol; autotune names not given take their
// first candidate. The function is named after the kernel; a module that
// already has that name gets a suffix (`_1`, ...).
ir::Operation& lower_kernel(ir::Module& module, const KernelDecl& kernel, const Constants& constants = {});

}  // namespace tessera::frontend
