// How a distributed tensor is laid out over a mesh
// (docs/design/0006-distribution.md).
//
// Per tensor dim: split over some mesh axes, or whole on every device
// (replicated along the mesh axes that split no dim). A tensor may also be
// partial over mesh axes: each device along them holds a term of a pending
// sum, and the value is their sum (in rank order).
//
// Uneven splits follow numpy.array_split: n elements over P parts give the
// first n % P parts n / P + 1 elements and the rest n / P, in order. A
// cyclic dim deals blocks of `block` elements round-robin: block j goes to
// part j % P. A dim split over several mesh axes numbers its parts
// mixed-radix, the first listed axis major.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/dist/mesh.h"

namespace tessera::dist {

// What users write (tessera.dist.ShardSpec): `partition` names tensor dims,
// "row" (dim 0), "col" (the last dim) or an integer (negative from the end),
// each split over the mesh axis at the same position of `mesh_axes`; a dim
// named twice is split over both axes, the first major. `partial` lists mesh
// axes over which the tensor is a pending sum. `cyclic_block` > 0 deals the
// split dims' elements round-robin in blocks of that size (Cyclic).
struct ShardSpec {
  std::vector<std::string> partition;
  std::vector<std::string> mesh_axes;
  std::vector<std::string> partial;
  std::int64_t cyclic_block = 0;
};

struct DimPlacement {
  std::vector<std::string> mesh_axes;  // empty: the whole dim on every device
  std::int64_t cyclic_block = 0;       // 0: contiguous blocks
  bool operator==(const DimPlacement&) const = default;
};

// A run of consecutive elements of a global dim held by one device: global
// start and length (the shard holds its runs one after another).
struct Run {
  std::int64_t start;
  std::int64_t length;
};

class Layout {
 public:
  Layout() = default;
  // Every dim whole on every device.
  static Layout replicated(std::size_t rank);
  // `spec` for a tensor of `rank` dims on `mesh`. ArgumentError for an
  // unknown mesh axis, a mesh axis used twice (or both splitting and
  // partial), a dim out of range, or partition and mesh_axes of different
  // lengths.
  static Layout resolve(const ShardSpec& spec, std::size_t rank, const Mesh& mesh);

  std::size_t rank() const { return dims_.size(); }
  const std::vector<DimPlacement>& dims() const { return dims_; }
  const std::vector<std::string>& partial() const { return partial_; }
  bool is_partial() const { return !partial_.empty(); }
  // The same layout with no pending sum (what a sum over the partial axes gives).
  Layout without_partial() const;
  // Whether some dim is split over `axis`.
  bool splits(const std::string& axis) const;

  // Parts along dim d, and the part device `rank` holds.
  std::int64_t parts(std::size_t d, const Mesh& mesh) const;
  std::int64_t part_index(std::size_t d, const Mesh& mesh, std::size_t rank) const;
  // The elements of dim d (global size n) that device `rank` holds.
  std::vector<Run> runs(std::size_t d, std::int64_t n, const Mesh& mesh, std::size_t rank) const;
  std::vector<std::int64_t> shard_shape(const std::vector<std::int64_t>& global, const Mesh& mesh,
                                        std::size_t rank) const;
  // "[tp, -] partial(dp)" for messages: each dim's axes ("-" when whole).
  std::string describe() const;
  bool operator==(const Layout&) const = default;

 private:
  std::vector<DimPlacement> dims_;
  std::vector<std::string> partial_;
};

// numpy.array_split's part q of n elements over p parts: (start, length).
Run block_part(std::int64_t n, std::int64_t p, std::int64_t q);

}  // namespace tessera::dist
