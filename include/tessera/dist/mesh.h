// A device mesh: devices arranged in a row-major grid with named axes
// (shared/ARCHITECTURE.md decision 8; docs/design/0006-distribution.md).
//
// Devices are "cpu:N" (virtual CPU devices: each is a worker with its own
// host memory, as many as asked for) or "cuda:N". A cuda:N device is real
// when the machine has GPU N; with TESSERA_VIRTUAL_DEVICES=cuda:K in the
// environment, cuda:0 .. cuda:K-1 are virtual devices backed by the CPU
// instead, so programs written for a rack run anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::dist {

// The number of virtual cuda devices TESSERA_VIRTUAL_DEVICES asks for (0:
// none). A malformed value is an ArgumentError naming the variable.
std::int64_t virtual_cuda_devices();

// Where a mesh device keeps its memory: "cpu" for virtual devices, the
// device itself ("cuda:N") for a real GPU. DeviceError for a name that is
// neither (with what is available).
std::string memory_device(const std::string& device);

class Mesh {
 public:
  // Raises ArgumentError (a bad mesh): shape and device count disagree,
  // duplicate devices, empty / duplicate axis names, axes and shape of
  // different lengths, sizes below 1; DeviceError for an unknown device.
  Mesh(std::vector<std::string> devices, std::vector<std::string> axes, std::vector<std::int64_t> shape);

  const std::vector<std::string>& devices() const { return devices_; }
  const std::vector<std::string>& axes() const { return axes_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t size() const { return devices_.size(); }

  // Position of `axis` in axes(); ArgumentError naming the mesh's axes when absent.
  std::size_t axis_index(std::string_view axis) const;
  std::int64_t axis_size(std::string_view axis) const { return shape_[axis_index(axis)]; }
  // Row-major coordinates of device `rank` (its index in devices()) and back.
  std::vector<std::int64_t> coords(std::size_t rank) const;
  std::size_t rank_of(const std::vector<std::int64_t>& coords) const;
  // The ranks that differ from `rank` only along `axis`, by coordinate.
  std::vector<std::size_t> axis_group(std::string_view axis, std::size_t rank) const;
  // "mesh(dp=2, tp=4) over cpu:0..cpu:7" for messages.
  std::string describe() const;

 private:
  std::vector<std::string> devices_;
  std::vector<std::string> axes_;
  std::vector<std::int64_t> shape_;
};

}  // namespace tessera::dist
