// Layouts of distributed tensors (tessera/dist/layout.h).
#include "tessera/dist/layout.h"

#include <algorithm>
#include <set>

#include "tessera/support/error.h"

namespace tessera::dist {

Run block_part(std::int64_t n, std::int64_t p, std::int64_t q) {
  const std::int64_t base = n / p, rem = n % p;
  return {q * base + std::min(q, rem), base + (q < rem ? 1 : 0)};
}

Layout Layout::replicated(std::size_t rank) {
  Layout l;
  l.dims_.resize(rank);
  return l;
}

Layout Layout::resolve(const ShardSpec& spec, std::size_t rank, const Mesh& mesh) {
  if (spec.partition.size() != spec.mesh_axes.size()) {
    raise(ErrorCode::ArgumentInvalid, "ShardSpec: partition names " + std::to_string(spec.partition.size()) +
                                          " dim(s) but mesh_axes names " + std::to_string(spec.mesh_axes.size()) +
                                          " axis(es); they pair up one to one");
  }
  if (spec.cyclic_block < 0) {
    raise(ErrorCode::ArgumentInvalid, "Cyclic: block must be >= 1, got " + std::to_string(spec.cyclic_block));
  }
  Layout l = replicated(rank);
  std::set<std::string> used;
  auto use = [&](const std::string& axis) {
    (void)mesh.axis_index(axis);  // raises for an unknown axis
    if (!used.insert(axis).second) {
      raise(ErrorCode::ArgumentInvalid, "ShardSpec: mesh axis '" + axis + "' is used twice");
    }
  };
  for (std::size_t i = 0; i < spec.partition.size(); ++i) {
    const std::string& p = spec.partition[i];
    std::int64_t d = 0;
    if (p == "row") {
      d = 0;
    } else if (p == "col") {
      d = static_cast<std::int64_t>(rank) - 1;
    } else {
      std::size_t used_chars = 0;
      try {
        d = std::stoll(p, &used_chars);
      } catch (const std::exception&) {
        used_chars = 0;
      }
      if (used_chars != p.size() || p.empty()) {
        raise(ErrorCode::ArgumentInvalid,
              "ShardSpec: partition entry '" + p + "' is not \"row\", \"col\" or a dim number");
      }
      if (d < 0) d += static_cast<std::int64_t>(rank);
    }
    if (rank == 0 || d < 0 || d >= static_cast<std::int64_t>(rank)) {
      raise(ErrorCode::ArgumentInvalid, "ShardSpec: partition entry '" + p + "' is out of range for a tensor of " +
                                            std::to_string(rank) + " dim(s)");
    }
    use(spec.mesh_axes[i]);
    l.dims_[static_cast<std::size_t>(d)].mesh_axes.push_back(spec.mesh_axes[i]);
    l.dims_[static_cast<std::size_t>(d)].cyclic_block = spec.cyclic_block;
  }
  for (const std::string& a : spec.partial) {
    use(a);
    l.partial_.push_back(a);
  }
  return l;
}

Layout Layout::without_partial() const {
  Layout l = *this;
  l.partial_.clear();
  return l;
}

bool Layout::splits(const std::string& axis) const {
  return std::any_of(dims_.begin(), dims_.end(), [&](const DimPlacement& d) {
    return std::find(d.mesh_axes.begin(), d.mesh_axes.end(), axis) != d.mesh_axes.end();
  });
}

std::int64_t Layout::parts(std::size_t d, const Mesh& mesh) const {
  std::int64_t p = 1;
  for (const std::string& a : dims_[d].mesh_axes) p *= mesh.axis_size(a);
  return p;
}

std::int64_t Layout::part_index(std::size_t d, const Mesh& mesh, std::size_t rank) const {
  const std::vector<std::int64_t> c = mesh.coords(rank);
  std::int64_t q = 0;
  for (const std::string& a : dims_[d].mesh_axes) {
    const std::size_t ai = mesh.axis_index(a);
    q = q * mesh.shape()[ai] + c[ai];
  }
  return q;
}

std::vector<Run> Layout::runs(std::size_t d, std::int64_t n, const Mesh& mesh, std::size_t rank) const {
  const std::int64_t p = parts(d, mesh);
  const std::int64_t q = part_index(d, mesh, rank);
  const std::int64_t b = dims_[d].cyclic_block;
  if (p == 1) return {{0, n}};
  if (b == 0) return {block_part(n, p, q)};
  std::vector<Run> out;
  for (std::int64_t start = q * b; start < n; start += p * b) out.push_back({start, std::min(b, n - start)});
  return out;
}

std::vector<std::int64_t> Layout::shard_shape(const std::vector<std::int64_t>& global, const Mesh& mesh,
                                              std::size_t rank) const {
  std::vector<std::int64_t> s;
  for (std::size_t d = 0; d < global.size(); ++d) {
    std::int64_t n = 0;
    for (const Run& r : runs(d, global[d], mesh, rank)) n += r.length;
    s.push_back(n);
  }
  return s;
}

std::string Layout::describe() const {
  std::string s = "[";
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    if (d) s += ", ";
    if (dims_[d].mesh_axes.empty()) {
      s += "-";
    } else {
      for (std::size_t i = 0; i < dims_[d].mesh_axes.size(); ++i) s += (i ? "*" : "") + dims_[d].mesh_axes[i];
      if (dims_[d].cyclic_block > 0) s += " cyclic(" + std::to_string(dims_[d].cyclic_block) + ")";
    }
  }
  s += "]";
  if (!partial_.empty()) {
    s += " partial(";
    for (std::size_t i = 0; i < partial_.size(); ++i) s += (i ? ", " : "") + partial_[i];
    s += ")";
  }
  return s;
}

}  // namespace tessera::dist
