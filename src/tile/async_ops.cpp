// Tile IR async copies, barriers and lane shuffles (group-cooperative;
// docs/design/0003-tile-ir.md).
//
// Each tile.cp_async is one copy group, in flight until a tile.cp_async_wait
// lets at most `pending` of the most recent groups stay in flight; a barrier
// then makes the copied data visible to every tile of the group. An async
// tile.mma (tile-pipeline) reads its shared operands until a tile.mma_wait
// retires it, the same way.
#include <string>

#include "tessera/support/error.h"
#include "tile/tile_support.h"

namespace tessera::tile {

using ir::AttrKind;
using ir::AttrMap;
using ir::OpDef;
using ir::Type;

namespace {

// The waits' inference: no results, `pending` >= 0.
std::vector<Type> no_results_pending_checked(const char* op, const AttrMap& a) {
  if (a.get_int("pending") < 0) {
    raise(ErrorCode::ArgumentInvalid,
          std::string(op) + " attribute 'pending' must be >= 0, got " + std::to_string(a.get_int("pending")));
  }
  return {};
}

}  // namespace

void register_async_ops(ir::Registry& r) {
  r.add(OpDef{
      .name = "tile.cp_async",
      .summary = "Starts copying the box of gmem `src` at the given offsets, with dst's shape, into smem `dst` "
                 "(zeros past the source's bounds).",
      .operands = {"dst", "src", "offsets"},
      .variadic = true,
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer =
          [](std::span<const Type> in, const AttrMap&) {
            require_kind(in[0], ir::TypeKind::smem, "tile.cp_async", "dst");
            require_kind(in[1], ir::TypeKind::gmem, "tile.cp_async", "src");
            const Type& dst = in[0];
            const Type& src = in[1];
            if (dst.rank() != src.rank()) {
              raise(ErrorCode::ShapeMismatch, "tile.cp_async copies between buffers of different rank: dst " +
                                                  ir::print_type(dst) + ", src " + ir::print_type(src));
            }
            if (dst.dtype() != src.dtype()) {
              raise(ErrorCode::DtypeUnsupported, "tile.cp_async copies " + ir::print_type(src) + " into " +
                                                     ir::print_type(dst) + "; the dtypes must match");
            }
            std::size_t offsets = in.size() - 2;
            if (offsets != src.rank()) {
              raise(ErrorCode::ShapeMismatch, "tile.cp_async from a rank-" + std::to_string(src.rank()) +
                                                  " source takes " + std::to_string(src.rank()) + " offset(s), got " +
                                                  std::to_string(offsets));
            }
            for (std::size_t i = 0; i < offsets; ++i) {
              require_index(in[2 + i], "tile.cp_async", "offset #" + std::to_string(i));
            }
            return std::vector<Type>{};
          },
  });
  r.add(OpDef{
      .name = "tile.cp_async_wait",
      .summary = "Waits until at most `pending` of the group's most recent copy groups are still in flight.",
      .attrs = {{.name = "pending", .kind = AttrKind::integer, .default_value = ir::Attribute(std::int64_t{0})}},
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer = [](std::span<const Type>,
                  const AttrMap& a) { return no_results_pending_checked("tile.cp_async_wait", a); },
  });
  r.add(OpDef{
      .name = "tile.mma_wait",
      .summary = "Waits until at most `pending` of the group's most recent async tile.mma ops are still in flight; "
                 "a barrier after it frees their shared operands for every tile.",
      .attrs = {{.name = "pending", .kind = AttrKind::integer, .default_value = ir::Attribute(std::int64_t{0})}},
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer = [](std::span<const Type>, const AttrMap& a) { return no_results_pending_checked("tile.mma_wait", a); },
  });
  // A lane exchange within a group: what a warp shuffle does on CUDA, so a
  // tree over up to 32 lanes needs no shared memory and no barrier
  // (docs/design/0035). Group-cooperative: every lane runs it, under
  // uniform control flow (tile-verify-sync checks that).
  r.add(OpDef{
      .name = "tile.lane_shuffle",
      .summary = "Lane t of the group gets `value` of lane t xor `xor` (linear ids). `xor` is a power of two below 32 "
                 "(lanes of one warp on CUDA); the group's size must be a multiple of 2 xor.",
      .operands = {"value"},
      .attrs = {{.name = "xor", .kind = AttrKind::integer, .required = true}},
      .effect = ir::Effect::state,
      .num_results = 1,
      .infer =
          [](std::span<const Type> in, const AttrMap& a) {
            require_kind(in[0], ir::TypeKind::lane, "tile.lane_shuffle", "value");
            const std::int64_t x = a.get_int("xor");
            if (x < 1 || x >= 32 || (x & (x - 1)) != 0) {
              raise(ErrorCode::ArgumentInvalid,
                    "tile.lane_shuffle attribute 'xor' must be a power of two from 1 to 16, got " + std::to_string(x));
            }
            return std::vector<Type>{in[0]};
          },
  });
  r.add(OpDef{
      .name = "tile.barrier",
      .summary = "Waits for every tile of the group; shared and global writes before it are visible after it.",
      .effect = ir::Effect::state,
      .num_results = 0,
      .infer = [](std::span<const Type>, const AttrMap&) { return std::vector<Type>{}; },
  });
}

}  // namespace tessera::tile
