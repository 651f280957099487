// grad_function, hvp_function, jacfwd and jacrev: compositions of the core
// transforms (vjp.cpp, jvp.cpp), so they inherit their rules and numerics.
#include "tessera/autodiff/derived.h"

#include <string>

#include "tessera/autodiff/autodiff.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"

namespace tessera::autodiff {
namespace {

std::vector<ir::Type> param_types(const ir::Operation& func) {
  std::vector<ir::Type> types;
  const ir::Block& body = ir::function_body(func);
  for (std::size_t i = 0; i < body.num_arguments(); ++i) types.push_back(body.argument(i)->type());
  return types;
}

// Adds @name(params) that calls `callee` with its own parameters and returns
// the callee's results [first, first + count).
ir::Operation& add_forwarding_function(ir::Module& module, std::string_view name, const std::vector<ir::Type>& params,
                                       const ir::Operation& callee, std::size_t first, std::size_t count,
                                       const SourceLocation& location) {
  if (module.lookup(name) != nullptr) {
    raise(ErrorCode::ArgumentInvalid, "the module already has a function named @" + std::string(name));
  }
  auto f = ir::make_function(std::string(name), location);
  ir::Block& body = ir::function_body(*f);
  std::vector<ir::Value*> args;
  for (const ir::Type& t : params) args.push_back(body.add_argument(t));
  ir::OpBuilder b(body);
  ir::Operation* call = create_call(b, callee, args, {}, location);
  std::vector<ir::Value*> outs;
  for (std::size_t i = first; i < first + count; ++i) outs.push_back(call->result(i));
  b.create("return", outs, {}, location);
  ir::Operation* added = module.add_function(std::move(f));
  ir::verify_function(*added);
  return *added;
}

void check_index(int index, std::size_t count, const char* what, const ir::Operation& func) {
  if (index < 0 || static_cast<std::size_t>(index) >= count) {
    raise(ErrorCode::ArgumentInvalid, std::string(what) + " " + std::to_string(index) + " is out of range: @" +
                                   ir::function_name(func) + " has " + std::to_string(count));
  }
}

// The function `name` if the module has it, else the one `make` adds.
template <typename Make>
const ir::Operation& cached(ir::Module& module, const std::string& name, Make make) {
  if (const ir::Operation* f = module.lookup(name)) return *f;
  return make();
}

// A one-hot tensor of `like`'s shape in `policy`, 1 at flat index `hot`.
Tensor basis(const std::vector<std::int64_t>& shape, const NumericsPolicy& policy, std::int64_t size,
             std::int64_t hot) {
  std::vector<double> v(static_cast<std::size_t>(size), 0.0);
  if (hot >= 0) v[static_cast<std::size_t>(hot)] = 1.0;
  return Tensor::from_values(v, shape, policy);
}

NumericsPolicy tangent_policy_of(const ir::Type& t, const ir::Operation& func, const std::string& what) {
  auto p = tangent_policy(t);
  if (!p) {
    raise(ErrorCode::DtypeUnsupported, what + " of @" + ir::function_name(func) + " has type " + ir::print_type(t) +
                                ", which has no derivative (not a float format)");
  }
  return *p;
}

std::vector<std::int64_t> concat(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

ir::Operation& grad_function(ir::Module& module, const ir::Operation& func, const std::vector<int>& wrt,
                             std::string_view new_name) {
  const ir::Operation& vg = value_and_grad_function(module, func, wrt, std::string(new_name) + "__value_and_grad");
  return add_forwarding_function(module, new_name, param_types(func), vg, 1, wrt.size(), func.location());
}

ir::Operation& hvp_function(ir::Module& module, const ir::Operation& func, std::string_view new_name) {
  const std::vector<ir::Type> params = param_types(func);
  std::vector<int> all;
  for (std::size_t i = 0; i < params.size(); ++i) all.push_back(static_cast<int>(i));
  const std::string base(new_name);
  const ir::Operation& vg = value_and_grad_function(module, func, all, base + "__value_and_grad");
  // jvp(vg): (primals..., tangents...) -> (value, grads..., value', grads'...)
  const ir::Operation& jvg = jvp_function(module, vg, base + "__value_and_grad_jvp");
  std::vector<ir::Type> wrapper_params = params;
  for (const ir::Type& t : params) wrapper_params.push_back(tangent_type(t));
  const std::size_t n = params.size();
  return add_forwarding_function(module, new_name, wrapper_params, jvg, 2 + n, n, func.location());
}

namespace {

// The shape of result `result` at `args` (one forward run) and its tangent
// policy; checks the indices.
struct ResultInfo {
  std::vector<std::int64_t> shape;
  std::int64_t size = 0;
  NumericsPolicy policy;
};
ResultInfo result_info(ir::Module& module, const ir::Operation& func, std::span<const Tensor> args, int argnum,
                       int result) {
  const std::vector<ir::Type> params = param_types(func);
  check_index(argnum, params.size(), "argnum", func);
  const std::vector<ir::Value*> results = ir::function_results(func);
  check_index(result, results.size(), "result", func);
  if (args.size() != params.size()) {
    raise(ErrorCode::ArgumentInvalid, "@" + ir::function_name(func) + " takes " + std::to_string(params.size()) +
                                   " arguments; got " + std::to_string(args.size()));
  }
  tangent_policy_of(params[argnum], func, "parameter " + std::to_string(argnum));
  const std::vector<Tensor> outs = graph::execute(module, func, args);
  const Tensor& y = outs[result];
  return ResultInfo{y.shape(), y.numel(),
                    tangent_policy_of(results[result]->type(), func, "result " + std::to_string(result))};
}

}  // namespace

Tensor jacfwd(ir::Module& module, const ir::Operation& func, std::span<const Tensor> args, int argnum, int result) {
  const ResultInfo y = result_info(module, func, args, argnum, result);
  const std::vector<ir::Type> params = param_types(func);
  const std::string name = ir::function_name(func) + "__jacfwd";
  const ir::Operation& jf = cached(module, name, [&]() -> ir::Operation& { return jvp_function(module, func, name); });
  const std::size_t n_results = ir::function_results(func).size();

  // (primals..., tangents...): every tangent zero but the argnum one.
  std::vector<Tensor> inputs(args.begin(), args.end());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const NumericsPolicy p = tangent_policy(params[i]).value_or(default_policy(DType::fp32));
    inputs.push_back(basis(args[i].shape(), p, args[i].numel(), -1));
  }
  const Tensor& x = args[argnum];
  const NumericsPolicy x_policy = *tangent_policy(params[argnum]);
  std::vector<double> jac(static_cast<std::size_t>(y.size * x.numel()));
  for (std::int64_t j = 0; j < x.numel(); ++j) {  // column j = d y / d x[j]
    inputs[args.size() + argnum] = basis(x.shape(), x_policy, x.numel(), j);
    const std::vector<double> col = graph::execute(module, jf, inputs)[n_results + result].to_values();
    for (std::size_t i = 0; i < col.size(); ++i) jac[i * x.numel() + j] = col[i];
  }
  return Tensor::from_values(jac, concat(y.shape, x.shape()), y.policy);
}

Tensor jacrev(ir::Module& module, const ir::Operation& func, std::span<const Tensor> args, int argnum, int result) {
  const ResultInfo y = result_info(module, func, args, argnum, result);
  const std::vector<ir::Value*> results = ir::function_results(func);
  const std::string name = ir::function_name(func) + "__jacrev_" + std::to_string(argnum);
  const ir::Operation& vf =
      cached(module, name, [&]() -> ir::Operation& { return vjp_function(module, func, {argnum}, name); });

  // (primals..., result cotangents...): every cotangent zero but the result one.
  std::vector<Tensor> inputs(args.begin(), args.end());
  std::vector<std::vector<std::int64_t>> result_shapes;
  for (const Tensor& t : graph::execute(module, func, args)) result_shapes.push_back(t.shape());
  for (std::size_t r = 0; r < results.size(); ++r) {
    const NumericsPolicy p = tangent_policy(results[r]->type()).value_or(default_policy(DType::fp32));
    std::int64_t size = 1;
    for (std::int64_t d : result_shapes[r]) size *= d;
    inputs.push_back(basis(result_shapes[r], p, size, -1));
  }
  const Tensor& x = args[argnum];
  std::vector<double> jac(static_cast<std::size_t>(y.size * x.numel()));
  for (std::int64_t i = 0; i < y.size; ++i) {  // row i = d y[i] / d x
    inputs[args.size() + result] = basis(y.shape, y.policy, y.size, i);
    const std::vector<double> row = graph::execute(module, vf, inputs)[results.size()].to_values();
    for (std::size_t j = 0; j < row.size(); ++j) jac[i * x.numel() + j] = row[j];
  }
  return Tensor::from_values(jac, concat(y.shape, x.shape()), y.policy);
}

}  // namespace tessera::autodiff
