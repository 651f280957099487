// The `inline-calls` pass: replaces every `call` by a copy of its callee's
// body (repeatedly, so calls inside callees go too), leaving each function
// call-free. Run it after differentiation: before, it removes the checkpoint
// (remat) and custom-rule boundaries that `call` attributes carry. A call
// whose callee is missing, or a chain of calls deeper than 64 (recursion), is
// an error naming the callee.
#include "graph/passes/pass_support.h"
#include "tessera/autodiff/autodiff.h"

namespace tessera::graph {

namespace {

// Inlines the calls found in one sweep of `body`; returns how many.
int inline_once(const ir::Module& module, ir::Block& body) {
  std::vector<ir::Operation*> calls;
  for (auto& op : body.ops()) {
    if (op->name() == "call") calls.push_back(op.get());
  }
  for (ir::Operation* call : calls) {
    const ir::Operation& callee = autodiff::resolve_callee(module, *call);
    ir::OpBuilder b(body);
    b.set_insertion_point(body.find(call));
    auto results = autodiff::inline_function(b, callee, call->operands());
    for (std::size_t i = 0; i < results.size(); ++i) call->result(i)->replace_all_uses_with(results[i]);
    body.erase(call);
  }
  return static_cast<int>(calls.size());
}

}  // namespace

ir::PassInfo make_inline_calls_pass() {
  return ir::PassInfo{
      .name = "inline-calls",
      .summary = "Replace every call by its callee's body (run after autodiff: it drops remat/custom rules).",
      .run =
          [](ir::Module& module) {
            for (auto& func : module.functions()) {
              ir::Block& body = ir::function_body(*func);
              for (int round = 0; inline_once(module, body) > 0; ++round) {
                if (round == 64) {
                  raise(ErrorCode::Compile, "inline-calls: calls in @" + ir::function_name(*func) +
                                                " nest deeper than 64 (a function calls itself?)");
                }
              }
            }
          },
  };
}

}  // namespace tessera::graph
