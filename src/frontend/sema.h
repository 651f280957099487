// Semantic analysis of kernels (private to src/frontend/).
//
// check_kernel()/analyze_kernel() resolve names, compute the type and
// uniformity of every expression, and reject what the language forbids:
// writes to parameters not marked mut, group-cooperative operations under
// lane-divergent control flow (docs/design/0003-tile-ir.md, rule 6), shared
// allocations beyond the budget, type and shape mismatches, and unknown names
// (with a "did you mean"). The lowering reads the recorded types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frontend/ast.h"
#include "tessera/frontend/kernel_language.h"
#include "tessera/ir/type.h"

namespace tessera::frontend {

// The type of a kernel-language value.
struct KType {
  enum class Kind : std::uint8_t { none, lane, tile, smem, gmem, dtype, namespace_ };
  Kind kind = Kind::none;
  DType dtype = DType::fp32;
  bool weak = false;                // lanes: a Python literal that takes the other operand's type
  std::vector<std::int64_t> sizes;  // tile / smem extents
  bool mut = false;                 // gmem
  bool swizzle_xor = false;         // smem
  std::string param;                // gmem: the parameter it is
  std::size_t rank = 0;             // gmem rank (smem/tile: sizes.size())

  static KType lane(DType d, bool is_weak = false) {
    KType t;
    t.kind = Kind::lane;
    t.dtype = d;
    t.weak = is_weak;
    return t;
  }
  static KType tile(DType d, std::vector<std::int64_t> extents) {
    KType t;
    t.kind = Kind::tile;
    t.dtype = d;
    t.sizes = std::move(extents);
    return t;
  }
  bool is_lane() const { return kind == Kind::lane; }
  bool is_buffer() const { return kind == Kind::smem || kind == Kind::gmem; }
  std::size_t buffer_rank() const { return kind == Kind::gmem ? rank : sizes.size(); }
  // Same kind, dtype, extents, mutability (weakness ignored).
  bool same(const KType& other) const;
  std::string str() const;  // "lane fp32", "tile [64, 64] fp32", "smem [128] fp16", ...
};

struct ExprInfo {
  KType type;
  bool uniform = true;
  DType op_dtype = DType::fp32;          // binary ops, comparisons, min/max: the dtype computed in
  std::string builtin;                   // the built-in a call or name resolved to ("tile.load_elem", ...)
  std::optional<std::int64_t> constant;  // integer value when known at compile time
};

struct Analysis {
  Constants constants;  // autotune defaults, then the given specialization
  std::unordered_map<const ast::Expr*, ExprInfo> exprs;
  // For each `if`: the variables first assigned in both branches, which are
  // visible after it, with their types (lowering starts each from a zero of
  // its type that both branches overwrite, so that tile.if has an init).
  std::unordered_map<const ast::Stmt*, std::vector<std::pair<std::string, KType>>> if_exports;

  const ExprInfo& info(const ast::Expr& e) const;
};

Analysis analyze_kernel(const KernelDecl& kernel, const Constants& constants);

// An integer constant expression's value (literals, names in `constants`,
// + - * // % and parentheses), or nullopt when it is not one or overflows.
std::optional<std::int64_t> fold_int(const ast::Expr& e, const Constants& constants);
// `a op b` for op in + - * // % (floor division, as Python), or nullopt on
// overflow, division by zero or another operator.
std::optional<std::int64_t> fold_int_op(const std::string& op, std::int64_t a, std::int64_t b);

// Names assigned anywhere in `body` (nested blocks and loop variables
// included), in order of first assignment.
std::vector<std::string> assigned_names(const ast::Body& body);

// A parameter dim with the specialization applied: fixed when every part is
// known (raising ShapeError when a quotient does not divide), else a symbol
// with the known parts substituted ("K/2").
ir::Dim specialize_dim(const DimSpec& dim, const Constants& constants, const SourceLocation& where);

// The dtype reduce_sum accumulates and returns for elements of `dtype`.
DType reduce_accum_dtype(DType dtype);
// The accumulator dtype tile.mma uses for operands of `dtype` when none is given.
DType default_mma_accum(DType dtype);
// Bytes a shared buffer occupies once aligned for planning (128-byte granules).
std::int64_t shared_alloc_bytes(DType dtype, const std::vector<std::int64_t>& sizes);

}  // namespace tessera::frontend
