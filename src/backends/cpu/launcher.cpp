// launch(): binds a CPU kernel's arguments and runs its groups on the thread pool.
//
// Binding (docs/design/0003-tile-ir.md, "Types"): buffers must match their
// parameter's dtype and rank; fixed dims must equal the argument's size;
// plain symbols bind from argument shapes (one symbol, one size); scalar
// arguments named like a symbol, and specializations, bind it too; compound
// dims (K/tp, N*2) are checked after everything is bound, a quotient needing
// exact division. Scalars are rounded once to their parameter's dtype.
//
// Groups are split into contiguous chunks claimed by the pool's threads.
// Each group is independent, so the results are the same for every thread
// count; a fault reported by several groups is reported for the lowest one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "backends/common/index_bounds.h"
#include "backends/cpu/launch_binding.h"
#include "backends/cpu/loaded_kernel.h"
#include "backends/cpu/thread_pool.h"
#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/support/error.h"

namespace tessera::cpu {
namespace {

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Where a symbol's value came from: a specialization, a scalar argument or a
// buffer's dim. Described only when an error quotes it: building these
// strings on every launch was a measurable part of a small kernel's launch.
struct Origin {
  const KernelParam* param = nullptr;  // none: the kernel's specialization
  const Tensor* tensor = nullptr;      // a buffer argument (else a scalar one)
  std::size_t dim = 0;

  std::string describe() const {
    if (param == nullptr) return "its specialization";
    if (tensor == nullptr) return "scalar argument '" + param->name + "'";
    return "dim " + std::to_string(dim) + " of '" + param->name + "' (shape " + shape_str(tensor->shape()) + ")";
  }
};

// Where a dim is evaluated, for errors: a parameter's type, or the kernel body.
std::string where_text(const KernelParam* param) { return param ? "parameter '" + param->name + "'" : "the kernel body"; }

class Binder {
 public:
  explicit Binder(const CompiledKernel& k) : k_(k) {
    values_.reserve(k.specialized.size() + k.symbols.size());
    for (const auto& [name, value] : k.specialized) values_.push_back({&name, value, Origin{}});
  }

  // `symbol` must outlive the binder (a name in the kernel's signature).
  void bind(const std::string& symbol, std::int64_t value, const Origin& from) {
    for (const Bound& b : values_) {
      if (*b.symbol != symbol) continue;
      if (b.value != value) {
        raise(ErrorCode::ShapeSymbolBinding, "kernel '" + k_.name + "': symbol '" + symbol + "' is " +
                                                 std::to_string(b.value) + " from " + b.from.describe() + " but " +
                                                 std::to_string(value) + " from " + from.describe());
      }
      return;
    }
    values_.push_back({&symbol, value, from});
  }

  // The value of a symbol or of a compound dim (K/tp, N*2); `param` places errors.
  std::int64_t eval(const std::string& text, const KernelParam* param) const {
    const std::size_t op = text.find_first_of("/*");
    if (op == std::string::npos) return operand(text, text, param);
    const std::int64_t a = operand(text.substr(0, op), text, param);
    const std::int64_t b = operand(text.substr(op + 1), text, param);
    if (text[op] == '*') return a * b;
    if (b == 0 || a % b != 0) {
      raise(ErrorCode::ShapeConstraint, "kernel '" + k_.name + "': dim '" + text + "' of " + where_text(param) +
                                            " needs " + text.substr(0, op) + " (= " + std::to_string(a) +
                                            ") divisible by " + text.substr(op + 1) + " (= " + std::to_string(b) + ")");
    }
    return a / b;
  }

 private:
  std::int64_t operand(const std::string& tok, const std::string& dim, const KernelParam* param) const {
    if (!tok.empty() && std::isdigit(static_cast<unsigned char>(tok[0])) != 0) return std::stoll(tok);
    for (const Bound& b : values_) {
      if (*b.symbol == tok) return b.value;
    }
    raise(ErrorCode::ShapeSymbolBinding,
          "kernel '" + k_.name + "': symbol '" + tok + "' in dim '" + dim + "' of " + where_text(param) +
              " is not bound by any argument's shape; give it by specialization (jit(" + tok +
              "=...)) or as a scalar argument named '" + tok + "'");
  }

