// Automatic differentiation as transforms on Graph IR functions (issue 4;
// docs/guide/autodiff.md, docs/design/0004-autodiff.md).
//
// jvp_function, vjp_function and value_and_grad_function read a `func` of a
// Module and add a new `func` to the same Module: ordinary Graph IR that can
// be printed, optimized, executed and differentiated again. Each Graph IR op
// has one JVP rule and one VJP rule, written with Graph IR ops through an
// OpBuilder, so rules of rules (higher orders) need nothing extra.
//
// Numerics: a tangent or cotangent of a value whose storage is a float format
// of 32 bits or fewer is carried at fp32 (default policy), of an fp64 value
// at fp64; rules compute at that precision (RuleContext::primal casts primal
// values to it), fan-out contributions sum at it, and the gradients returned
// have the primal's shape and that fp32/fp64 policy. Values of integer or bool
// type have no derivative: their tangent/cotangent slots are fp32 zeros of the
// value's shape, read as zero and never used.
//
// A reverse-mode transform asked for TangentPrecision::storage carries the
// derivatives of bf16 and fp16 values in their own storage format instead
// (formats narrower than 16 bits: bf16), as mixed-precision training in other
// frameworks does. Rules still compute at fp32 and their results are rounded
// once to storage; the gemm rules take the primals at storage, so the backward
// products of a bf16 layer are bf16 tensor-core products (docs/design/0026).

#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/ir/builder.h"
#include "tessera/ir/ir.h"

namespace tessera::autodiff {

// The precision a transform carries derivatives at (see the top of this file).
enum class TangentPrecision { full, storage };

// Sets the precision tangent_policy answers with for this thread while it
// lives; the transforms open one for their whole construction.
class TangentPrecisionScope {
 public:
  explicit TangentPrecisionScope(TangentPrecision precision);
  ~TangentPrecisionScope();
  TangentPrecisionScope(const TangentPrecisionScope&) = delete;
  TangentPrecisionScope& operator=(const TangentPrecisionScope&) = delete;

 private:
  TangentPrecision saved_;
};

// The policy tangents/cotangents of a value of type `t` have: default fp64 for
// fp64 storage, default fp32 for other float formats (under
// TangentPrecision::storage: bf16/fp16 keep their format, narrower formats
// take bf16), nullopt for integers and bool (no derivative).
std::optional<NumericsPolicy> tangent_policy(const ir::Type& t);
// t's shape with tangent_policy(t) (fp32 for non-float types: the unused slot).
ir::Type tangent_type(const ir::Type& t);

// Rank-0 constants a transform has made, by (value bits, policy text), so
// each is made once per function.
using ScalarCache = std::map<std::pair<std::uint64_t, std::string>, ir::Value*>;

// What a rule builds with. Values are Graph IR values; nullptr means zero.
// The transforms pass caches shared by all rules of one new function.
class RuleContext {
 public:
  RuleContext(ir::OpBuilder& b, SourceLocation loc,
              std::unordered_map<const ir::Value*, ir::Value*>* primal_cache = nullptr,
              ScalarCache* scalar_cache = nullptr)
      : builder(b), location(std::move(loc)), cache_(primal_cache), scalars_(scalar_cache) {}

  ir::OpBuilder& builder;
  SourceLocation location;  // the differentiated op's location; new ops get it too

