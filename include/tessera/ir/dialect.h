// Dialects: registries of op definitions (ARCHITECTURE.md decision 2).
//
// Each op is defined once, in an OpDef: its name, summary, operand and
// attribute schema, effect, result-type inference (shape and policy), an
// optional extra verifier, and at graph level its reference kernel. Slots for
// the JVP/VJP and sharding rules are filled by the autodiff and distribution
// layers; asking for a rule an op lacks is an error that names the op.
//
// Result types are never written by hand: builders and the parser call
// `infer` and the verifier checks printed types against it, so shape and
// policy rules live in exactly one place.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/attribute.h"
#include "tessera/ir/type.h"
#include "tessera/support/error.h"

namespace tessera {
class Tensor;
}

namespace tessera::ir {

class Operation;

// What running an op may do besides computing its results. Passes may only
// delete, merge or reorder `pure` ops; autodiff and scheduling read the rest.
enum class Effect : std::uint8_t { pure, random, state, collective, io };
std::string_view effect_name(Effect effect);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  // A required attribute has no default; an optional one without a default
  // may be absent.
  bool required = false;
  std::optional<Attribute> default_value;
  std::string doc;
  // Further kinds accepted as written (tile.const's value is a real, an
  // integer or a bool, matching its dtype).
  std::vector<AttrKind> other_kinds = {};
};

// Operand and attribute types in, result types out. Throws ShapeError or
// DtypeError with a message naming the operand/attribute at fault; callers
// add the op name and the source location.
using InferFn = std::function<std::vector<Type>(std::span<const Type> operands, const AttrMap& attrs)>;
// Checks beyond the schema and inference (rare); throws like InferFn.
using VerifyFn = std::function<void(const Operation& op)>;

// A reference kernel: decoded inputs in, results out, honouring the result
// types' policies. `result_types` have every symbolic dim already bound.
struct KernelCall {
  std::span<const Tensor> inputs;
  const AttrMap& attrs;
  std::span<const Type> result_types;
};
using ReferenceKernel = std::function<std::vector<Tensor>(const KernelCall& call)>;

// Filled by later layers (autodiff, sharding propagation).
struct JvpRule;
struct VjpRule;
struct ShardingRule;

struct OpDef {
  std::string name;  // "graph.add": dialect prefix, a dot, the op's own name
  std::string summary;
  // Operand names in order; when `variadic` the last one repeats (>= 0 times).
  std::vector<std::string> operands;
  bool variadic = false;
  std::vector<AttrSpec> attrs;
  Effect effect = Effect::pure;
  // The number of results for ops whose count depends on attributes is
  // whatever `infer` returns; `num_results` documents the usual count.
  int num_results = 1;
  bool is_terminator = false;
  InferFn infer;
  VerifyFn verify;
  ReferenceKernel reference;
  const JvpRule* jvp = nullptr;
  const VjpRule* vjp = nullptr;
  const ShardingRule* sharding = nullptr;

  const AttrSpec* find_attr(std::string_view attr_name) const;
  std::string_view dialect() const;
};

// Every dialect's ops, by full name. The builtin (func, return) and graph
// dialects register themselves on first use.
class Registry {
 public:
  static Registry& global();
  // Adds a definition; a second definition of the same name is an internal error.
  const OpDef& add(OpDef def);
  const OpDef* find(std::string_view name) const;
  // Like find, but raises ParseError "unknown op 'graph.ad'; did you mean 'graph.add'?",
  // placed at `where` (the op's position in IR text or the user's source line).
  const OpDef& get(std::string_view name, const SourceLocation& where = {}) const;
  std::vector<const OpDef*> all() const;

 private:
  Registry();
  std::map<std::string, OpDef, std::less<>> defs_;
};

// Rule lookups that fail loudly with the op's name (decision 2).
const ReferenceKernel& require_reference(const OpDef& def);

// Fills in default attributes and checks names and kinds against the schema:
// an unknown name (with a "did you mean"), a missing required attribute or a
// value of the wrong kind raises ArgumentError naming the op and attribute.
AttrMap complete_attrs(const OpDef& def, AttrMap attrs);

}  // namespace tessera::ir