  struct Bound {
    const std::string* symbol;
    std::int64_t value;
    Origin from;
  };
  const CompiledKernel& k_;
  std::vector<Bound> values_;  // a kernel has a few symbols: a linear search allocates nothing
};


double scalar_as_double(const KernelArg& a) {
  if (const auto* d = std::get_if<double>(&a.value)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&a.value)) return static_cast<double>(*i);
  return std::get<bool>(a.value) ? 1.0 : 0.0;
}

void bind_scalar(const CompiledKernel& k, const KernelParam& p, const KernelArg& a, tessera_cpu::ParamValue& out) {
  if (std::holds_alternative<Tensor>(a.value)) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' parameter '" + p.name + "' is a scalar " +
                                          ir::print_type(p.type) + " but the argument is a tensor");
  }
  const DType d = p.type.dtype();
  if (is_float(d)) {
    EncodeOptions o;
    o.overflow = p.type.policy.overflow;
    out.real = decode_value(encode_value(scalar_as_double(a), d, o), d);
    return;
  }
  if (d == DType::bool_) {
    out.integer = scalar_as_double(a) != 0.0 ? 1 : 0;
    return;
  }
  std::int64_t v = 0;
  if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
    v = *i;
  } else if (const auto* b = std::get_if<bool>(&a.value)) {
    v = *b ? 1 : 0;
  } else {
    const double x = std::get<double>(a.value);
    if (x != std::trunc(x) || std::fabs(x) > 9.0e18) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' parameter '" + p.name + "' is " +
                                            ir::print_type(p.type) + " but the argument " + std::to_string(x) +
                                            " is not an integer");
    }
    v = static_cast<std::int64_t>(x);
  }
  const DTypeInfo& inf = info(d);
  if (inf.bits < 64) {
    const std::int64_t lo = inf.is_signed ? -(std::int64_t{1} << (inf.bits - 1)) : 0;
    const std::int64_t hi = inf.is_signed ? (std::int64_t{1} << (inf.bits - 1)) - 1 : (std::int64_t{1} << inf.bits) - 1;
    if (v < lo || v > hi) {
      raise(ErrorCode::ArgumentInvalid,
            "kernel '" + k.name + "' parameter '" + p.name + "' is " + ir::print_type(p.type) + " but the argument " +
                std::to_string(v) + " is outside its range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  out.integer = v;
}

const Tensor& buffer_arg(const CompiledKernel& k, const KernelParam& p, const KernelArg& a, const std::string& device) {
  const Tensor* t = std::get_if<Tensor>(&a.value);
  if (t == nullptr || !t->defined()) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' parameter '" + p.name + "' is a buffer " +
                                          ir::print_type(p.type) + " but the argument is " +
                                          (t == nullptr ? "a scalar" : "an undefined tensor"));
  }
  if (t->device() != device) {
    raise(ErrorCode::Device, "kernel '" + k.name + "' runs on " + (device == "cpu" ? "the CPU" : device) +
                                 " but the argument for '" + p.name + "' lives on device '" + t->device() +
                                 "'; move it with .to(\"" + device + "\")");
  }
  // A sub-byte parameter (int4, fp4, fp6) also takes a uint8 tensor of one code per byte.
  const bool byte_codes = is_packed(p.type.dtype()) && t->dtype() == DType::uint8;
  if (t->dtype() != p.type.dtype() && !byte_codes) {
    raise(ErrorCode::DtypeUnsupported, "kernel '" + k.name + "' parameter '" + p.name + "' is " +
                                           ir::print_type(p.type) + " but the argument is " + describe(*t));
  }
  if (t->rank() != p.type.rank()) {
    raise(ErrorCode::ShapeMismatch, "kernel '" + k.name + "' parameter '" + p.name + "' is " + ir::print_type(p.type) +
                                        " (rank " + std::to_string(p.type.rank()) + ") but the argument has shape " +
                                        shape_str(t->shape()));
  }
  return *t;
}

