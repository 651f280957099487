// Tile IR structured control flow: tile.for, tile.if, tile.while and their
// terminators tile.yield and tile.condition (docs/design/0003-tile-ir.md).
//
// Every region holds one block. Values flow through block arguments and
// terminators, so the IR stays SSA and needs no phi nodes:
//   tile.for %lo, %hi, %step, %init...   body (%iv, %iter...) -> yield %next...
//   tile.if %cond, %init...              then (%init...) / else (%init...) -> yield
//   tile.while %init...                  before (%v...) -> condition %c, %v'...
//                                        after (%v'...) -> yield %v''...
//   tile.strands %lo, %hi, %init... {count = S}
//                                        body (%i, %acc...) -> yield %acc'...
//     S interleaved accumulations: index i in [lo, hi) updates strand
//     (i - lo) mod S, each strand in increasing i from the inits; the results
//     are the S strands' final values, strand-major (S x inits). The strands
//     are independent, so a backend may run them side by side (SIMD lanes);
//     the order inside each strand is fixed, so the results are too. The
//     body is lane code (no group-level op).
// The extra operands of tile.if are the values the branches start from (what
// a variable held before the `if`); they give the results their types, so an
// op's result types are always inferred from its operands. Results have the
// types of the inits in all three ops.
#include <algorithm>
#include <string>

#include "tessera/support/error.h"
#include "tessera/tile/tile_dialect.h"
#include "tile/tile_support.h"

