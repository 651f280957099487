// tabulate-functions (every executable, before partitioning): a chain of
// elementwise ops computing a value from one narrow float value x alone
// (bf16, fp16, the fp8/fp6/fp4 formats: at most 2^16 codes) becomes one
// graph.lookup of a table with one element per code of x.
//
// Why: GELU, erf, exp, tanh and sigmoid at the reference's bits cost tens of
// double operations per element; a GPU runs fp64 at a fraction of its fp32
// rate, so an elementwise chain with GELU ran at a quarter of copy
// bandwidth. A 16-bit value has 65536 codes, so the chain's result for each
// can be computed once, when compiling, by the reference executor itself.
// The kernel then reads one table element per result (docs/design/0030).
//
// The table has the bits the chain has by construction: the reference
// executor is the oracle every compiled kernel is checked against, and it
// evaluates the same ops, with the same roundings, on each code.
//
// A chain qualifies when:
// - every op in it is an elementwise op a lane program computes (not a
//   constant, broadcast or lookup), with one result, no stochastic rounding
//   (that draws per element index) and no complex value;
// - each operand is x, another op of the chain, or a splat constant;
// - every op's result has x's shape (x is not broadcast);
// - it contains a transcendental op (exp, log, tanh, erf, gelu, sigmoid,
//   silu, sin, cos, pow): cheaper chains cost less than the table read;
// - its result is read by something outside the chain (the chain ends there).
// A table whose entries are all equal, or that a graph.constant cannot hold
// exactly (a NaN payload), leaves the chain as it is.
#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <unordered_map>

#include "graph/kernel_support.h"
#include "graph/passes/pass_support.h"
#include "schedule/templates/lane_program.h"
#include "tessera/graph/constants.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/builder.h"
#include "tessera/ir/text.h"
#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {

namespace {

const std::set<std::string_view> kTranscendental = {"graph.exp",     "graph.log",  "graph.tanh", "graph.erf",
                                                    "graph.gelu",    "graph.silu", "graph.sin",  "graph.cos",
                                                    "graph.sigmoid", "graph.pow"};

// Whether v's storage codes can index a table.
bool indexes_a_table(const ir::Value* v) { return graph::lookup_code_count(v->type().dtype()).has_value(); }

bool splat(const ir::Value* v) {
  const ir::Operation* d = v->defining_op();
  return d != nullptr && is_splat_constant(*d);
}

// An op whose result element is a function of its operands' same elements
// alone, which a lane program computes.
bool pointwise(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (op.num_results() != 1 || !templates::lane_op_covered(n)) return false;
  if (n == "graph.constant" || n == "graph.broadcast_to" || n == "graph.lookup") return false;
  const NumericsPolicy& p = op.result(0)->type().policy;
  if (p.rounding == Rounding::stochastic || is_complex(p.storage)) return false;
  for (const ir::Value* v : op.operands()) {
    if (is_complex(v->type().dtype())) return false;
  }
  return true;
}

// A value computed from `base` alone; `transcendental`: some op on the way is.
struct Chain {
  const ir::Value* base = nullptr;
  bool transcendental = false;
};

// Tables by (x's policy, the chain's printed function): a chain compiled
// again (another shape, eager calls, the next jit) reuses its table.
struct TableCache {
  std::mutex mutex;
  std::map<std::string, Tensor> tables;
};
TableCache& table_cache() {
  static TableCache cache;
  return cache;
}

class Tabulator {
 public:
  explicit Tabulator(ir::Operation& func) : body_(ir::function_body(func)) {}

  int run() {
    for (const auto& holder : body_.ops()) {
      if (holder.get() == body_.terminator()) break;
      position_[holder.get()] = position_.size();
      if (pointwise(*holder)) extend(*holder);
    }
    // Every table first, from the graph as it is; then the rewrites.
    struct Rewrite {
      ir::Value* value;
      std::string key;
      Tensor table;
    };
    std::vector<Rewrite> rewrites;
    std::set<const ir::Value*> ends;
    for (const auto& holder : body_.ops()) {
      if (holder.get() == body_.terminator()) break;
      if (holder->num_results() != 1) continue;
      ir::Value* v = holder->result(0);
      if (!ends_a_chain(v)) continue;
      // A chain ends before a cast that only widens: it changes no value,
      // and a product reads such a cast's narrow operand as its own
      // (split_fp32_products: one bf16 product instead of three).
      if (ir::Value* narrow = widened(*holder)) v = narrow;
      if (!ends.insert(v).second) continue;
      std::string key;
      if (std::optional<Tensor> table = tabulate(v, key)) rewrites.push_back({v, key, std::move(*table)});
    }
    // One constant per distinct table (the rewrites go in program order,
    // so a table's constant comes before every later chain's end).
    std::map<std::string, ir::Value*> constants;
    int done = 0;
    for (Rewrite& r : rewrites) {
      ir::Operation* def = r.value->defining_op();
      ir::OpBuilder b(body_);
      b.set_insertion_point(std::next(body_.find(def)));
      ir::Value*& table = constants[r.key];
      if (table == nullptr) {
        try {
          table = graph::build_constant(b, r.table, def->location())->result(0);
        } catch (const Error&) {
          continue;  // a NaN payload no graph.constant holds: the chain stays
        }
      }
      ir::Value* base = const_cast<ir::Value*>(chains_.at(r.value).base);
      ir::Operation* lookup = b.create("graph.lookup", {table, base}, {}, def->location());
      r.value->replace_all_uses_with(lookup->result(0));
      ++done;
    }
    return done;
  }