std::string fault_where(const CompiledKernel& k, const tessera_cpu::Fault& f) {
  return std::string(f.message) + " (group " + std::to_string(f.group) + " of kernel '" + k.name + "')";
}

}  // namespace

namespace detail {

BoundLaunch bind_launch(const CompiledKernel& k, std::int64_t grid, const std::vector<KernelArg>& args,
                        const std::string& device) {
  if (args.size() != k.params.size()) {
    std::string names;
    for (const KernelParam& p : k.params) names += (names.empty() ? "" : ", ") + p.name;
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "' takes " + std::to_string(k.params.size()) +
                                          " argument(s) (" + names + "), got " + std::to_string(args.size()));
  }
  std::vector<tessera_cpu::ParamValue> params(args.size());
  Binder binder(k);
  // Scalars first: a scalar named like a symbol binds it.
  for (std::size_t i = 0; i < args.size(); ++i) {
    const KernelParam& p = k.params[i];
    if (p.is_buffer) continue;
    bind_scalar(k, p, args[i], params[i]);
    if (!is_float(p.type.dtype()) && std::find(k.symbols.begin(), k.symbols.end(), p.name) != k.symbols.end()) {
      binder.bind(p.name, params[i].integer, Origin{&p, nullptr, 0});
    }
  }
  // Fixed and plain symbolic dims.
  for (std::size_t i = 0; i < args.size(); ++i) {
    const KernelParam& p = k.params[i];
    if (!p.is_buffer) continue;
    const Tensor& t = buffer_arg(k, p, args[i], device);
    for (std::size_t d = 0; d < p.type.rank(); ++d) {
      const ir::Dim& dim = p.type.shape[d];
      if (!dim.is_symbolic()) {
        if (t.shape()[d] != dim.size) {
          raise(ErrorCode::ShapeMismatch, "kernel '" + k.name + "' parameter '" + p.name + "' is " +
                                              ir::print_type(p.type) + " but the argument has shape " +
                                              shape_str(t.shape()));
        }
      } else if (dim.symbol.find_first_of("/*") == std::string::npos) {
        binder.bind(dim.symbol, t.shape()[d], Origin{&p, &t, d});
      }
    }
    tessera_cpu::BufferArg& b = params[i].buffer;
    b.data = t.numel() == 0 ? nullptr : (device == "cpu" ? t.data() : t.device_data());
    b.rank = static_cast<std::int32_t>(t.rank());
    b.dtype = static_cast<std::int32_t>(p.type.dtype());
    for (std::size_t d = 0; d < t.rank(); ++d) {
      b.shape[d] = t.shape()[d];
      b.strides[d] = t.strides()[d];
    }
  }
  // Compound dims, now that every plain symbol is bound.
  for (std::size_t i = 0; i < args.size(); ++i) {
    const KernelParam& p = k.params[i];
    if (!p.is_buffer) continue;
    const Tensor& t = std::get<Tensor>(args[i].value);
    for (std::size_t d = 0; d < p.type.rank(); ++d) {
      const ir::Dim& dim = p.type.shape[d];
      if (!dim.is_symbolic()) continue;
      const std::int64_t want = binder.eval(dim.symbol, &p);
      if (want != t.shape()[d]) {
        raise(ErrorCode::ShapeMismatch, "kernel '" + k.name + "' parameter '" + p.name + "' is " +
                                            ir::print_type(p.type) + ": dim " + std::to_string(d) + " ('" + dim.symbol +
                                            "') should be " + std::to_string(want) + " but the argument has shape " +
                                            shape_str(t.shape()));
      }
    }
  }
  std::vector<std::int64_t> symbols;
  for (const std::string& s : k.symbols) symbols.push_back(binder.eval(s, nullptr));
  // Generated code writes index arithmetic on extents and group ids as plain
  // integer arithmetic (codegen::IndexBounds), which is exact below 2^48.
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const bool scalar = std::any_of(k.params.begin(), k.params.end(),
                                    [&](const KernelParam& p) { return !p.is_buffer && p.name == k.symbols[i]; });
    if (!scalar && static_cast<std::uint64_t>(symbols[i]) >= codegen::kIndexLimit) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': extent " + k.symbols[i] + " = " +
                                            std::to_string(symbols[i]) + " is outside [0, 2^48), the range of " +
                                            "kernel index arithmetic");
    }
  }

  if (grid < -1)
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': grid " + std::to_string(grid) + " is negative");
  if (grid == -1) {
    if (!k.group_shape.empty()) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name +
                                            "' has a group shape; launch it with an explicit grid "
                                            "(k[grid](...)), the number of groups");
    }
    auto first_mut = std::find_if(k.params.begin(), k.params.end(), [](const KernelParam& p) { return p.is_mut; });
    if (first_mut == k.params.end()) {
      raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name +
                                            "' has no mut parameter to take its default launch "
                                            "extent from; launch it with an explicit grid");
    }
    grid = std::get<Tensor>(args[static_cast<std::size_t>(first_mut - k.params.begin())].value).numel();
  }
  if (static_cast<std::uint64_t>(grid) >= codegen::kIndexLimit) {
    raise(ErrorCode::ArgumentInvalid, "kernel '" + k.name + "': grid " + std::to_string(grid) +
                                          " is 2^48 or more, beyond the range of kernel index arithmetic");
  }
  return BoundLaunch{std::move(params), std::move(symbols), grid};
}

}  // namespace detail

