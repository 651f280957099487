// The autotuner's cache key (include/tessera/runtime/kernel.h): the device is
// part of it, so choices made on the CPU and on a GPU, or on two different
// GPUs, never mix. Needs no GPU: device descriptions are built here by hand
// and GPU tensors are device tensors adopted from addresses never touched.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/kernel.h"
#include "tessera/runtime/tensor.h"

namespace tessera {
namespace {

constexpr const char* kAddScaled = R"(
@kernel.autotune(space=dict(U=[1, 2, 3]))
def add_scaled(x: f32[n], y: mut f32[n], a: f32):
    i = tile.linear_id()
    if i < n:
        y[i] = y[i] + a * x[i] * f32(U)
)";

Tensor host_vec(std::int64_t n) {
  return Tensor::zeros({n}, default_policy(DType::fp32));
}

// A tensor that claims to live on cuda:0; only its shape and dtype are read.
Tensor fake_device_vec(std::int64_t n) {
  static float never_read[1];
  return Tensor::wrap_device(never_read, {n}, {1}, default_policy(DType::fp32), "cuda:0", nullptr);
}

cuda::DeviceProperties gpu(const std::string& name, int major, int minor, int sms) {
  cuda::DeviceProperties p;
  p.name = name;
  p.compute_major = major;
  p.compute_minor = minor;
  p.multiprocessors = sms;
  return p;
}

// Everything before " device=": the arguments' part of a key.
std::string args_part(const std::string& key) {
  return key.substr(0, key.rfind(" device="));
}

TEST(AutotuneKey, GpuDeviceTextNamesTheChipArchitectureAndMultiprocessors) {
  EXPECT_EQ(autotune_cuda_device(gpu("NVIDIA H100 80GB HBM3", 9, 0, 132)), "cuda:NVIDIA H100 80GB HBM3 sm_90a sms=132");
  EXPECT_EQ(autotune_cuda_device(gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108)), "cuda:NVIDIA A100-SXM4-80GB sm_80 sms=108");
  KernelLaunchOptions options;
  options.cpu.num_threads = 3;
  const std::string cpu = autotune_cpu_device(options);
  EXPECT_EQ(cpu.rfind("cpu:", 0), 0u) << cpu;
  EXPECT_EQ(cpu.substr(cpu.size() - 10), " threads=3") << cpu;
}

TEST(AutotuneKey, CpuAndGpuKeysDifferOnlyInTheDevice) {
  const Kernel k = kernels_from_source(kAddScaled, "add.tsr")[0];
  KernelLaunchOptions options;
  options.cpu.num_threads = 2;
  const std::vector<cpu::KernelArg> host = {host_vec(1000), host_vec(1000), 0.5};
  const std::vector<cpu::KernelArg> dev = {fake_device_vec(1000), fake_device_vec(1000), 0.5};
  const std::string h100 = autotune_cuda_device(gpu("NVIDIA H100 80GB HBM3", 9, 0, 132));
  const std::string h200 = autotune_cuda_device(gpu("NVIDIA H200", 9, 0, 132));

  const std::string cpu_key = autotune_key(k, host, options);
  EXPECT_EQ(cpu_key, autotune_key_on(k, host, autotune_cpu_device(options)));
  const std::string gpu_key = autotune_key_on(k, dev, h100);
  EXPECT_NE(cpu_key, gpu_key);
  EXPECT_EQ(args_part(cpu_key), args_part(gpu_key));  // same shapes and dtypes wherever they live
  EXPECT_EQ(args_part(cpu_key),
            "kernel=add_scaled source=" + k.source_hash() + " fixed={} args=(fp32[1000], " + "fp32[1000], real)");
  EXPECT_EQ(gpu_key.substr(gpu_key.size() - h100.size() - 8), " device=" + h100);
  // Two GPU models, and two partitions of one model, are different devices.
  EXPECT_NE(gpu_key, autotune_key_on(k, dev, h200));
  EXPECT_NE(gpu_key, autotune_key_on(k, dev, autotune_cuda_device(gpu("NVIDIA H100 80GB HBM3", 9, 0, 16))));
  // The CPU thread count is the CPU's part; a GPU key does not depend on it.
  KernelLaunchOptions four = options;
  four.cpu.num_threads = 4;
  EXPECT_NE(cpu_key, autotune_key(k, host, four));
  // Shapes still count on the GPU.
  EXPECT_NE(gpu_key, autotune_key_on(k, {fake_device_vec(999), fake_device_vec(999), 0.5}, h100));
}

TEST(AutotuneKey, KeyForGpuArgumentsAsksTheirDevice) {
  const Kernel k = kernels_from_source(kAddScaled, "add.tsr")[0];
  const std::vector<cpu::KernelArg> dev = {fake_device_vec(8), fake_device_vec(8), 0.5};
  if (cuda::available()) {
    EXPECT_EQ(autotune_key(k, dev, {}), autotune_key_on(k, dev, autotune_cuda_device(cuda::device_properties(0))));
  } else {
    // No device to describe: a DeviceError saying why, not a CPU key.
    EXPECT_THROW(autotune_key(k, dev, {}), DeviceError);
  }
  // Arguments on two devices have no key.
  EXPECT_THROW(autotune_key(k, {host_vec(8), fake_device_vec(8), 0.5}, {}), ArgumentError);
}

TEST(AutotuneKey, SearchOnGpuArgumentsWithoutAGpuIsADeviceError) {
  if (cuda::available()) GTEST_SKIP() << "the adopted addresses are not device memory";
  const Kernel k = kernels_from_source(kAddScaled, "add.tsr")[0];
  std::vector<AutotuneEvent> events;
  KernelLaunchOptions options;
  options.progress = [&](const AutotuneEvent& e) { events.push_back(e); };
  EXPECT_THROW(k.autotune(std::int64_t{-1}, {fake_device_vec(8), fake_device_vec(8), 0.5}, options), DeviceError);
  EXPECT_THROW(k.launch(std::int64_t{-1}, {fake_device_vec(8), fake_device_vec(8), 0.5}, options), DeviceError);
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace tessera
