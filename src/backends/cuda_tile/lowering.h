// The Tessera Tile IR -> CUDA Tile IR lowering, shared by its three files:
//   lower.cpp        the entry, buffers, group-level tiles (views, mma, loops)
//   lower_lanes.cpp  lane-level code vectorized into tiles of the group's lanes
//   lower_math.cpp   Tessera's elementary functions (exp, log, tanh, ldexp, ...) as ops
//   lower_staged.cpp shared buffers accessed as whole tiles, lowered as tile values
//   lower_tile_math.cpp tile arithmetic (tile_binary, tile_reduce, ...) on whole tiles
//
// Lane values. A kernel with a group shape of G lanes runs as one tile block
// per group; a lane value that differs between lanes is a 1-D tile of P
// elements (P = G rounded up to a power of two, the target's tile extents;
// lanes G..P-1 are masked off), a value equal in every lane a rank-0 tile.
// Control flow that differs between lanes (tile.if on a per-lane condition)
// runs both branches under a mask and selects the results; loads and stores
// are masked by it. Loops need bounds equal in every lane.
//
// Memory order. The target orders memory operations only through tokens, not
// program order, so the lowering threads two: the token of the last store
// (loads and stores take it: a load sees earlier stores) and a join of the
// loads since (the next store takes it too: it does not overtake a read).
// Loops and ifs that touch memory carry both. Loads of a read-only buffer (a
// parameter that is not `mut`: nothing in the kernel writes it) take no
// token and join none: they commute with every store, and a loop of such
// loads (a GEMM's K loop) carries no token that waits for them. A read-only
// parameter may share memory with a mut one only where each element's store
// depends on the load of that element (the executable's in-place
// elementwise kernels); kernels launched by hand must not alias them.
//
// Shared buffers. Those the kernel writes and reads only as whole tiles are
// tile values (lower_staged.cpp says when): tileiras stages their loads
// itself. Every other tshared.alloc gets a hidden pointer parameter to grid-many
// copies in global memory (the launch allocates them, stream-ordered); tile
// block g uses copy g. (The target's alloca takes memory from the device
// malloc heap, and failed with illegal addresses once ~1000 blocks were
// resident.) The group's lanes are one tile thread here, so memory the PTX
// path shares between threads is this thread's, and barriers order nothing
// the tokens do not already.
//
// Faults. What the CPU backend reports at run time (an element index out of
// its buffer's range, an integer division by zero, a failed check_range) is
// detected per lane; the first lane to see one writes the fault's number
// (1-based index into LoweredKernel::faults) to the kernel's hidden last
// parameter, a device int32, and the access is skipped (a load reads 0).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessera/backends/cuda_tile/bytecode.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/tile/uniformity.h"

namespace tessera::cuda_tile::detail {

[[noreturn]] void cannot(const ir::Operation& op, const std::string& why);
std::optional<Elem> elem_of(DType d);

// Whether some op of `block`, nested regions included, satisfies `pred`.
template <class Pred>
bool any_op(const ir::Block& block, const Pred& pred) {
  for (const auto& op : block.ops()) {
    if (pred(*op)) return true;
    for (std::size_t r = 0; r < op->num_regions(); ++r) {
      for (std::size_t b = 0; b < op->region(r).num_blocks(); ++b) {
        if (any_op(op->region(r).block(b), pred)) return true;
      }
    }
  }
  return false;
}
// Every op of `block` in program order, nested regions included.
template <class Fn>
void for_each_op(const ir::Block& block, const Fn& fn) {
  any_op(block, [&](const ir::Operation& op) {
    fn(op);
    return false;
  });
}
bool uses_op(const ir::Block& block, std::string_view name);

class Lowering {
 public:
  Lowering(const ir::Operation& func, const LowerOptions& options);
  LoweredKernel run();

 private:
  struct Buffer {
    Value ptr;
    std::vector<Value> dims;
    // Partition views of the whole buffer, by tile shape (plan_aligned_views).
    std::map<std::vector<std::int64_t>, Value> aligned;
  };
  // The memory-order state (see the header comment).
  struct Tokens {
    Value stored;               // the last store's token
    std::vector<Value> loaded;  // loads since that store
  };

