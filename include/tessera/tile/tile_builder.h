// Helpers to build Tile IR with OpBuilder, including ops with regions.
//
//     ir::Module m;
//     ir::Operation* k = tile::build_kernel(m, "scale", {{"x", Type::gmem({Dim::named("n")}, f32)},
//                                                         {"y", Type::gmem({Dim::named("n")}, f32, true)}},
//                                           {.group_shape = std::vector<std::int64_t>{128}});
//     ir::OpBuilder b(ir::function_body(*k));
//     ir::Value* i = tile::build(b, "tile.linear_id", {});
//     auto sums = tile::build_for(b, lo, hi, step, {acc0},
//         [&](ir::OpBuilder& body, std::span<ir::Value* const> args) {   // args = (iv, acc)
//           return std::vector<ir::Value*>{tile::build(body, "tile.add", {args[1], one})};
//         });
//     tile::finish_kernel(*k);
//
// Body callbacks receive a builder positioned in the new block and that
// block's arguments, and return the values the region's terminator passes on
// (tile.yield, or for a while's before region the condition followed by the
// values: tile.condition). Nothing is verified here; call ir::verify.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"

namespace tessera::tile {

struct KernelOptions {
  std::optional<std::vector<std::int64_t>> group_shape;  // absent: one tile per group
  std::optional<std::int64_t> shared_bytes;              // absent: the backend's default
  std::optional<std::int64_t> resident_groups;           // absent: the backend's choice (see builtin func)
  std::string source;                                    // "file:line" of the definition, or empty
};

// Adds a kernel function (attribute kernel = true) with the given parameters
// (gmem buffers or lane scalars) to `module`; returns the func op.
ir::Operation* build_kernel(ir::Module& module, std::string name,
                            const std::vector<std::pair<std::string, ir::Type>>& params,
                            const KernelOptions& options = {}, SourceLocation location = {});
// Appends the operand-less `return` ending a kernel body (if it has none yet).
void finish_kernel(ir::Operation& kernel);

// Creates a single-result op and returns its result.
ir::Value* build(ir::OpBuilder& b, std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs = {},
                 SourceLocation location = {});
// Constants: a float of `policy`, an integer of `dtype`, a bool.
ir::Value* build_real(ir::OpBuilder& b, double value, NumericsPolicy policy);
ir::Value* build_int(ir::OpBuilder& b, std::int64_t value, DType dtype = DType::int64);
ir::Value* build_bool(ir::OpBuilder& b, bool value);

using BodyFn = std::function<std::vector<ir::Value*>(ir::OpBuilder& body, std::span<ir::Value* const> args)>;

// tile.for: the body's arguments are (iv, iter...); it returns the next iter
// values. `prefetch` sets the pipelining depth. Returns the op; its results
// are the final iter values. `arg_names` name the block arguments (optional).
ir::Operation* build_for(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, ir::Value* step, std::vector<ir::Value*> inits,
                         const BodyFn& body, std::optional<std::int64_t> prefetch = std::nullopt,
                         std::vector<std::string> arg_names = {}, SourceLocation location = {});
// tile.strands: `count` interleaved accumulations over [lo, hi); the body's
// arguments are (i, acc...) and it returns the next acc values. The op's
// results are the strands' final values, strand-major.
ir::Operation* build_strands(ir::OpBuilder& b, ir::Value* lo, ir::Value* hi, std::int64_t count,
                             std::vector<ir::Value*> inits, const BodyFn& body, SourceLocation location = {});
// tile.if: both branches receive the inits as block arguments and return
// values of the inits' types.
ir::Operation* build_if(ir::OpBuilder& b, ir::Value* cond, std::vector<ir::Value*> inits, const BodyFn& then_body,
                        const BodyFn& else_body, SourceLocation location = {});
// tile.while: `before` receives the loop values and returns {cond, values...};
// `after` receives those values and returns the next loop values.
ir::Operation* build_while(ir::OpBuilder& b, std::vector<ir::Value*> inits, const BodyFn& before, const BodyFn& after,
                           SourceLocation location = {});

// Adds a region of one block to `op` with arguments of `arg_types`, runs
// `body` in it and ends it with `terminator` (tile.yield or tile.condition).
// build_for/if/while use it; it is public for passes that rebuild ops.
void build_region(ir::Operation& op, const std::vector<ir::Type>& arg_types, const BodyFn& body,
                  std::string_view terminator, const std::vector<std::string>& arg_names = {},
                  SourceLocation location = {});

}  // namespace tessera::tile