namespace tessera::tile {
namespace {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

std::vector<Type> operand_types(const ir::Operation& op, std::size_t from) {
  std::vector<Type> out;
  for (std::size_t i = from; i < op.num_operands(); ++i) out.push_back(op.operand(i)->type());
  return out;
}

void verify_for(const ir::Operation& op) {
  require_regions(op, 1);
  if (const ir::Attribute* p = op.attrs().find("prefetch"); p && std::get<std::int64_t>(*p) < 1) {
    raise(ErrorCode::ArgumentInvalid,
          "attribute 'prefetch' must be >= 1, got " + std::to_string(std::get<std::int64_t>(*p)));
  }
  std::vector<Type> args{op.operand(0)->type()};
  std::vector<Type> iters = operand_types(op, 3);
  args.insert(args.end(), iters.begin(), iters.end());
  const ir::Block& body = op.region(0).block();
  require_block_args(body, args, "the body");
  require_terminator(body, "tile.yield", 0, iters, "the body");
}

// Lane code only: no group-level op and no tile value anywhere in the body.
void require_lane_code(const ir::Block& block, const ir::Operation& owner) {
  for (const auto& inner : block.ops()) {
    bool tile_value = false;
    for (std::size_t i = 0; i < inner->num_results(); ++i) tile_value |= inner->result(i)->type().is_tile();
    if (is_group_cooperative(*inner) || tile_value) {
      raise(ErrorCode::VerifyFailed, "'" + std::string(owner.name()) + "' holds lane code only; '" +
                                         std::string(inner->name()) + "' is a group-level op");
    }
    for (std::size_t r = 0; r < inner->num_regions(); ++r) require_lane_code(inner->region(r).block(), owner);
  }
}

void verify_strands(const ir::Operation& op) {
  require_regions(op, 1);
  const std::int64_t count = std::get<std::int64_t>(*op.attrs().find("count"));
  if (count < 1 || count > 64) raise(ErrorCode::ArgumentInvalid, "attribute 'count' must be in [1, 64], got " +
                                                                    std::to_string(count));
  std::vector<Type> iters = operand_types(op, 2);
  if (iters.empty()) raise(ErrorCode::VerifyFailed, "'tile.strands' needs at least one init");
  std::vector<Type> args{op.operand(0)->type()};
  args.insert(args.end(), iters.begin(), iters.end());
  const ir::Block& body = op.region(0).block();
  require_block_args(body, args, "the body");
  require_terminator(body, "tile.yield", 0, iters, "the body");
  require_lane_code(body, op);
}

void verify_if(const ir::Operation& op) {
  require_regions(op, 2);
  std::vector<Type> inits = operand_types(op, 1);
  const char* names[] = {"the then region", "the else region"};
  for (std::size_t r = 0; r < 2; ++r) {
    require_block_args(op.region(r).block(), inits, names[r]);
    require_terminator(op.region(r).block(), "tile.yield", 0, inits, names[r]);
  }
}

void verify_while(const ir::Operation& op) {
  require_regions(op, 2);
  std::vector<Type> inits = operand_types(op, 0);
  const ir::Block& before = op.region(0).block();
  const ir::Block& after = op.region(1).block();
  require_block_args(before, inits, "the before region");
  require_terminator(before, "tile.condition", 1, inits, "the before region");
  require_block_args(after, inits, "the after region");
  require_terminator(after, "tile.yield", 0, inits, "the after region");
}

// Terminators check their parent, so a stray yield is reported at the yield.
void verify_parent(const ir::Operation& op, bool condition) {
  const ir::Block* block = op.parent_block();
  const ir::Region* region = block ? block->parent_region() : nullptr;
  const ir::Operation* parent = region ? region->parent_op() : nullptr;
  std::string_view parent_name = parent ? parent->name() : std::string_view("func");
  if (condition) {
    if (parent_name != "tile.while" || parent->num_regions() < 1 || &parent->region(0) != region) {
      raise(ErrorCode::VerifyFailed, "'tile.condition' must end the before region of a 'tile.while' (it is in '" +
                                         std::string(parent_name) + "')");
    }
    return;
  }
  bool ok = parent_name == "tile.for" || parent_name == "tile.if" || parent_name == "tile.strands" ||
            (parent_name == "tile.while" && parent->num_regions() > 1 && &parent->region(1) == region);
  if (!ok) {
    raise(ErrorCode::VerifyFailed,
          "'tile.yield' must end a region of 'tile.for', 'tile.if', 'tile.strands' or the after region of 'tile.while' "
          "(it is in '" +
              std::string(parent_name) + "')");
  }
}

}  // namespace

void register_control_flow_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.for",
      .summary = "Loops iv from lo while iv < hi by step (> 0), carrying iter values; results are the final values.",
      .operands = {"lo", "hi", "step", "inits"},
      .variadic = true,
      .attrs = {{.name = "prefetch", .kind = AttrKind::integer, .doc = "pipeline depth for tile-pipeline"},
                {.name = "remark", .kind = AttrKind::string, .doc = "why tile-pipeline left the loop unchanged"}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_index(in[0], "tile.for", "lo");
            require_same(in[0], in[1], "tile.for", "lo and hi");
            require_same(in[0], in[2], "tile.for", "lo and step");
            return types_of(in, 3);
          },
      .verify = verify_for,
  });
  r.add(OpDef{
      .name = "tile.strands",
      .summary = "count interleaved accumulations over [lo, hi): index i updates strand (i - lo) mod count; "
                 "results are the strands' final values, strand-major.",
      .operands = {"lo", "hi", "inits"},
      .variadic = true,
      .attrs = {{.name = "count", .kind = AttrKind::integer, .required = true, .doc = "number of strands"}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap& attrs) {
            require_index(in[0], "tile.strands", "lo");
            require_same(in[0], in[1], "tile.strands", "lo and hi");
            const ir::Attribute* c = attrs.find("count");
            const std::int64_t count = c ? std::get<std::int64_t>(*c) : 1;
            std::vector<Type> out;
            for (std::int64_t s = 0; s < std::max<std::int64_t>(1, std::min<std::int64_t>(count, 64)); ++s) {
              std::vector<Type> one = types_of(in, 2);
              out.insert(out.end(), one.begin(), one.end());
            }
            return out;
          },
      .verify = verify_strands,
  });
  r.add(OpDef{
      .name = "tile.if",
      .summary = "Runs the then or else region by cond; both start from the inits and yield the results. The optional "
                 "`likely` says which way cond usually goes (a hint for the host compiler's block layout and "
                 "optimization; no effect on results).",
      .operands = {"cond", "inits"},
      .variadic = true,
      .attrs = {{.name = "likely", .kind = AttrKind::boolean, .required = false}},
      .effect = ir::Effect::state,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_bool_lane(in[0], "tile.if", "cond");
            return types_of(in, 1);
          },
      .verify = verify_if,
  });
  r.add(OpDef{
      .name = "tile.while",
      .summary = "Runs before (ending in tile.condition) and, while its condition holds, after (ending in tile.yield).",
      .operands = {"inits"},
      .variadic = true,
      .effect = ir::Effect::state,
      .infer = [](std::span<const Type> in, const AttrMap&) { return types_of(in, 0); },
      .verify = verify_while,
  });
  r.add(OpDef{
      .name = "tile.yield",
      .summary = "Ends a region of tile.for / tile.if / tile.while (after), passing its values on.",
      .operands = {"values"},
      .variadic = true,
      .num_results = 0,
      .is_terminator = true,
      .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
      .verify = [](const ir::Operation& op) { verify_parent(op, false); },
  });
  r.add(OpDef{
      .name = "tile.condition",
      .summary = "Ends the before region of tile.while: continue with the values while cond is true, else exit.",
      .operands = {"cond", "values"},
      .variadic = true,
      .num_results = 0,
      .is_terminator = true,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_bool_lane(in[0], "tile.condition", "cond");
            return std::vector<Type>{};
          },
      .verify = [](const ir::Operation& op) { verify_parent(op, true); },
  });
}

}  // namespace tessera::tile
