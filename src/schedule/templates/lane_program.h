// Graph IR elementwise ops -> Tile IR lane ops, shared by every template that
// computes elementwise ops per lane (the elementwise template, and the
// producers and consumers fused into reduction and GEMM kernels).
//
// A LaneProgram lowers ops over one domain whose flat row-major index is the
// lane value `i`. Kernel inputs are read at their broadcast offset of `i`;
// values computed elsewhere (a reduction's result) are bound directly. Each
// op computes in fp64 from decoded operands like its reference kernel, rounds
// once to its accumulation type and encodes to its storage type, so results
// equal the reference executor's bit for bit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"
#include "tessera/numerics/policy.h"

namespace tessera::schedule::templates {

// Whether Graph IR op `op_name` has a lane lowering.
bool lane_op_covered(std::string_view op_name);

// Why a policy cannot be a kernel parameter or lane value (nullopt: it can).
// `stochastic`: results may round stochastically (the elementwise template
// draws the reference's bits for them; the other templates do not yet).
std::optional<std::string> unsupported_policy(const NumericsPolicy& p, bool stochastic = false);

// Why a template that reads complex buffers as their parts (fft.cpp,
// complex_parts.cpp) cannot take `root`'s operands and result (nullopt: it
// can): each must round to nearest even, and a real one be a kernel
// parameter (unsupported_policy).
std::optional<std::string> part_policies_unsupported(const ir::Operation& root);

// The buffer policy of a complex value's parts (fp32 for complex64, fp64
// for complex128; the accumulation type likewise).
NumericsPolicy part_buffer_policy(NumericsPolicy p);

// A buffer parameter's policy: stochastic rounding happens in the lane
// program (tile.round_stochastic), so a store only encodes a value that is
// already representable, and reads never round.
NumericsPolicy buffer_policy(NumericsPolicy p);

// Why the non-terminator ops of `body` (from `first` on) cannot all be
// lowered per lane (nullopt: they can). Inputs are only read, so their
// rounding does not matter.
std::optional<std::string> lane_ops_unsupported(const ir::Block& body, std::size_t first = 0, bool stochastic = false);

// Whether kernel input `input` is read only as graph.lookup's table: by
// code, never at an offset of the lane's element.
bool lookup_table(const ir::Value* input);
// Whether reading kernel input `input` over `domain` needs the domain's
// dims: it is read at its broadcast offset and its shape is not the domain.
bool broadcasts(const ir::Value* input, const ir::Shape& domain);

// One graph value inside a lane program: its storage-typed lane and its
// decoded fp64 (or bool) lane.
struct LaneValue {
  ir::Value* stored = nullptr;   // lane<P> (P = the value's policy)
  ir::Value* decoded = nullptr;  // lane<fp64>, or lane<bool> for bool values
};

class LaneProgram {
 public:
  // `dims`: the domain's dims as lane<int64> values; may be empty when no
  // bound input broadcasts.
  LaneProgram(ir::Shape domain, ir::Value* i, std::vector<ir::Value*> dims)
      : domain_(std::move(domain)), i_(i), dims_(std::move(dims)) {}

  // The domain multi-index of `i`, where the template has it (a GEMM tile's
  // row and column): broadcast operands are then addressed without dividing i.
  void set_index(std::vector<ir::Value*> index) { index_ = std::move(index); }

  // Input reads proven inside their buffers (a template that evaluates the
  // program only at elements that exist): loads marked in_bounds.
  void set_in_bounds(bool in_bounds) { in_bounds_ = in_bounds; }

  // `v` is read from gmem `buffer` (flat, row-major) at its broadcast offset.
  void bind_input(const ir::Value* v, ir::Value* buffer) { inputs_[v] = buffer; }
  void bind_value(const ir::Value* v, LaneValue lane) { values_[v] = lane; }

  const LaneValue& value(ir::OpBuilder& b, const ir::Value* v);
  void lower_op(ir::OpBuilder& b, const ir::Operation& op);

