#include "tessera/ir/dialect.h"

#include <algorithm>

#include "tessera/support/error.h"

namespace tessera::ir {

// Defined by each dialect's registration file.
void register_builtin_dialect(Registry& registry);
void register_graph_dialect(Registry& registry);
void register_tile_dialect(Registry& registry);
void register_schedule_dialect(Registry& registry);

std::string_view effect_name(Effect effect) {
  switch (effect) {
    case Effect::pure: return "pure";
    case Effect::random: return "random";
    case Effect::state: return "state";
    case Effect::collective: return "collective";
    case Effect::io: return "io";
  }
  return "?";
}

const AttrSpec* OpDef::find_attr(std::string_view attr_name) const {
  for (const auto& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

std::string_view OpDef::dialect() const {
  auto dot = name.find('.');
  return dot == std::string::npos ? std::string_view("builtin") : std::string_view(name).substr(0, dot);
}

Registry::Registry() {
  register_builtin_dialect(*this);
  register_graph_dialect(*this);
  register_tile_dialect(*this);
  register_schedule_dialect(*this);
}

Registry& Registry::global() {
  static Registry registry;
  return registry;
}

const OpDef& Registry::add(OpDef def) {
  if (defs_.count(def.name)) raise(ErrorCode::Internal, "op '" + def.name + "' is defined twice");
  std::string key = def.name;
  return defs_.emplace(std::move(key), std::move(def)).first->second;
}

const OpDef* Registry::find(std::string_view name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : &it->second;
}

const OpDef& Registry::get(std::string_view name, const SourceLocation& where) const {
  if (const OpDef* d = find(name)) return *d;
  std::vector<std::string_view> names;
  for (const auto& [n, d] : defs_) names.push_back(n);
  std::string hint = closest_match(name, names);
  raise(ErrorCode::ParseUnknownOp,
        "unknown op '" + std::string(name) + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"), where);
}

std::vector<const OpDef*> Registry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [n, d] : defs_) out.push_back(&d);
  return out;
}

const ReferenceKernel& require_reference(const OpDef& def) {
  if (!def.reference) {
    raise(ErrorCode::Compile, "op '" + def.name + "' has no reference kernel; it cannot run on the reference executor");
  }
  return def.reference;
}

AttrMap complete_attrs(const OpDef& def, AttrMap attrs) {
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = def.find_attr(name);
    if (!spec) {
      std::vector<std::string_view> names;
      for (const auto& a : def.attrs) names.push_back(a.name);
      std::string hint = closest_match(name, names);
      raise(ErrorCode::ArgumentInvalid, "'" + def.name + "' has no attribute '" + name + "'" +
                                            (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    AttrKind got = kind_of(value);
    bool ok = got == spec->kind ||
              std::find(spec->other_kinds.begin(), spec->other_kinds.end(), got) != spec->other_kinds.end();
    // An integer literal is accepted where a float is expected.
    if (!ok && spec->kind == AttrKind::real && got == AttrKind::integer) {
      attrs.set(name, static_cast<double>(std::get<std::int64_t>(value)));
      ok = true;
    }
    if (!ok && spec->kind == AttrKind::real_list && got == AttrKind::int_list) {
      const auto& ints = std::get<std::vector<std::int64_t>>(value);
      attrs.set(name, std::vector<double>(ints.begin(), ints.end()));
      ok = true;
    }
    if (!ok) {
      raise(ErrorCode::ArgumentInvalid, "'" + def.name + "' attribute '" + name + "' must be a " +
                                            std::string(attr_kind_name(spec->kind)) + ", got a " +
                                            std::string(attr_kind_name(got)));
    }
  }
  for (const auto& spec : def.attrs) {
    if (attrs.has(spec.name)) continue;
    if (spec.default_value) {
      attrs.set(spec.name, *spec.default_value);
    } else if (spec.required) {
      raise(ErrorCode::ArgumentInvalid,
            "'" + def.name + "' needs attribute '" + spec.name + "' (" + std::string(attr_kind_name(spec.kind)) + ")");
    }
  }
  return attrs;
}

}  // namespace tessera::ir
