// The sharding rule registry and the plans op families share.
#include "dist/sharding_rules/rule_support.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tessera/ir/dialect.h"
#include "tessera/support/error.h"

namespace tessera::dist {

namespace {

struct Rules {
  std::mutex mutex;
  std::map<std::string, ShardingRule, std::less<>> by_op;
};

Rules& raw_rules() {
  static Rules r;
  return r;
}

Rules& table() {
  static std::once_flag once;
  std::call_once(once, [] {
    rules::register_elementwise_sharding();
    rules::register_reduction_sharding();
    rules::register_linalg_sharding();
    rules::register_normalization_sharding();
    rules::register_shape_sharding();
    rules::register_creation_sharding();
    rules::register_library_sharding();
  });
  return raw_rules();
}

}  // namespace

void register_sharding_rule(std::string_view op_name, ShardingRule rule) {
  ir::Registry::global().get(op_name);  // an unknown op raises "did you mean"
  // Built-in registration runs inside table()'s call_once, which must not re-enter it.
  Rules& r = raw_rules();
  std::lock_guard lock(r.mutex);
  r.by_op.insert_or_assign(std::string(op_name), std::move(rule));
}

bool has_sharding_rule(std::string_view op_name) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  auto it = r.by_op.find(op_name);
  return it != r.by_op.end() && static_cast<bool>(it->second);
}

const ShardingRule& require_sharding_rule(const ir::Operation& op) {
  Rules& r = table();
  std::lock_guard lock(r.mutex);
  auto it = r.by_op.find(op.name());
  if (it == r.by_op.end() || !it->second) {
    raise(ErrorCode::Compile,
          "no sharding rule for op '" + std::string(op.name()) + "': it cannot run in a function over distributed tensors yet" +
              (op.location().valid() ? " (at " + op.location().prefix() + ")" : std::string()),
          op.location());
  }
  return it->second;
}

}  // namespace tessera::dist

namespace tessera::dist::rules {

std::vector<std::int64_t> sizes_of(const ir::Value* v) {
  auto s = ir::static_sizes(v->type().shape);
  if (!s) raise(ErrorCode::ShapeMismatch, "a sharded function needs static shapes, got " + print_type(v->type()));
  return *s;
}

std::size_t axis_of(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    raise(ErrorCode::ShapeMismatch, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

void conflict(const ShardingQuery& q, std::size_t i, std::size_t j, const std::string& why) {
  std::string a = print_sharding(q.operands[i]);
  std::string b = print_sharding(q.operands[j]);
  std::string which = i == j ? "operand #" + std::to_string(i) + " (" + a + ")"
                             : "operand #" + std::to_string(i) + " (" + a + ") and operand #" + std::to_string(j) +
                                   " (" + b + ")";
  raise(ErrorCode::ShapeMismatch, "cannot decide how to shard the result: " + which + " " + why +
                                      "; make the layouts agree with tessera.dist.reshard(x, layout)");
}

Sharding settled(Sharding s) {
  s.partial.clear();
  return s;
}

bool uses_axis(const Sharding& s, const std::string& a) {
  return s.dim_of(a) >= 0 || std::find(s.partial.begin(), s.partial.end(), a) != s.partial.end();
}

bool same_partial(const Sharding& a, const Sharding& b) {
  auto x = a.partial, y = b.partial;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

ShardingPlan replicate_all(const ShardingQuery& q) {
  ShardingPlan plan;
  for (std::size_t i = 0; i < q.op.num_operands(); ++i) plan.operands.push_back(replicated(q.op.operand(i)->type().rank()));
  for (std::size_t r = 0; r < q.op.num_results(); ++r) plan.results.push_back(replicated(q.op.result(r)->type().rank()));
  return plan;
}

ShardingPlan broadcast_plan(const ShardingQuery& q, bool linear, const std::vector<std::size_t>& forced_whole) {
  const ir::Operation& op = q.op;
  const std::size_t rank = op.result(0)->type().rank();
  const auto out = sizes_of(op.result(0));
  Sharding res = replicated(rank);
  std::vector<std::size_t> decided_by(rank, 0);
  auto forced = [&](std::size_t j) { return std::find(forced_whole.begin(), forced_whole.end(), j) != forced_whole.end(); };
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    const Sharding& s = q.operands[i];
    const auto in = sizes_of(op.operand(i));
    const std::size_t offset = rank - in.size();
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::string& a = s.dims[k];
      const std::size_t j = k + offset;
      if (a.empty() || forced(j) || (in[k] == 1 && out[j] != 1)) continue;
      if (res.dims[j].empty()) {
        const int other = res.dim_of(a);
        if (other >= 0) {
          conflict(q, decided_by[other], i,
                   "split result dims " + std::to_string(other) + " and " + std::to_string(j) + " over mesh axis '" +
                       a + "'");
        }
        res.dims[j] = a;
        decided_by[j] = i;
      } else if (res.dims[j] != a) {
        conflict(q, decided_by[j], i,
                 "split result dim " + std::to_string(j) + " over different mesh axes ('" + res.dims[j] + "' and '" +
                     a + "')");
      }
    }
  }
  bool keep_partial = linear && !q.operands.empty() && q.operands[0].is_partial();
  for (const auto& s : q.operands) keep_partial = keep_partial && same_partial(s, q.operands[0]);
  if (keep_partial) {
    for (const auto& a : q.operands[0].partial) keep_partial = keep_partial && res.dim_of(a) < 0;
  }
  if (keep_partial) res.partial = q.operands[0].partial;
  ShardingPlan plan;
  for (std::size_t i = 0; i < op.num_operands(); ++i) {
    const auto in = sizes_of(op.operand(i));
    const std::size_t offset = rank - in.size();
    Sharding need = replicated(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!(in[k] == 1 && out[k + offset] != 1)) need.dims[k] = res.dims[k + offset];
    }
    if (keep_partial) need.partial = res.partial;
    plan.operands.push_back(std::move(need));
  }
  for (std::size_t r = 0; r < op.num_results(); ++r) plan.results.push_back(res);
  return plan;
}

}  // namespace tessera::dist::rules
