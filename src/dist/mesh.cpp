// Device meshes (tessera/dist/mesh.h).
#include "tessera/dist/mesh.h"

#include <cstdlib>
#include <set>

#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::dist {
namespace {

// "cpu:N" / "cuda:N" -> (kind, N); nullopt-like (-1) for other text.
std::pair<std::string, std::int64_t> split_device(const std::string& device) {
  const std::size_t colon = device.find(':');
  if (colon == std::string::npos || colon + 1 == device.size()) return {device, -1};
  const std::string kind = device.substr(0, colon);
  std::int64_t n = 0;
  for (std::size_t i = colon + 1; i < device.size(); ++i) {
    const char c = device[i];
    if (c < '0' || c > '9' || n > 1'000'000) return {device, -1};
    n = n * 10 + (c - '0');
  }
  return {kind, n};
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::int64_t virtual_cuda_devices() {
  const char* v = std::getenv("TESSERA_VIRTUAL_DEVICES");
  if (v == nullptr || *v == '\0') return 0;
  const auto [kind, n] = split_device(v);
  if (kind != "cuda" || n < 1) {
    raise(ErrorCode::ArgumentInvalid, std::string("TESSERA_VIRTUAL_DEVICES is '") + v +
                                          "'; expected cuda:N with N >= 1 (cuda:0 .. cuda:N-1 become virtual devices "
                                          "backed by the CPU)");
  }
  return n;
}

std::string memory_device(const std::string& device) {
  const auto [kind, n] = split_device(device);
  if (kind == "cpu" && n >= 0) return "cpu";
  if (kind == "cuda" && n >= 0) {
    const std::int64_t virtual_count = virtual_cuda_devices();
    if (virtual_count > 0) {
      if (n < virtual_count) return "cpu";
      raise(ErrorCode::Device, "device '" + device + "' is not among the " + std::to_string(virtual_count) +
                                   " virtual devices TESSERA_VIRTUAL_DEVICES=cuda:" + std::to_string(virtual_count) +
                                   " provides");
    }
    const int real = cuda::available() ? cuda::device_count() : 0;
    if (n < real) return "cuda:" + std::to_string(n);
    raise(ErrorCode::Device, "device '" + device + "' is not available: this machine has " + std::to_string(real) +
                                 " CUDA device(s)" +
                                 (real == 0 ? " (" + cuda::unavailable_reason() + ")" : std::string()) +
                                 "; use cpu:N virtual devices, or set TESSERA_VIRTUAL_DEVICES=cuda:K to run a program "
                                 "written for K GPUs on the CPU");
  }
  raise(ErrorCode::Device, "unknown device '" + device + "'; mesh devices are \"cpu:N\" or \"cuda:N\"");
}

Mesh::Mesh(std::vector<std::string> devices, std::vector<std::string> axes, std::vector<std::int64_t> shape)
    : devices_(std::move(devices)), axes_(std::move(axes)), shape_(std::move(shape)) {
  if (axes_.size() != shape_.size()) {
    raise(ErrorCode::ArgumentInvalid, "mesh: " + std::to_string(axes_.size()) + " axis name(s) (" + join(axes_) +
                                          ") but a shape of " + std::to_string(shape_.size()) + " dim(s)");
  }
  if (axes_.empty()) raise(ErrorCode::ArgumentInvalid, "mesh: needs at least one axis");
  std::set<std::string> seen_axes;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].empty()) raise(ErrorCode::ArgumentInvalid, "mesh: axis " + std::to_string(i) + " has an empty name");
    if (!seen_axes.insert(axes_[i]).second) {
      raise(ErrorCode::ArgumentInvalid, "mesh: axis name '" + axes_[i] + "' appears twice in (" + join(axes_) + ")");
    }
    if (shape_[i] < 1) {
      raise(ErrorCode::ArgumentInvalid,
            "mesh: axis '" + axes_[i] + "' has size " + std::to_string(shape_[i]) + "; sizes must be >= 1");
    }
    count *= shape_[i];
  }
  if (count != static_cast<std::int64_t>(devices_.size())) {
    std::string s;
    for (std::size_t i = 0; i < shape_.size(); ++i) s += (i ? " x " : "") + std::to_string(shape_[i]);
    raise(ErrorCode::ArgumentInvalid, "mesh: shape " + s + " holds " + std::to_string(count) + " device(s) but " +
                                          std::to_string(devices_.size()) + " were given");
  }
  std::set<std::string> seen;
  for (const std::string& d : devices_) {
    if (!seen.insert(d).second) raise(ErrorCode::ArgumentInvalid, "mesh: device '" + d + "' appears twice");
    (void)memory_device(d);  // raises for unknown devices
  }
}

std::size_t Mesh::axis_index(std::string_view axis) const {
  for (std::size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i] == axis) return i;
  raise(ErrorCode::ArgumentInvalid,
        "mesh axis '" + std::string(axis) + "' is not an axis of " + describe() + " (axes: " + join(axes_) + ")");
}

std::vector<std::int64_t> Mesh::coords(std::size_t rank) const {
  std::vector<std::int64_t> c(shape_.size());
  auto r = static_cast<std::int64_t>(rank);
  for (std::size_t d = shape_.size(); d-- > 0;) {
    c[d] = r % shape_[d];
    r /= shape_[d];
  }
  return c;
}

std::size_t Mesh::rank_of(const std::vector<std::int64_t>& coords) const {
  std::int64_t r = 0;
  for (std::size_t d = 0; d < shape_.size(); ++d) r = r * shape_[d] + coords[d];
  return static_cast<std::size_t>(r);
}

std::vector<std::size_t> Mesh::axis_group(std::string_view axis, std::size_t rank) const {
  const std::size_t a = axis_index(axis);
  std::vector<std::int64_t> c = coords(rank);
  std::vector<std::size_t> group;
  for (std::int64_t i = 0; i < shape_[a]; ++i) {
    c[a] = i;
    group.push_back(rank_of(c));
  }
  return group;
}

std::string Mesh::describe() const {
  std::string s = "mesh(";
  for (std::size_t i = 0; i < axes_.size(); ++i) s += (i ? ", " : "") + axes_[i] + "=" + std::to_string(shape_[i]);
  s += ") over " + devices_.front();
  if (devices_.size() > 1) s += (devices_.size() > 2 ? ".." : ", ") + devices_.back();
  return s;
}

}  // namespace tessera::dist