  // ---- lower.cpp: entry, group-level tiles ----
  bool multiple_of(const ir::Value* v, std::int64_t d, int depth = 0) const;
  bool aligned_offsets(const ir::Operation& op, std::size_t first, std::size_t count,
                       const std::vector<std::int64_t>& shape) const;
  void plan_aligned_views(const ir::Block& block);
  std::optional<std::pair<Value, std::vector<Value>>> aligned_access(const ir::Operation& op, const Buffer& buf,
                                                                     std::size_t first, std::size_t count,
                                                                     const std::vector<std::int64_t>& shape);
  Elem elem(DType d, const ir::Operation& op);
  Value get(const ir::Value* v, const ir::Operation& op);
  TypeRef scalar(Elem e) { return m_.tile(e, {}); }
  Value i64(std::int64_t v) { return b_->constant_int(scalar(Elem::i64), v); }
  void require_nearest(const ir::Operation& op, const NumericsPolicy& p);
  Value floordiv(Value a, Value b);
  Value saturating(std::string_view kind, Value a, Value b);
  Value tile_view(const ir::Operation& op, const Buffer& buf, const std::vector<Value>& offs,
                  const std::vector<std::int64_t>& shape, Elem e, bool at_origin = false);
  std::vector<std::int64_t> fixed_shape(const ir::Operation& op, const ir::Shape& s);
  const Buffer& gmem(const ir::Operation& op, const ir::Value* v);
  std::vector<Value> index_zeros(std::size_t rank);
  void lower_op(const ir::Operation& op);
  void lower_block(const ir::Block& block);
  void lower_for(const ir::Operation& op);
  void lower_masked_for(const ir::Operation& op, Value lo, Value hi, Value step);

  // ---- lower_lanes.cpp: lane-level code ----
  void begin_lanes(const ir::Block& body);
  void begin_lane_ids(const ir::Block& body);
  bool lower_lane_op(const ir::Operation& op);  // false: not a lane op
  bool varying(Value v) const { return !m_.shape_of(v.type).empty(); }
  TypeRef lane_type(Elem e, bool vary) { return vary ? m_.tile(e, {lanes_}) : scalar(e); }
  Value splat(Value scalar_tile, const std::vector<std::int64_t>& shape);  // any element, pointers too
  Value widen(Value v);  // a rank-0 lane value as a tile of the P lanes
  void match(Value& a, Value& b);
  Value constant_like(Value like, double v);  // a constant of like's type
  Value int_like(Value like, std::int64_t v);
  Value all_of(std::optional<Value> a, std::optional<Value> b);  // nullopt = true
  Value logical_not(Value x);
  void lower_lane_binary(const ir::Operation& op, std::string_view kind);
  Value float_binary(const ir::Operation& op, std::string_view kind, Value a, Value b);
  Value int_division(const ir::Operation& op, std::string_view kind, Value a, Value b);
  Value lane_cast(const ir::Operation& op, Value x, const NumericsPolicy& from, const NumericsPolicy& to);
  Value float_to_int(const ir::Operation& op, Value x, Elem to, Rounding r);
  Value lane_unary(const ir::Operation& op, std::string_view kind, Value x);
  // The element pointer, the active lanes that may touch it, for load_elem /
  // store_elem with indices from operand `first` on; faults lanes out of range.
  const Buffer& element_buffer(const ir::Operation& op, const ir::Value* v);  // gmem or smem
  std::pair<Value, std::optional<Value>> element_address(const ir::Operation& op, std::size_t first,
                                                         std::size_t count);
  void lower_smem_alloc(const ir::Operation& op);
  std::int64_t shared_copy_bytes(const ir::Operation& alloc);
  std::pair<Value, Value> box_pointers(const ir::Operation& op, const Buffer& buf,
                                       const std::vector<Value>& offs, const std::vector<std::int64_t>& shape);
  void lower_smem_tile_access(const ir::Operation& op);
  void lower_cp_async(const ir::Operation& op);
  void lower_reduce_sum(const ir::Operation& op);
  std::vector<Value> index_i64_zeros(std::size_t rank);
  void lower_load_elem(const ir::Operation& op);
  void lower_store_elem(const ir::Operation& op);
  void lower_if(const ir::Operation& op);
  void lower_strands(const ir::Operation& op);
  Value most_over_lanes(Value counts);
  void fault_if(Value condition, const std::string& message, ErrorCode code = ErrorCode::ArgumentInvalid);
  std::string where(const ir::Operation& op) const;
  // Whether `block` (nested regions included) loads or stores memory.
  // (loads of read-only buffers do not count: they are unordered)
  bool touches_memory(const ir::Block& block) const;
  // Whether `buffer` is a parameter the kernel cannot write (not `mut`): its
  // loads need no ordering.
  bool read_only(const ir::Value* buffer) const;
  // Tokens as loop-carried values: collapse the loads into one token.
  std::vector<Value> token_values();
  void set_tokens(Value stored, Value loaded);
  Value load_token();
  Value store_token();
  void after_load(Value token);
  void after_store(Value token);
  // The type (shape) a merge of lanes takes: the result or block argument's
  // uniformity decides, then each incoming value is widened to it.
  TypeRef merged_type(const ir::Value* v, const ir::Operation& op);
  Value to_type(Value v, TypeRef t, const ir::Operation& op);

