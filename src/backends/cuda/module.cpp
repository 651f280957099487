// Loaded modules (cubin or PTX images), their functions and kernel launch.
#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

using namespace detail;

struct Module::Handle {
  int device = 0;
  CUmodule module = nullptr;
  ~Handle() {
    if (module == nullptr) return;
    try {  // a destructor must not throw
      use_device(device);
      driver().cuModuleUnload(module);
    } catch (...) {
    }
  }
};

Module Module::load_image(int device, const void* image) {
  if (image == nullptr) raise(ErrorCode::ArgumentInvalid, "Module::load_image: the image is null");
  use_device(device);
  auto handle = std::make_shared<Handle>();
  handle->device = device;
  check(driver().cuModuleLoadData(&handle->module, image), "cuModuleLoadData");
  Module m;
  m.device_ = device;
  m.handle_ = std::move(handle);
  return m;
}

Module Module::load(int device, const CompiledProgram& program) {
  if (!program.cubin.empty()) return load_image(device, program.cubin.data());
  if (!program.ptx.empty()) return load_image(device, program.ptx.c_str());
  raise(ErrorCode::ArgumentInvalid, "Module::load: the compiled program holds neither a cubin nor PTX");
}

Function Module::function(const std::string& name) const {
  if (!handle_) raise(ErrorCode::ArgumentInvalid, "Module::function('" + name + "') on a module that was never loaded");
  use_device(device_);
  CUfunction f = nullptr;
  const CUresult rc = driver().cuModuleGetFunction(&f, handle_->module, name.c_str());
  if (rc != kCudaSuccess) {
    raise(ErrorCode::Device, "the module has no kernel '" + name + "' (cuModuleGetFunction: " + error_text(rc) +
                                 "); kernels need extern \"C\" to keep their names");
  }
  Function fn;
  fn.module_ = handle_;
  fn.handle_ = f;
  fn.name_ = name;
  fn.device_ = device_;
  return fn;
}

void Function::set_max_dynamic_shared(int bytes) const {
  if (!handle_) raise(ErrorCode::ArgumentInvalid, "set_max_dynamic_shared on an empty Function");
  use_device(device_);
  check(driver().cuFuncSetAttribute(static_cast<CUfunction>(handle_), kFuncAttrMaxDynamicShared, bytes),
        ("cuFuncSetAttribute(max dynamic shared memory = " + std::to_string(bytes) + " bytes) for '" + name_ + "'")
            .c_str());
}

int Function::active_blocks_per_multiprocessor(int block_threads, std::size_t dynamic_shared) const {
  if (!handle_) raise(ErrorCode::ArgumentInvalid, "active_blocks_per_multiprocessor on an empty Function");
  use_device(device_);
  int blocks = 0;
  check(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, static_cast<CUfunction>(handle_), block_threads,
                                                              dynamic_shared),
        ("cuOccupancyMaxActiveBlocksPerMultiprocessor for '" + name_ + "'").c_str());
  return blocks;
}

void Function::launch(const LaunchConfig& c, void** args) const {
  if (!handle_) raise(ErrorCode::ArgumentInvalid, "launch of an empty Function");
  if (c.stream && c.stream->device() != device_) {
    raise(ErrorCode::ArgumentInvalid,
          "kernel '" + name_ + "' is loaded on cuda:" + std::to_string(device_) +
              " but was launched on a stream of cuda:" + std::to_string(c.stream->device()));
  }
  const auto zero = [](const Dim3& d) { return d.x == 0 || d.y == 0 || d.z == 0; };
  if (zero(c.grid) || zero(c.block)) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + name_ + "' launched with an empty grid or block (grid " +
                                          std::to_string(c.grid.x) + "x" + std::to_string(c.grid.y) + "x" +
                                          std::to_string(c.grid.z) + ", block " + std::to_string(c.block.x) + "x" +
                                          std::to_string(c.block.y) + "x" + std::to_string(c.block.z) + ")");
  }
  use_device(device_);
  CUstream stream = c.stream ? static_cast<CUstream>(c.stream->handle()) : nullptr;
  const CUresult rc = driver().cuLaunchKernel(static_cast<CUfunction>(handle_), c.grid.x, c.grid.y, c.grid.z,
                                              c.block.x, c.block.y, c.block.z, c.shared_bytes, stream, args, nullptr);
  // The message is built on failure only: this is every kernel launch's path.
  if (rc != kCudaSuccess) check(rc, ("cuLaunchKernel('" + name_ + "')").c_str());
}

}  // namespace tessera::cuda
