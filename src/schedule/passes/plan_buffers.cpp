// schedule-plan-buffers: gives every kernel result a buffer slot.
//
// - A result the function returns gets -1: its own allocation, handed to
//   the caller.
// - Other results take a slot whose previous values are all dead and whose
//   type (shape, symbols included, and policy) is identical, else a new slot.
//   Slots are numbered from 0 in order of first use.
// - In place: an elementwise kernel writes a result into the slot of an
//   input that dies at this kernel when both have the same type (lane i
//   reads element i of that input before it writes element i, and no other
//   lane touches element i).
// - A view or constant kernel's result has no slot of its own (-1); a view
//   keeps its source's slot alive for as long as the view is used.
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "tessera/schedule/passes.h"
#include "tessera/schedule/schedule_dialect.h"

namespace tessera::schedule {

void plan_buffers(ir::Operation& func) {
  const std::vector<ir::Operation*> kernels = kernels_of(func);
  std::unordered_map<const ir::Operation*, std::size_t> position;
  for (std::size_t i = 0; i < kernels.size(); ++i) position[kernels[i]] = i;
  const std::size_t end = kernels.size();  // the return

  // The value whose storage a value uses (itself, or a view's source).
  std::unordered_map<const ir::Value*, const ir::Value*> root;
  auto root_of = [&](const ir::Value* v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  // Whether v reads its root's storage at the positions a kernel over v
  // writes: the root itself, or reshapes and identities of it.
  std::function<bool(const ir::Value*)> keeps_positions = [&](const ir::Value* v) {
    const ir::Operation* d = v->defining_op();
    if (!d || !is_kernel_op(*d) || kernel_family(*d) != Family::view) return true;
    const std::string_view op = kernel_root_op(*d).name();
    if (op != "graph.reshape" && op != "graph.stop_gradient") return false;
    return keeps_positions(d->operand(0));
  };
  // Last kernel (or the return) reading each root's storage.
  std::unordered_map<const ir::Value*, std::size_t> last_use;
  for (ir::Operation* k : kernels) {
    if (kernel_family(*k) == Family::view) {
      for (ir::Value* r : k->results()) root[r] = root_of(k->operand(0));
    }
  }
  for (ir::Operation* k : kernels) {
    for (ir::Value* v : k->results()) {
      for (const ir::Use& use : v->uses()) {
        const std::size_t at = position.count(use.user) ? position[use.user] : end;
        auto& last = last_use[root_of(v)];
        last = std::max(last, at);
      }
    }
  }

  // Storage handed to the caller: returned values and the sources of returned views.
  std::unordered_set<const ir::Value*> escapes;
  for (ir::Operation* k : kernels) {
    for (ir::Value* v : k->results()) {
      for (const ir::Use& use : v->uses()) {
        if (!position.count(use.user)) escapes.insert(root_of(v));
      }
    }
  }

  std::vector<ir::Type> slot_type;
  std::vector<std::size_t> busy_until;  // per slot: the last kernel reading what it holds
  std::unordered_map<const ir::Value*, std::int64_t> slot_of;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    ir::Operation* k = kernels[i];
    const Family family = kernel_family(*k);
    // Slots whose contents die at this kernel may take its results in place.
    std::vector<std::int64_t> dying;
    if (family == Family::elementwise) {
      for (ir::Value* v : k->operands()) {
        if (!keeps_positions(v)) continue;  // a slice or transpose reads other positions than it writes
        auto it = slot_of.find(root_of(v));
        if (it != slot_of.end() && busy_until[static_cast<std::size_t>(it->second)] == i &&
            std::find(dying.begin(), dying.end(), it->second) == dying.end()) {
          dying.push_back(it->second);
        }
      }
    }
    std::vector<std::int64_t> slots;
    for (ir::Value* r : k->results()) {
      std::int64_t slot = -1;
      const bool own_storage = family != Family::view && family != Family::constant;
      if (own_storage && !escapes.count(r)) {
        for (auto d = dying.begin(); slot < 0 && d != dying.end(); ++d) {
          if (slot_type[static_cast<std::size_t>(*d)] == r->type()) {
            slot = *d;
            dying.erase(d);
          }
        }
        for (std::size_t s = 0; slot < 0 && s < slot_type.size(); ++s) {
          if (busy_until[s] < i && slot_type[s] == r->type()) slot = static_cast<std::int64_t>(s);
        }
        if (slot < 0) {
          slot = static_cast<std::int64_t>(slot_type.size());
          slot_type.push_back(r->type());
          busy_until.push_back(0);
        }
        slot_of[r] = slot;
        busy_until[static_cast<std::size_t>(slot)] = std::max(last_use[r], i);
      }
      slots.push_back(slot);
    }
    k->attrs().set("buffers", slots);
  }
}

}  // namespace tessera::schedule