  // ---- lower_tile_math.cpp: tile arithmetic ----
  bool lower_tile_math(const ir::Operation& op);  // false: not a tile arithmetic op
  // A fast exp of (x c - m), c a constant: exp2 of one fma (see the .cpp); none: another form.
  std::optional<Value> scaled_exp2(const ir::Operation& exp, TypeRef type, const std::vector<std::int64_t>& shape);

  // ---- lower_staged.cpp: shared buffers as tile values ----
  void plan_staged(const ir::Block& body);  // fills staged_
  bool is_staged_access(const ir::Operation& op) const;
  void lower_staged(const ir::Operation& op);
  Value staged_value(const ir::Operation& op, const ir::Value* buffer);
  // The staged buffers defined outside `loop` that its body writes: the loop carries their values.
  std::vector<const ir::Value*> staged_written_in(const ir::Operation& loop);
  static bool inside(const ir::Value* v, const ir::Operation& op);
  // The optimization hints of a view load here (the enclosing prefetch loop's latency).
  ViewHints view_hints() const;

  // ---- lower_math.cpp: Tessera's elementary functions ----
  Value pow2_f64(Value k);                // 2^k, k in [-1022, 1023] (i64 tile) -> f64 tile
  std::array<Value, 3> reduce_ln2(Value xc);  // k, r, r_lo
  Value integral_to_i64(Value k);
  Value exp_f64(Value x);                 // tessera::elementary::exp
  Value expm1_clamped(Value xc);
  Value log_f64(Value x);                 // tessera::elementary::log
  Value tanh_f64(Value x);                // tessera::elementary::tanh
  Value exp_f32_or_nan(Value x);          // tessera::elementary::exp_f32_or_nan
  Value expm1_tail(Value r);              // e^r - 1 - r
  Value inverse_factorial_series(Value r, int lo, int hi);
  Value ldexp(Value x, Value e);          // x * 2^e, one rounding (f32 or f64)
  Value frexp_exponent(Value x);          // f64 or f32 -> i64
  Value f64(double v, Value like);        // an f64 constant shaped like `like`

  const ir::Operation& func_;
  LowerOptions options_;
  Module m_;
  Body* b_ = nullptr;
  std::map<const ir::Value*, Value> values_;
  std::map<const ir::Value*, Buffer> buffers_;
  std::map<std::string, Value> symbols_;
  std::vector<KernelFault> faults_;
  // Per shared buffer (tshared.alloc op): its hidden pointer parameter and
  // the bytes of one group's copy; shared_bytes_ in parameter order.
  struct SharedBuffer {
    Value base;
    std::int64_t bytes = 0;
  };
  std::map<const ir::Operation*, SharedBuffer> shared_;
  std::vector<std::int64_t> shared_bytes_;
  std::optional<Value> fault_ptr_;
  // Staged shared buffers (every smem value of their families) and, while
  // lowering, the tile each name holds.
  std::set<const ir::Value*> staged_;
  std::map<const ir::Value*, Value> contents_;
  // The latency hint of the innermost tile.range(prefetch=) loop being lowered.
  std::optional<int> latency_;
  // Lane state. Flat kernels (no group shape, no group-level ops) put
  // kFlatLanes tiles in a tile block: tile index = block * P + lane, the
  // count of tiles (`tiles`, a hidden parameter) masking the last block.
  static constexpr std::int64_t kFlatLanes = 1024;
  bool flat_ = false;
  std::optional<Value> flat_tiles_;
  std::optional<tile::UniformityAnalysis> uniformity_;
  std::int64_t group_lanes_ = 1;     // G
  std::int64_t lanes_ = 1;           // P
  std::optional<Value> lane_ids_;    // i64 [P]: 0 .. P-1
  std::optional<Value> mask_;        // the lanes running the current op; nullopt = all
  std::optional<Tokens> tokens_;     // absent: the kernel touches no memory through pointers
};

}  // namespace tessera::cuda_tile::detail