namespace {


// Kernels address one code per byte: a packed sub-byte tensor (int4, fp4,
// fp6) is unpacked into a uint8 buffer for the launch, and a mut one is
// packed back afterwards. Returns the replaced arguments' indices.
std::vector<std::size_t> unpack_sub_byte_args(const CompiledKernel& k, std::vector<KernelArg>& args,
                                              std::vector<Tensor>& packed) {
  std::vector<std::size_t> replaced;
  for (std::size_t i = 0; i < args.size() && i < k.params.size(); ++i) {
    const KernelParam& p = k.params[i];
    const Tensor* t = std::get_if<Tensor>(&args[i].value);
    if (!p.is_buffer || !is_packed(p.type.dtype()) || t == nullptr || !t->defined() || t->dtype() != p.type.dtype() ||
        !t->is_cpu()) {
      continue;  // bind_launch reports a mismatch
    }
    packed.resize(args.size());
    packed[i] = *t;
    args[i] = KernelArg(t->to_byte_codes());
    replaced.push_back(i);
  }
  return replaced;
}

}  // namespace

namespace {

// Runs a bound launch's groups on the thread pool; a group's fault raises.
void run_bound(const CompiledKernel& k, const tessera_cpu::ParamValue* params, std::size_t num_params,
               const std::vector<std::int64_t>& symbols, std::int64_t grid, const LaunchOptions& options) {
  tessera_cpu::LaunchArgs la{};
  la.abi_version = tessera_cpu::kAbiVersion;
  la.params = params;
  la.num_params = static_cast<std::int32_t>(num_params);
  la.symbols = symbols.data();
  la.num_symbols = static_cast<std::int32_t>(symbols.size());
  la.grid = grid;

  int threads = options.num_threads > 0 ? options.num_threads : detail::default_thread_count();
  threads = static_cast<int>(std::min<std::int64_t>(threads, grid));
  // A few chunks per thread balance uneven groups without much overhead.
  const std::int64_t chunks = std::min<std::int64_t>(grid, static_cast<std::int64_t>(threads) * 4);
  // A fault record per chunk (about 1 KiB each), read only where its chunk
  // failed: the calling thread's records are reused from launch to launch,
  // neither allocated nor cleared each time.
  thread_local std::vector<tessera_cpu::Fault> fault_records;
  if (fault_records.size() < static_cast<std::size_t>(chunks)) fault_records.resize(static_cast<std::size_t>(chunks));
  tessera_cpu::Fault* faults = fault_records.data();
  std::vector<char> failed(static_cast<std::size_t>(chunks), 0);
  const detail::RunGroupsFn run = k.handle->run_groups;
  detail::ThreadPool::global().parallel_for(chunks, threads, [&](std::int64_t c) {
    const std::int64_t begin = grid * c / chunks;
    const std::int64_t end = grid * (c + 1) / chunks;
    if (run(&la, begin, end, &faults[static_cast<std::size_t>(c)]) != 0) failed[static_cast<std::size_t>(c)] = 1;
  });
  for (std::size_t c = 0; c < failed.size(); ++c) {
    if (!failed[c]) continue;
    const tessera_cpu::Fault& f = faults[c];
    const ErrorCode code = f.code == 1   ? ErrorCode::IndexOutOfRange
                           : f.code == 2 ? ErrorCode::ArgumentInvalid
                                         : ErrorCode::Internal;
    raise(code, fault_where(k, f));
  }
}

}  // namespace

