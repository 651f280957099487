// The rule registry: JVP and VJP rules keyed by op name. The built-in rules
// (src/autodiff/rules) register once, on first use; register_jvp/register_vjp
// replace a rule (how custom rules for a named op are installed).
#include <map>
#include <mutex>

#include "autodiff/internal.h"
#include "autodiff/rules/rules.h"

namespace tessera::autodiff {

namespace {

struct Rules {
  std::mutex mutex;
  std::map<std::string, JvpRule, std::less<>> jvp;
  std::map<std::string, VjpRule, std::less<>> vjp;
};

Rules& raw_rules() {
  static Rules r;
  return r;
}

Rules& table() {
  static std::once_flag once;
  std::call_once(once, [] {
    rules::register_elementwise_rules();
    rules::register_reduction_rules();
    rules::register_linalg_rules();
    rules::register_sparse_rules();
    rules::register_attention_rules();
    rules::register_complex_rules();
    rules::register_fft_rules();
    rules::register_normalization_rules();
    rules::register_shape_rules();
    rules::register_effect_rules();
  });
  return raw_rules();
}

void check_op(std::string_view op_name) {
  if (!ir::Registry::global().find(op_name)) {
    ir::Registry::global().get(op_name);  // raises "unknown op ... did you mean"
  }
}

std::string where_text(const ir::Operation& op, const std::string& func_name) {
  std::string s = " (in @" + func_name;
  if (op.location().valid()) s += " at " + op.location().prefix();
  return s + ")";
}

}  // namespace

void register_jvp(std::string_view op_name, JvpRule rule) {
  check_op(op_name);
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  r.jvp.insert_or_assign(std::string(op_name), std::move(rule));
}

void register_vjp(std::string_view op_name, VjpRule rule) {
  check_op(op_name);
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  r.vjp.insert_or_assign(std::string(op_name), std::move(rule));
}

bool has_jvp(std::string_view op_name) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  return r.jvp.count(op_name) > 0;
}

bool has_vjp(std::string_view op_name) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  return r.vjp.count(op_name) > 0;
}

JvpRule require_jvp(const ir::Operation& op, const std::string& func_name) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  auto it = r.jvp.find(op.name());
  if (it == r.jvp.end()) {
    raise(ErrorCode::Compile,
          "no JVP rule for op '" + std::string(op.name()) + "'" + where_text(op, func_name) +
              "; register one with tessera::autodiff::register_jvp",
          op.location());
  }
  return it->second;
}

VjpRule require_vjp(const ir::Operation& op, const std::string& func_name) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  auto it = r.vjp.find(op.name());
  if (it == r.vjp.end()) {
    raise(ErrorCode::Compile,
          "no VJP rule for op '" + std::string(op.name()) + "'" + where_text(op, func_name) +
              "; register one with tessera::autodiff::register_vjp",
          op.location());
  }
  return it->second;
}

namespace rules {

// Called while the built-in rules register (inside call_once): write directly.
void register_builtin_jvp(const std::string& name, JvpRule rule) {
  raw_rules().jvp.insert_or_assign(name, std::move(rule));
}
void register_builtin_vjp(const std::string& name, VjpRule rule) {
  raw_rules().vjp.insert_or_assign(name, std::move(rule));
}

void register_zero_rules(const std::string& op_name) {
  register_builtin_jvp(op_name, [](RuleContext&, ir::Operation&, const Values&) { return Values{}; });
  register_builtin_vjp(op_name, [](RuleContext&, ir::Operation&, const Values&) { return Values{}; });
}

}  // namespace rules

}  // namespace tessera::autodiff
