// Passes that apply the autodiff transforms to a module, so tessera-opt can
// print derivatives: for every root function (one no `call` in the module
// names), autodiff-jvp adds @<f>_jvp, autodiff-vjp adds @<f>_vjp (with
// respect to every parameter) and autodiff-grad adds @<f>_grad
// (value_and_grad with respect to every parameter; the root must return one
// rank-0 float value).
#include <set>

#include "autodiff/passes.h"
#include "tessera/autodiff/autodiff.h"
#include "tessera/ir/pass.h"

namespace tessera::autodiff {

namespace {

std::vector<const ir::Operation*> roots(const ir::Module& module) {
  std::set<std::string> called;
  for (const auto& f : module.functions()) {
    for (const auto& op : ir::function_body(*f).ops()) {
      if (op->name() != "call") continue;
      for (const char* attr : {"callee", "custom_jvp", "custom_vjp_fwd", "custom_vjp_bwd"}) {
        if (op->attrs().has(attr)) called.insert(op->attrs().get_string(attr));
      }
    }
  }
  std::vector<const ir::Operation*> out;
  for (const auto& f : module.functions()) {
    if (!called.count(ir::function_name(*f))) out.push_back(f.get());
  }
  return out;
}

std::vector<int> all_params(const ir::Operation& f) {
  std::vector<int> wrt;
  for (std::size_t i = 0; i < ir::function_body(f).num_arguments(); ++i) wrt.push_back(static_cast<int>(i));
  return wrt;
}

}  // namespace

void register_autodiff_passes() {
  ir::register_pass(
      {"autodiff-jvp", "Add @<f>_jvp, the forward-mode derivative of every root function.", [](ir::Module& m) {
         for (const ir::Operation* f : roots(m)) jvp_function(m, *f, ir::function_name(*f) + "_jvp");
       }});
  ir::register_pass(
      {"autodiff-vjp", "Add @<f>_vjp, the reverse-mode derivative of every root function.", [](ir::Module& m) {
         for (const ir::Operation* f : roots(m)) {
           vjp_function(m, *f, all_params(*f), ir::function_name(*f) + "_vjp");
         }
       }});
  ir::register_pass(
      {"autodiff-grad", "Add @<f>_grad = value_and_grad of every root function (scalar results).", [](ir::Module& m) {
         for (const ir::Operation* f : roots(m)) {
           value_and_grad_function(m, *f, all_params(*f), ir::function_name(*f) + "_grad");
         }
       }});
}

}  // namespace tessera::autodiff
