// Helpers shared by the sharding rules of the op families
// (tessera/dist/sharding.h; docs/design/0007-sharding.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/dist/sharding.h"
#include "tessera/ir/ir.h"

namespace tessera::dist::rules {

using ir::Sharding;

// One registration function per op family; the registry calls them all once.
void register_elementwise_sharding();
void register_reduction_sharding();
void register_linalg_sharding();
void register_normalization_sharding();
void register_shape_sharding();
void register_creation_sharding();
void register_library_sharding();

// Global static sizes of an operand or result.
std::vector<std::int64_t> sizes_of(const ir::Value* v);
// `axis` in [-rank, rank) made non-negative (ShapeError otherwise).
std::size_t axis_of(std::int64_t axis, std::size_t rank);

// A ShapeError: the rules cannot decide between the shardings of two
// operands (or of one operand's dims); names both and asks for a reshard.
[[noreturn]] void conflict(const ShardingQuery& q, std::size_t i, std::size_t j, const std::string& why);

// The same dims with no pending sum (what an op that needs full values asks for).
Sharding settled(Sharding s);
// Every dim whole, nothing pending.
inline Sharding replicated(std::size_t rank) { return Sharding::replicated(rank); }
// Whether `a` is split or pending in `s`.
bool uses_axis(const Sharding& s, const std::string& a);
// Whether two shardings have the same pending axes (as sets).
bool same_partial(const Sharding& a, const Sharding& b);

// Plans that every op of a family shares.
// All operands whole and settled, all results replicated: correct for any
// op, and what ops whose values depend on global positions (random
// numbers) or that no finer rule covers yet use.
ShardingPlan replicate_all(const ShardingQuery& q);
// Operands broadcast against each other (numpy rules) into results of the
// broadcast shape: a dim keeps the split its non-broadcast operands agree on;
// `forced_whole` (result dims) are made whole. When `linear` and every
// operand is pending over the same axes, the results stay pending.
ShardingPlan broadcast_plan(const ShardingQuery& q, bool linear, const std::vector<std::size_t>& forced_whole = {});

}  // namespace tessera::dist::rules