void launch(const CompiledKernel& k, std::int64_t grid, std::vector<KernelArg> args, const LaunchOptions& options) {
  if (!k.handle) raise(ErrorCode::ArgumentInvalid, "launch of a CompiledKernel that holds no compiled code");
  std::vector<Tensor> packed;
  const std::vector<std::size_t> unpacked = unpack_sub_byte_args(k, args, packed);
  detail::BoundLaunch bound = detail::bind_launch(k, grid, args, "cpu");
  if (bound.grid == 0) return;
  run_bound(k, bound.params.data(), bound.params.size(), bound.symbols, bound.grid, options);
  for (std::size_t i : unpacked) {
    if (k.params[i].is_mut) packed[i].store_byte_codes(std::get<Tensor>(args[i].value));
  }
}

struct PreparedLaunch {
  detail::BoundLaunch bound;
};

std::shared_ptr<const PreparedLaunch> prepare_launch(const CompiledKernel& k, std::int64_t grid,
                                                     const std::vector<KernelArg>& args) {
  if (!k.handle) raise(ErrorCode::ArgumentInvalid, "launch of a CompiledKernel that holds no compiled code");
  for (std::size_t i = 0; i < args.size() && i < k.params.size(); ++i) {
    if (k.params[i].is_buffer && is_packed(k.params[i].type.dtype())) return nullptr;  // unpacked around each launch
  }
  auto p = std::make_shared<PreparedLaunch>();
  p->bound = detail::bind_launch(k, grid, args, "cpu");
  if (p->bound.grid == 0) return nullptr;
  return p;
}

void launch_prepared(const CompiledKernel& k, const PreparedLaunch& p, std::span<void* const> addresses,
                     const LaunchOptions& options) {
  const std::vector<tessera_cpu::ParamValue>& recorded = p.bound.params;
  if (addresses.size() != recorded.size()) {
    raise(ErrorCode::Internal, "launch_prepared of kernel '" + k.name + "': " + std::to_string(addresses.size()) +
                                   " addresses for " + std::to_string(recorded.size()) + " parameters");
  }
  // One copy of the parameters per thread, reused: a launch allocates nothing here.
  thread_local std::vector<tessera_cpu::ParamValue> params;
  params.assign(recorded.begin(), recorded.end());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (addresses[i] != nullptr) params[i].buffer.data = addresses[i];
  }
  run_bound(k, params.data(), params.size(), p.bound.symbols, p.bound.grid, options);
}

}  // namespace tessera::cpu