  // Rounds an fp64 (or bool) result like the reference's make_result: to the
  // accumulation type (when `via_accum`), then to storage.
  static LaneValue finish(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p, bool via_accum = true);
  // finish() for a policy that rounds stochastically: the storage rounding
  // draws Philox(seed, index), `index` being the element's flat index in its
  // own result, as the reference's make_result does.
  static LaneValue finish_stochastic(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p, bool via_accum,
                                     ir::Value* index, std::int64_t seed);
  // An fp32 value (a lane of a float format of at most 32 bits) rounded
  // once to `p` (such a format, not stochastic): the same rounding of the
  // same value as finish() from double, without the trip through it.
  static LaneValue from_fp32(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p);
  // from_fp32's stored value alone (for a store, which needs no decode).
  static ir::Value* stored_from_fp32(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& p);
  static ir::Value* decode(ir::OpBuilder& b, ir::Value* stored);
  ir::Value* offset_of(ir::OpBuilder& b, const ir::Shape& shape);

 private:
  ir::Value* as_real(ir::OpBuilder& b, const LaneValue& v);
  ir::Value* as_bool(ir::OpBuilder& b, const LaneValue& v);
  ir::Value* product(ir::OpBuilder& b, std::size_t from, std::size_t to);
  ir::Value* sigmoid(ir::OpBuilder& b, ir::Value* x);

  ir::Shape domain_;
  ir::Value* i_;
  std::vector<ir::Value*> dims_;
  std::vector<ir::Value*> index_;
  bool in_bounds_ = false;
  std::unordered_map<const ir::Value*, ir::Value*> inputs_;
  std::unordered_map<const ir::Value*, LaneValue> values_;
};

// Shorthands for building lane ops.
// The lanes of a group: the kernel's "tile" attribute, else `default_lanes`.
std::int64_t group_lanes(const ir::Operation& kernel, std::int64_t default_lanes);
// One gmem parameter "in<k>" per argument of `body` (buffer policies), in order.
std::vector<std::pair<std::string, ir::Type>> input_buffer_params(const ir::Block& body);
// This lane's index over the launch: group_id * lanes + linear_id.
ir::Value* global_lane(ir::OpBuilder& b, std::int64_t lanes);

ir::Value* real(ir::OpBuilder& b, double x);  // lane<fp64> constant
ir::Value* op1(ir::OpBuilder& b, const char* op, ir::Value* x);
ir::Value* op2(ir::OpBuilder& b, const char* op, ir::Value* x, ir::Value* y);
// Integer add, sub or mul of element offsets and loop bounds, which stay in
// range by construction (an offset of an element that exists): marked
// `nowrap`, so backends emit plain arithmetic that keeps accesses affine.
ir::Value* index_op(ir::OpBuilder& b, const char* op, ir::Value* x, ir::Value* y);
ir::Value* cmp(ir::OpBuilder& b, const char* pred, ir::Value* x, ir::Value* y);
ir::Value* select(ir::OpBuilder& b, ir::Value* c, ir::Value* x, ir::Value* y);
ir::Value* cast(ir::OpBuilder& b, ir::Value* x, const NumericsPolicy& to);
// Whether every value of `d` is an fp32 value (the float formats of at most
// 32 bits; an fp32 lane holds them exactly).
bool fp32_exact(DType d);

// Integer accumulation as the reference checks it (integer sums and
// products): an int64 lane value passed through when it lies within 2^53 in
// magnitude (exact in the reference's fp64), and a total passed through when
// it fits `result`; otherwise the kernel faults quoting `what` and the value.
ir::Value* check_exact(ir::OpBuilder& b, ir::Value* x, const std::string& what);
ir::Value* check_fits(ir::OpBuilder& b, ir::Value* x, DType result, const std::string& what);

// Exact folds (max, min, |x|, NaN and infinity tests) over stored values:
// fp64 as stored, the float formats of at most 32 bits as fp32 (exact; fp32
// fills 16 lanes of a CPU vector, not 8, and a GPU compares fp32 at twice
// the rate of fp64 or more), integers and bools decoded to fp64.
// exact_fold_value converts a loaded lane.
NumericsPolicy exact_fold_policy(DType stored);
ir::Value* exact_fold_value(ir::OpBuilder& b, ir::Value* stored);

}  // namespace tessera::schedule::templates