 private:
  void extend(const ir::Operation& op) {
    Chain c{nullptr, kTranscendental.count(op.name()) > 0};
    for (const ir::Value* v : op.operands()) {
      if (splat(v)) continue;
      const ir::Value* base = nullptr;
      if (auto it = chains_.find(v); it != chains_.end()) {
        base = it->second.base;
        c.transcendental = c.transcendental || it->second.transcendental;
      } else if (indexes_a_table(v)) {
        base = v;
      } else {
        return;
      }
      if (c.base != nullptr && c.base != base) return;
      c.base = base;
    }
    if (c.base == nullptr || op.result(0)->type().shape != c.base->type().shape) return;
    chains_[op.result(0)] = c;
  }

  // The operand of `op` when op is a widening cast (every value of the
  // operand's format exact in the result's) of a value of the same chain
  // with a transcendental op; else null.
  ir::Value* widened(const ir::Operation& op) const {
    if (op.name() != "graph.cast") return nullptr;
    ir::Value* from = op.operand(0);
    const DType a = from->type().dtype(), b = op.result(0)->type().dtype();
    const bool widens = a == b || (templates::fp32_exact(a) && (b == DType::fp32 || b == DType::fp64)) ||
                        (a == DType::fp32 && b == DType::fp64);
    auto it = chains_.find(from);
    if (!widens || it == chains_.end() || !it->second.transcendental) return nullptr;
    return from;
  }

  // Whether v is a chain's last value: some reader is not a further op of
  // the same chain (the function's return counts).
  bool ends_a_chain(const ir::Value* v) const {
    auto it = chains_.find(v);
    if (it == chains_.end() || !it->second.transcendental) return false;
    for (const ir::Use& use : v->uses()) {
      if (use.user->num_results() != 1) return true;
      auto next = chains_.find(use.user->result(0));
      if (next == chains_.end() || next->second.base != it->second.base) return true;
    }
    return false;
  }

  // v's table: v's chain as a function of a 1-D x holding every code,
  // run by the reference executor. nullopt when the entries are all equal.
  std::optional<Tensor> tabulate(const ir::Value* v, std::string& key) {
    const ir::Value* base = chains_.at(v).base;
    std::vector<const ir::Operation*> ops;
    collect(v, base, ops);
    std::sort(ops.begin(), ops.end(), [&](const ir::Operation* a, const ir::Operation* b) {
      return position_.at(a) < position_.at(b);
    });
    const std::int64_t codes = *graph::lookup_code_count(base->type().dtype());
    auto func = ir::make_function("chain", v->defining_op()->location());
    ir::Block& fb = ir::function_body(*func);
    std::unordered_map<const ir::Value*, ir::Value*> mapped;
    mapped[base] = fb.add_argument(ir::Type::tensor({ir::Dim::fixed(codes)}, base->type().policy), "x");
    ir::OpBuilder b(fb);
    for (const ir::Operation* op : ops) {
      std::vector<ir::Value*> operands;
      for (const ir::Value* o : op->operands()) {
        if (auto it = mapped.find(o); it != mapped.end()) {
          operands.push_back(it->second);
          continue;
        }
        // A splat constant: its value as a 0-d constant (it broadcasts).
        const double value = *graph::splat_value(o);
        ir::AttrMap attrs;
        attrs.set("value", std::vector<double>{value});
        attrs.set("shape", ir::Shape{});
        attrs.set("policy", o->type().policy);
        operands.push_back(b.create("graph.constant", {}, attrs, op->location())->result(0));
      }
      mapped[op->result(0)] = b.create(op->name(), operands, op->attrs(), op->location())->result(0);
    }
    ir::Value* result = mapped.at(v);
    if (result->type().policy != v->type().policy) return std::nullopt;  // not the same function after all
    b.create("return", {result}, {}, {});
    key = ir::print_type(base->type()) + "\n" + ir::print_function(*func);
    std::optional<Tensor> cached;
    {
      std::lock_guard<std::mutex> lock(table_cache().mutex);
      auto it = table_cache().tables.find(key);
      if (it != table_cache().tables.end()) cached = it->second;
    }
    Tensor table;
    if (cached) {
      table = *cached;
    } else {
      std::vector<std::uint64_t> all(static_cast<std::size_t>(codes));
      std::iota(all.begin(), all.end(), std::uint64_t{0});
      const Tensor x = Tensor::from_codes(all, {codes}, base->type().policy);
      table = graph::execute(*func, std::span<const Tensor>(&x, 1)).at(0);
      std::lock_guard<std::mutex> lock(table_cache().mutex);
      table_cache().tables.emplace(key, table);
    }
    const std::vector<std::uint64_t> entries = table.codes();
    if (std::all_of(entries.begin(), entries.end(), [&](std::uint64_t c) { return c == entries[0]; })) return std::nullopt;
    return table;
  }

  // The ops of v's chain down to `base`, each once.
  void collect(const ir::Value* v, const ir::Value* base, std::vector<const ir::Operation*>& ops) {
    if (v == base) return;
    const ir::Operation* op = v->defining_op();
    if (op == nullptr || std::find(ops.begin(), ops.end(), op) != ops.end()) return;
    if (splat(v)) return;
    ops.push_back(op);
    for (const ir::Value* o : op->operands()) collect(o, base, ops);
  }

  ir::Block& body_;
  std::unordered_map<const ir::Operation*, std::size_t> position_;
  std::unordered_map<const ir::Value*, Chain> chains_;
};

}  // namespace

int tabulate_functions(ir::Operation& func) { return Tabulator(func).run(); }

}  // namespace tessera::schedule
