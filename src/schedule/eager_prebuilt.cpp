// The eager kernels compiled when Tessera is built (tessera/schedule/prebuild.h).
#include <atomic>
#include <filesystem>
#include <set>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/ir/dialect.h"
#include "tessera/schedule/eager.h"
#include "tessera/schedule/prebuild.h"
#include "tessera/support/error.h"

namespace tessera::schedule {
namespace {

using Sizes = std::vector<std::int64_t>;

struct Operand {
  Sizes shape;
  DType dtype;
};

struct Call {
  std::string op;
  std::vector<Operand> operands;
  ir::AttrMap attrs;
};

// Sizes 2, 3 and 4 are symbols in every pattern (only 0 and 1 stay fixed),
// so these small calls compile the same kernels as large ones.
std::vector<Call> common_calls() {
  std::vector<Call> calls;
  const DType f32 = DType::fp32;
  const std::vector<DType> floats = {DType::fp32, DType::bf16, DType::fp16};
  for (DType d : floats) {
    for (const char* op : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "sigmoid", "silu", "relu",
                           "gelu", "erf"}) {
      calls.push_back({op, {{{2}, d}}, {}});
    }
    // Same shapes (any rank collapses to one dim), a scalar on either side,
    // and for fp32 a row ([N, C] + [C]) and a column ([N, C] + [N, 1]) broadcast.
    std::vector<std::pair<Sizes, Sizes>> shapes = {{{2}, {2}}, {{2}, {}}, {{}, {2}}};
    if (d == f32) shapes.insert(shapes.end(), {{{2, 3}, {3}}, {{2, 3}, {2, 1}}});
    for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
      for (const auto& [a, b] : shapes) calls.push_back({op, {{a, d}, {b, d}}, {}});
    }
    for (const char* op : {"sum", "mean", "max", "min"}) {
      if (d != f32 && (std::string(op) == "max" || std::string(op) == "min")) continue;
      calls.push_back({op, {{{2}, d}}, {}});                                          // everything
      calls.push_back({op, {{{2, 3}, d}}, {{"axes", std::vector<std::int64_t>{1}}}});  // rows
      calls.push_back({op, {{{2, 3}, d}}, {{"axes", std::vector<std::int64_t>{0}}}});  // columns
    }
    calls.push_back({"matmul", {{{2, 3}, d}, {{3, 4}, d}}, {}});
    calls.push_back({"softmax_safe", {{{2, 3}, d}}, {}});
    calls.push_back({"logsumexp", {{{2, 3}, d}}, {}});
    calls.push_back({"logsumexp", {{{2, 3}, d}}, {{"keepdims", true}}});
    calls.push_back({"layernorm_safe", {{{2, 3}, d}}, {}});
    calls.push_back({"layernorm_safe", {{{2, 3}, d}, {{3}, d}, {{3}, d}}, {}});
    calls.push_back({"rmsnorm_safe", {{{2, 3}, d}}, {}});
    calls.push_back({"rmsnorm_safe", {{{2, 3}, d}, {{3}, d}}, {}});
    if (d != f32) {
      calls.push_back({"cast", {{{2}, f32}}, {{"policy", default_policy(d)}}});
      calls.push_back({"cast", {{{2}, d}}, {{"policy", default_policy(f32)}}});
    }
  }
  for (const char* op : {"pow"}) {
    for (const auto& [a, b] : std::vector<std::pair<Sizes, Sizes>>{{{2}, {2}}, {{2}, {}}}) {
      calls.push_back({op, {{a, f32}, {b, f32}}, {}});
    }
  }
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    calls.push_back({op, {{{2}, f32}, {{2}, f32}}, {}});
    calls.push_back({op, {{{2}, f32}, {{}, f32}}, {}});
  }
  calls.push_back({"where", {{{2}, DType::bool_}, {{2}, f32}, {{2}, f32}}, {}});
  calls.push_back({"where", {{{2}, DType::bool_}, {{2}, f32}, {{}, f32}}, {}});
  calls.push_back({"matmul", {{{2, 3, 4}, f32}, {{4, 5}, f32}}, {}});
  return calls;
}

// Removes the files of entries not on this list (left by earlier lists):
// <key>.so, <key>.so.meta and <key>.cpp belong to the object <key>.so; and
// precompiled headers other than `pch` (of other flags or headers).
std::size_t prune(const std::string& dir, const std::set<std::string>& used, const std::string& pch) {
  namespace fs = std::filesystem;
  std::size_t removed = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().starts_with("pch-") &&
        e.path().filename() != fs::path(pch).filename()) {
      removed += fs::remove_all(e.path()) > 0 ? 1 : 0;
      continue;
    }
    if (!e.is_regular_file()) continue;  // the header directory
    std::string object = e.path().string();
    if (object.ends_with(".meta")) object.resize(object.size() - 5);
    if (object.ends_with(".cpp")) object.replace(object.size() - 4, 4, ".so");
    if (used.count(object) == 0) removed += fs::remove(e.path()) ? 1 : 0;
  }
  return removed;
}

}  // namespace

PrebuildReport prebuild_eager_kernels(const std::string& cache_root, int jobs,
                                      const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  // The executables compile into the cache root (their options leave the
  // cache directory to $TESSERA_CACHE_DIR).
  ::setenv("TESSERA_CACHE_DIR", cache_root.c_str(), 1);
  ::setenv("TESSERA_PROGRESS", "0", 1);  // the tool reports itself
  // The precompiled headers first: the kernels below compile with them,
  // and the package installs them for its users' first compiles.
  const std::string pch = cpu::precompile_headers();
  const std::vector<Call> calls = common_calls();
  PrebuildReport report;
  report.executables = calls.size();
  std::atomic<std::size_t> next{0}, compiled{0};
  std::mutex mutex;
  std::exception_ptr failure;
  std::set<std::string> used;  // the objects of this list
  auto work = [&] {
    for (std::size_t i = next++; i < calls.size(); i = next++) {
      const Call& c = calls[i];
      try {
        std::vector<Tensor> inputs;
        for (const Operand& o : c.operands) inputs.push_back(Tensor::zeros(o.shape, default_policy(o.dtype)));
        const ir::OpDef& def = ir::Registry::global().get("graph." + c.op);
        const std::vector<KernelReport> reports = compile_eager(def, inputs, c.attrs);
        bool hits = true;
        for (const KernelReport& r : reports) hits = hits && r.cache_hit;
        if (!hits) ++compiled;
        std::lock_guard<std::mutex> lock(mutex);
        for (const KernelReport& r : reports) used.insert(r.object);
        if (progress) {
          std::string what = c.op + "(";
          for (std::size_t k = 0; k < inputs.size(); ++k) {
            what += (k ? ", " : "") + std::string(name(inputs[k].dtype()));
          }
          progress(what + ")" + (hits ? " present" : " compiled"));
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = calls.size();
      }
    }
  };
  const unsigned n = jobs > 0 ? static_cast<unsigned>(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  report.removed = prune(cache_root + "/cpu", used, pch);
  report.compiled = compiled;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tessera::schedule