  // Creates `op_name` (e.g. "graph.mul") and returns its result(s).
  ir::Value* op(std::string_view op_name, std::vector<ir::Value*> operands, ir::AttrMap attrs = {});
  std::vector<ir::Value*> ops(std::string_view op_name, std::vector<ir::Value*> operands, ir::AttrMap attrs = {});
  // `v` cast to the policy rules compute at, fp32 (fp64 for fp64 values),
  // once per value: how rules combine primal values with tangents. Under
  // TangentPrecision::storage the incoming bf16/fp16 cotangent promotes to it
  // inside the rule, and only the rule's result is rounded to storage.
  ir::Value* primal(ir::Value* v);
  // `v` as an operand of a product with a cotangent (the gemm rules): at
  // tangent_policy(v), so under TangentPrecision::storage a bf16 layer's
  // backward products take bf16 operands (tensor cores) rather than fp32.
  ir::Value* product_operand(ir::Value* v);
  // A rank-0 constant: `value` rounded to the nearest value of `policy`'s storage.
  ir::Value* scalar(double value, const NumericsPolicy& policy);
  // Zeros of `type` (symbolic dims allowed); zeros_like(v) has v's tangent type.
  ir::Value* zeros(const ir::Type& type);
  ir::Value* zeros_like(ir::Value* v);
  // No-op when `v` already has `policy`.
  ir::Value* cast_to(ir::Value* v, const NumericsPolicy& policy);
  // Numpy broadcast of v to `shape` (no-op when equal).
  ir::Value* broadcast_to(ir::Value* v, const ir::Shape& shape);
  // Undoes numpy broadcasting: sums v over the leading axes `shape` lacks and
  // the axes where `shape` has a 1, giving exactly `shape`.
  ir::Value* sum_to_shape(ir::Value* v, const ir::Shape& shape);
  // `v` with its shape and policy made tangent_type(like): broadcast when
  // like's shape is a broadcast of v's, else summed (sum_to_shape); then cast.
  ir::Value* fit_to(ir::Value* v, const ir::Type& like);

 private:
  std::unordered_map<const ir::Value*, ir::Value*>* cache_;
  std::unordered_map<const ir::Value*, ir::Value*> own_cache_;
  ScalarCache* scalars_;
};

// Rules. JvpRule: one tangent per operand in (nullptr = zero), one per result
// out. VjpRule: one cotangent per result in, one per operand out (nullptr =
// zero / not differentiable). Returning an empty vector means all zero. The
// engine fits what a rule returns to the value's tangent type (undoing
// broadcasting, casting to fp32/fp64), so rules may return broadcast shapes.
using JvpRule = std::function<std::vector<ir::Value*>(RuleContext&, ir::Operation& op,
                                                      const std::vector<ir::Value*>& operand_tangents)>;
using VjpRule = std::function<std::vector<ir::Value*>(RuleContext&, ir::Operation& op,
                                                      const std::vector<ir::Value*>& result_cotangents)>;
void register_jvp(std::string_view op_name, JvpRule rule);  // replaces an existing rule (custom rules)
void register_vjp(std::string_view op_name, VjpRule rule);
bool has_jvp(std::string_view op_name);
bool has_vjp(std::string_view op_name);

// Transforms. `func` is a func op in `module`; the new func is added to
// `module` (a name already taken is an ArgumentError) and returned.
// jvp:  (primals..., tangents...) -> (results..., result_tangents...)
ir::Operation& jvp_function(ir::Module& module, const ir::Operation& func, std::string_view new_name);
// vjp:  (primals..., result_cotangents...) -> (results..., cotangents of args in `wrt`...)
ir::Operation& vjp_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                            std::string_view new_name, TangentPrecision precision = TangentPrecision::full);
// grad: func with one rank-0 float result -> (primals...) -> (result, grads of `wrt`...).
// The seed is the result policy's loss scale s (1 without one) and the
// gradients are divided by s at the end; a backward pass that overflows to
// inf/NaN at fp32 keeps inf/NaN after the division, so a GradScaler sees it.
ir::Operation& value_and_grad_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                                       std::string_view new_name,
                                       TangentPrecision precision = TangentPrecision::full);

// Calls. `call {callee = "f", result_types = "..."}` runs another func of the
// module; create_call fills result_types from the callee. `extra` may set
// remat = true, custom_jvp = "g", custom_vjp_fwd = "h", custom_vjp_bwd = "k".
ir::Operation* create_call(ir::OpBuilder& builder, const ir::Operation& callee, std::vector<ir::Value*> args,
                           ir::AttrMap extra = {}, SourceLocation location = {});
// Copies `callee`'s body into the builder's block with its parameters bound
// to `args` (result types re-inferred from the argument types); returns the
// values the callee returns. `call` ops inside are copied as calls.
std::vector<ir::Value*> inline_function(ir::OpBuilder& builder, const ir::Operation& callee,
                                        const std::vector<ir::Value*>& args);
// The func a `call` op names; raises ArgumentError when the module lacks it.
const ir::Operation& resolve_callee(const ir::Module& module, const ir::Operation& call_op);

}  // namespace tessera::autodiff
