// Run-time compilation with NVRTC, opened with dlopen on first use.
//
// Sources are compiled for the device's exact architecture (sm_90a on
// Hopper, so wgmma and the tensor copy engine are available) to a cubin the
// driver loads without a further JIT step; PTX is produced on request for
// inspection. The embedded device headers are handed to NVRTC by name, so
// kernels `#include "tessera/numerics.cuh"` without any file on disk.
#include <dlfcn.h>

#include <mutex>
#include <utility>
#include <vector>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {
namespace detail {

const std::vector<std::pair<std::string_view, std::string_view>>& embedded_headers();

namespace {

struct LoadedNvrtc {
  NvrtcApi api{};
  std::string failure;
};

template <typename Fn>
void resolve(void* library, Fn& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

const LoadedNvrtc& loaded() {
  static const LoadedNvrtc* state = [] {
    auto* s = new LoadedNvrtc();  // stays loaded for the process, like the driver
    const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    void* library = open_library(names, 3, s->api.library, s->failure);
    if (library == nullptr) {
      s->failure = "NVRTC is unavailable: " + s->failure;
      return s;
    }
    NvrtcApi& a = s->api;
    std::string missing;
    resolve(library, a.nvrtcGetErrorString, "nvrtcGetErrorString", missing);
    resolve(library, a.nvrtcVersion, "nvrtcVersion", missing);
    resolve(library, a.nvrtcCreateProgram, "nvrtcCreateProgram", missing);
    resolve(library, a.nvrtcDestroyProgram, "nvrtcDestroyProgram", missing);
    resolve(library, a.nvrtcCompileProgram, "nvrtcCompileProgram", missing);
    resolve(library, a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", missing);
    resolve(library, a.nvrtcGetProgramLog, "nvrtcGetProgramLog", missing);
    resolve(library, a.nvrtcGetPTXSize, "nvrtcGetPTXSize", missing);
    resolve(library, a.nvrtcGetPTX, "nvrtcGetPTX", missing);
    resolve(library, a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", missing);
    resolve(library, a.nvrtcGetCUBIN, "nvrtcGetCUBIN", missing);
    if (!missing.empty()) s->failure = "NVRTC is unavailable: " + a.library + " lacks " + missing;
    return s;
  }();
  return *state;
}

// Owns one nvrtcProgram.
class Program {
 public:
  Program(const NvrtcApi& api, std::string_view source, std::string_view name) : api_(api) {
    const auto& headers = embedded_headers();
    std::vector<std::string> texts, names;
    for (const auto& [header_name, text] : headers) {
      names.emplace_back(header_name);
      texts.emplace_back(text);
    }
    std::vector<const char*> text_ptrs, name_ptrs;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      text_ptrs.push_back(texts[i].c_str());
      name_ptrs.push_back(names[i].c_str());
    }
    const std::string src(source), file(name);
    check(api.nvrtcCreateProgram(&program_, src.c_str(), file.c_str(), static_cast<int>(texts.size()), text_ptrs.data(),
                                 name_ptrs.data()),
          "nvrtcCreateProgram");
  }
  ~Program() {
    if (program_) api_.nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Compiles; returns NVRTC's result and fills `log`.
  int compile(const std::vector<std::string>& options, std::string& log) {
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    const int rc = api_.nvrtcCompileProgram(program_, static_cast<int>(argv.size()), argv.data());
    std::size_t size = 0;
    if (api_.nvrtcGetProgramLogSize(program_, &size) == 0 && size > 1) {
      log.assign(size, '\0');
      api_.nvrtcGetProgramLog(program_, log.data());
      log.resize(size - 1);
    }
    return rc;
  }
  nvrtcProgram get() const { return program_; }
  void check(int rc, const char* what) const {
    if (rc != 0) raise(ErrorCode::Compile, std::string(what) + " failed: " + api_.nvrtcGetErrorString(rc));
  }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

std::vector<std::string> options_for(const std::string& arch, const CompileOptions& options, bool virtual_arch) {
  std::vector<std::string> argv = {"--gpu-architecture=" + (virtual_arch ? "compute_" + arch.substr(3) : arch),
                                   "--std=c++17", "--device-as-default-execution-space"};
  if (options.line_info) argv.emplace_back("--generate-line-info");
  for (const std::string& e : options.extra) argv.push_back(e);
  return argv;
}

}  // namespace

const NvrtcApi& nvrtc() {
  const LoadedNvrtc& s = loaded();
  if (!s.failure.empty()) raise(ErrorCode::DeviceUnavailable, s.failure);
  return s.api;
}

}  // namespace detail

using namespace detail;

int nvrtc_version() {
  int major = 0, minor = 0;
  if (int rc = nvrtc().nvrtcVersion(&major, &minor); rc != 0) {
    raise(ErrorCode::Device, std::string("nvrtcVersion failed: ") + nvrtc().nvrtcGetErrorString(rc));
  }
  return major * 1000 + minor * 10;
}

std::string nvrtc_library() {
  return nvrtc().library;
}

std::string_view device_header(std::string_view name) {
  for (const auto& [header_name, text] : embedded_headers()) {
    if (header_name == name) return text;
  }
  std::string known;
  for (const auto& entry : embedded_headers()) known += (known.empty() ? "" : ", ") + std::string(entry.first);
  raise(ErrorCode::ArgumentInvalid, "no embedded device header '" + std::string(name) + "'; the headers are " + known);
}

std::vector<std::string> device_header_names() {
  std::vector<std::string> names;
  for (const auto& entry : embedded_headers()) names.emplace_back(entry.first);
  return names;
}

CompiledProgram compile(std::string_view source, std::string_view name, int device, const CompileOptions& options) {
  const NvrtcApi& api = nvrtc();
  CompiledProgram out;
  out.arch = options.arch.empty() ? device_properties(device).arch() : options.arch;
  if (out.arch.rfind("sm_", 0) != 0) {
    raise(ErrorCode::ArgumentInvalid,
          "CompileOptions.arch must name a real architecture such as sm_90a, not '" + out.arch + "'");
  }
  {
    Program program(api, source, name);
    const int rc = program.compile(options_for(out.arch, options, false), out.log);
    if (rc != 0) {
      raise(ErrorCode::Compile, "NVRTC could not compile '" + std::string(name) + "' for " + out.arch + " (" +
                                    api.nvrtcGetErrorString(rc) + "):\n" + out.log);
    }
    std::size_t size = 0;
    program.check(api.nvrtcGetCUBINSize(program.get(), &size), "nvrtcGetCUBINSize");
    out.cubin.resize(size);
    program.check(api.nvrtcGetCUBIN(program.get(), out.cubin.data()), "nvrtcGetCUBIN");
  }
  if (options.ptx) {
    // A real-architecture compile yields SASS only; the PTX comes from a second
    // pass for the matching virtual architecture.
    Program program(api, source, name);
    std::string log;
    program.check(program.compile(options_for(out.arch, options, true), log), "NVRTC PTX compilation");
    std::size_t size = 0;
    program.check(api.nvrtcGetPTXSize(program.get(), &size), "nvrtcGetPTXSize");
    out.ptx.assign(size, '\0');
    program.check(api.nvrtcGetPTX(program.get(), out.ptx.data()), "nvrtcGetPTX");
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  return out;
}

}  // namespace tessera::cuda
