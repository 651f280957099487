// Python surface of host tensors and eager op execution.
//
// tessera._C.Tensor wraps tessera::Tensor. Arrays whose numpy dtype is the
// tensor's storage (float64/32/16, complex64/128, integers, bool) are adopted without a
// copy and handed back to numpy as views of the same memory; other formats
// are encoded from float64 and decoded to float32 on the way out.
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>

#include "bindings.h"
#include "tensor_args.h"
#include "tessera/schedule/eager.h"
#include "tessera/graph/executor.h"
#include "tessera/ir/dialect.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace nb = nanobind;

namespace tessera::python {

std::optional<nb::dlpack::dtype> native_dtype(DType d) {
  switch (d) {
    case DType::fp64: return nb::dtype<double>();
    case DType::fp32: return nb::dtype<float>();
    case DType::fp16: return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::int8: return nb::dtype<std::int8_t>();
    case DType::int16: return nb::dtype<std::int16_t>();
    case DType::int32: return nb::dtype<std::int32_t>();
    case DType::int64: return nb::dtype<std::int64_t>();
    case DType::uint8: return nb::dtype<std::uint8_t>();
    case DType::bool_: return nb::dtype<bool>();
    case DType::complex64: return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Complex), 64, 1};
    case DType::complex128:
      return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Complex), 128, 1};
    default: return std::nullopt;
  }
}

ir::Shape shape_from_python(nb::handle dims) {
  ir::Shape shape;
  for (nb::handle d : nb::cast<nb::sequence>(dims)) {
    if (nb::isinstance<nb::str>(d)) {
      shape.push_back(ir::Dim::named(nb::cast<std::string>(d)));
    } else {
      shape.push_back(ir::Dim::fixed(nb::cast<std::int64_t>(d)));
    }
  }
  return shape;
}

ir::AttrMap attrs_from_python(const ir::OpDef& def, nb::dict attrs) {
  ir::AttrMap out;
  for (auto [key, value] : attrs) {
    std::string name = nb::cast<std::string>(key);
    const ir::AttrSpec* spec = def.find_attr(name);
    ir::AttrKind kind;
    if (spec) {
      kind = spec->kind;
    } else if (nb::isinstance<nb::bool_>(value)) {
      kind = ir::AttrKind::boolean;  // unknown names still convert so complete_attrs names them
    } else {
      kind = ir::AttrKind::string;
      out.set(name, std::string("?"));
      continue;
    }
    std::string what = "'" + def.name + "' attribute '" + name + "'";
    try {
      switch (kind) {
        case ir::AttrKind::boolean: out.set(name, nb::cast<bool>(value)); break;
        case ir::AttrKind::integer: out.set(name, nb::cast<std::int64_t>(value)); break;
        case ir::AttrKind::real: out.set(name, nb::cast<double>(value)); break;
        case ir::AttrKind::string: out.set(name, nb::cast<std::string>(value)); break;
        case ir::AttrKind::int_list: out.set(name, nb::cast<std::vector<std::int64_t>>(value)); break;
        case ir::AttrKind::real_list: out.set(name, nb::cast<std::vector<double>>(value)); break;
        case ir::AttrKind::policy: out.set(name, policy_argument(value, what.c_str())); break;
        case ir::AttrKind::shape: out.set(name, shape_from_python(value)); break;
      }
    } catch (const nb::cast_error&) {
      raise(ErrorCode::ArgumentInvalid, what + " must be a " + std::string(ir::attr_kind_name(kind)) + ", got " +
                                            nb::cast<std::string>(nb::repr(value)));
    }
  }
  return out;
}

namespace {

using AnyArray = nb::ndarray<nb::device::cpu>;
template <class V>
using FloatArray = nb::ndarray<V, nb::c_contig, nb::device::cpu>;

std::vector<std::int64_t> shape_of(const AnyArray& a) {
  std::vector<std::int64_t> shape(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<std::int64_t>(a.shape(i));
  return shape;
}

Tensor wrap_array(const AnyArray& array, nb::handle policy_spec) {
  NumericsPolicy policy = policy_argument(policy_spec, "tensor dtype");
  auto native = native_dtype(policy.storage);
  if (!native || array.dtype() != *native) {
    raise(ErrorCode::DtypeUnsupported, "cannot adopt an array of this numpy dtype as " + print_policy(policy));
  }
  std::vector<std::int64_t> strides(array.ndim());
  for (std::size_t i = 0; i < array.ndim(); ++i) strides[i] = array.stride(i);
  std::shared_ptr<void> owner(new AnyArray(array), [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<AnyArray*>(p);
  });
  return Tensor::wrap(array.data(), shape_of(array), std::move(strides), policy, std::move(owner));
}

// A tensor encoded from a C-contiguous float64 or float32 array.
template <class V>
Tensor from_floats(const FloatArray<V>& values, nb::handle policy_spec, std::uint64_t seed) {
  NumericsPolicy policy = policy_argument(policy_spec, "tensor dtype");
  std::vector<std::int64_t> shape(values.ndim());
  for (std::size_t i = 0; i < values.ndim(); ++i) shape[i] = static_cast<std::int64_t>(values.shape(i));
  return Tensor::from_values(std::span<const V>(values.data(), values.size()), std::move(shape), policy, seed);
}

// GPU tensors: the DLPack type of a storage dtype (numpy's, plus bf16, which
// PyTorch and CuPy read from device memory).
std::optional<nb::dlpack::dtype> device_dlpack_dtype(DType d) {
  if (d == DType::bf16) return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  return native_dtype(d);
}

DType dtype_from_dlpack(const nb::dlpack::dtype& t) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 64) return DType::fp64;
    if (code == Code::Float && t.bits == 32) return DType::fp32;
    if (code == Code::Float && t.bits == 16) return DType::fp16;
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::Int && t.bits == 8) return DType::int8;
    if (code == Code::Int && t.bits == 16) return DType::int16;
    if (code == Code::Int && t.bits == 32) return DType::int32;
    if (code == Code::Int && t.bits == 64) return DType::int64;
    if (code == Code::UInt && t.bits == 8) return DType::uint8;
    if (code == Code::Bool && t.bits == 8) return DType::bool_;
    if (code == Code::Complex && t.bits == 64) return DType::complex64;
    if (code == Code::Complex && t.bits == 128) return DType::complex128;
  }
  raise(ErrorCode::DtypeUnsupported, "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                                         " bits, " + std::to_string(t.lanes) + " lanes) has no tessera storage dtype");
}

// A GPU tensor as a DLPack-capable array sharing its device memory (no copy);
// the capsule keeps the tensor, and so its storage, alive.
nb::object cuda_dlpack_view(const Tensor& t) {
  if (t.is_cpu()) raise(ErrorCode::ArgumentInvalid, "_cuda_dlpack_view takes a GPU tensor, this one is on cpu");
  auto type = device_dlpack_dtype(t.dtype());
  if (!type) {
    raise(ErrorCode::DtypeUnsupported,
          std::string(name(t.dtype())) + " has no DLPack type other libraries read; cast to fp32 or bf16 first");
  }
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<> view(t.device_data(), shape.size(), shape.data(), owner, t.strides().data(), *type,
                     nb::device::cuda::value, cuda::parse_device(t.device()));
  return nb::cast(view);
}

using CudaArray = nb::ndarray<nb::device::cuda>;

// Adopts a CUDA DLPack tensor (PyTorch, CuPy, ...) without copying.
Tensor wrap_cuda_array(const CudaArray& array) {
  const DType dtype = dtype_from_dlpack(array.dtype());
  std::vector<std::int64_t> shape(array.ndim()), strides(array.ndim());
  for (std::size_t i = 0; i < array.ndim(); ++i) {
    shape[i] = static_cast<std::int64_t>(array.shape(i));
    strides[i] = array.stride(i);
  }
  std::shared_ptr<void> owner(new CudaArray(array), [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<CudaArray*>(p);
  });
  return Tensor::wrap_device(array.data(), std::move(shape), std::move(strides), default_policy(dtype),
                             "cuda:" + std::to_string(array.device_id()), std::move(owner));
}

nb::object to_numpy(const Tensor& device_tensor) {
  // A GPU tensor is copied back first (views keep their strides).
  const Tensor t = device_tensor.is_cpu() ? device_tensor : device_tensor.to("cpu");
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  if (auto native = native_dtype(t.dtype())) {
    // A view: the capsule keeps a Tensor (and so its storage) alive.
    auto* keep = new Tensor(t);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    nb::ndarray<nb::numpy> view(t.data(), shape.size(), shape.data(), owner, t.strides().data(), *native);
    return nb::cast(view);
  }
  nb::dlpack::dtype out_type = t.dtype() == DType::int4 ? nb::dtype<std::int8_t>() : nb::dtype<float>();
  const std::size_t bytes = out_type.bits / 8;
  const std::size_t n = static_cast<std::size_t>(t.numel());
  auto* buf = new std::byte[std::max<std::size_t>(n * bytes, 1)];
  if (bytes == 4 && t.is_contiguous() && !is_packed(t.dtype())) {
    // The narrow floats (bf16, fp8, fp6) decode straight into float, which
    // holds each of their values exactly.
    decode(t.data(), n, t.dtype(), reinterpret_cast<float*>(buf));
  } else {
    const std::vector<double> values = t.to_values();
    for (std::size_t i = 0; i < n; ++i) {
      if (bytes == 1) {
        reinterpret_cast<std::int8_t*>(buf)[i] = static_cast<std::int8_t>(values[i]);
      } else {
        reinterpret_cast<float*>(buf)[i] = static_cast<float>(values[i]);
      }
    }
  }
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  nb::ndarray<nb::numpy> arr(buf, shape.size(), shape.data(), owner, nullptr, out_type);
  return nb::cast(arr);
}

nb::object codes_to_numpy(const Tensor& device_tensor) {
  const Tensor t = device_tensor.is_cpu() ? device_tensor : device_tensor.to("cpu");
  auto codes = t.codes();
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  int bytes = storage_bytes(t.dtype());
  auto* buf = new std::byte[std::max<std::size_t>(codes.size() * static_cast<std::size_t>(bytes), 1)];
  for (std::size_t i = 0; i < codes.size(); ++i)
    std::memcpy(buf + i * bytes, &codes[i], static_cast<std::size_t>(bytes));
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  nb::dlpack::dtype type{static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt), static_cast<std::uint8_t>(bytes * 8),
                         1};
  nb::ndarray<nb::numpy> arr(buf, shape.size(), shape.data(), owner, nullptr, type);
  return nb::cast(arr);
}

// Says that an eager op ran on the reference executor because no compiled
// kernel covers it yet (Python's warning filters show each message once per
// calling line by default).
void warn_reference(const std::string& op, const std::string& why) {
  nb::object category = nb::module_::import_("tessera.errors").attr("ReferenceExecutorWarning");
  const std::string message = op + " ran on the reference executor: no compiled kernel covers " + why +
                              " (set TESSERA_EAGER=reference to choose that executor and silence this)";
  if (PyErr_WarnEx(category.ptr(), message.c_str(), 2) != 0) throw nb::python_error();
}

nb::object execute_op_py(const std::string& name, const std::vector<Tensor>& inputs, nb::dict attrs) {
  const ir::OpDef& def = ir::Registry::global().get(name);
  const ir::AttrMap parsed = attrs_from_python(def, attrs);
  // Compiled single-op executables (tessera/schedule/eager.h) unless the
  // reference executor is chosen; operands on a GPU always run compiled.
  const bool on_gpu = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return !t.is_cpu(); });
  std::vector<Tensor> results;
  std::string no_kernel;
  {
    // Without the GIL: other threads run meanwhile (an index launch's shards
    // meet in collectives, which would otherwise wait for this one forever).
    nb::gil_scoped_release release;
    if (on_gpu) {
      results = schedule::run_op_compiled(def, inputs, parsed);
    } else if (schedule::eager_backend() == "compiled") {
      results = schedule::run_op_eager(def, inputs, parsed, no_kernel);
    } else {
      results = graph::execute_op(def, inputs, parsed);
    }
  }
  if (!no_kernel.empty()) warn_reference(name, no_kernel);
  if (results.size() == 1) return nb::cast(std::move(results[0]));
  return nb::cast(nb::tuple(nb::cast(results)));
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor>(m, "Tensor", "A host tensor: shape, strides, numerics policy, device and storage.")
      .def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro("strides", [](const Tensor& t) { return nb::tuple(nb::cast(t.strides())); })
      .def_prop_ro("policy", [](const Tensor& t) { return t.policy(); })
      .def_prop_ro("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device(); })
      .def_prop_ro("ndim", [](const Tensor& t) { return t.rank(); })
      .def_prop_ro("size", [](const Tensor& t) { return t.numel(); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("numpy", &to_numpy, "The values as a numpy array (a view for numpy-native dtypes).")
      .def("codes", &codes_to_numpy, "Each element's encoding, row-major, as unsigned integers.")
      .def("contiguous", &Tensor::contiguous)
      .def("to", &Tensor::to, nb::arg("device"))
      .def("_describe", [](const Tensor& t) { return describe(t); });
  m.def("_wrap_array", &wrap_array, nb::arg("array"), nb::arg("policy"));
  m.def("_cuda_dlpack_view", &cuda_dlpack_view, nb::arg("tensor"),
        "A GPU tensor as a DLPack-capable array sharing its device memory.");
  m.def("_wrap_cuda_array", &wrap_cuda_array, nb::arg("array"),
        "Adopts a CUDA DLPack tensor (PyTorch, CuPy) without copying.");
  m.def("_cuda_available", [] { return cuda::available(); });
  m.def("_cuda_unavailable_reason", [] { return cuda::unavailable_reason(); });
  m.def("_cuda_device_count", [] { return cuda::available() ? cuda::device_count() : 0; });
  // The caching allocator's counters of GPU `ordinal` (tessera.runtime.memory_stats).
  m.def(
      "_cuda_memory_stats",
      [](int ordinal) {
        const cuda::MemoryStats s = cuda::CachingAllocator::for_device(ordinal).stats();
        nb::dict d;
        d["bytes_in_use"] = s.bytes_in_use;
        d["bytes_cached"] = s.bytes_cached;
        d["peak_in_use"] = s.peak_in_use;
        d["allocations"] = s.allocations;
        d["frees"] = s.frees;
        d["cache_hits"] = s.cache_hits;
        d["device_allocations"] = s.device_allocations;
        return d;
      },
      nb::arg("ordinal"));
  m.def("_cuda_reset_peak_memory", [](int ordinal) { cuda::CachingAllocator::for_device(ordinal).reset_peak(); },
        nb::arg("ordinal"));
  m.def("_cuda_empty_cache", [](int ordinal) { cuda::CachingAllocator::for_device(ordinal).empty_cache(); },
        nb::arg("ordinal"));
  m.def(
      "_cuda_synchronize",
      [](int ordinal) {
        nb::gil_scoped_release release;
        cuda::synchronize(ordinal);
      },
      nb::arg("ordinal"), "Waits for all work queued on GPU `ordinal` (for timing).");
  // (major, minor) compute capability of GPU `ordinal` (the Mapper's Arch).
  m.def("_cuda_capability", [](int ordinal) {
    const cuda::DeviceProperties p = cuda::device_properties(ordinal);
    return std::make_pair(p.compute_major, p.compute_minor);
  });
  // Overwrites dst's elements with src's (same shape and storage dtype), in
  // place: how a call applies a Region['write'] or a reduction to its tensor.
  m.def(
      "_copy_into",
      [](const Tensor& dst, const Tensor& src) {
        if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
          raise(ErrorCode::ShapeMismatch, "copy into a tensor of " + describe(dst) + " from one of " + describe(src));
        }
        if (!dst.is_contiguous()) raise(ErrorCode::ArgumentInvalid, "copy into a non-contiguous view");
        const Tensor from = (src.device() == dst.device() ? src : src.to(dst.device())).contiguous();
        const std::size_t bytes = storage_bytes_for(dst.dtype(), dst.numel());
        if (bytes == 0) return;
        nb::gil_scoped_release release;
        if (dst.is_cpu()) {
          std::memcpy(dst.data(), from.data(), bytes);
        } else {
          cuda::copy_device_to_device(cuda::parse_device(dst.device()), reinterpret_cast<cuda::DevicePtr>(dst.device_data()),
                                      reinterpret_cast<cuda::DevicePtr>(from.device_data()), bytes);
        }
      },
      nb::arg("dst"), nb::arg("src"));
  m.def("_tensor_from_float64", &from_floats<double>, nb::arg("values"), nb::arg("policy"), nb::arg("seed") = 0);
  m.def("_tensor_from_float32", &from_floats<float>, nb::arg("values"), nb::arg("policy"), nb::arg("seed") = 0);
  m.def("_tensor_from_codes",
        [](const std::vector<std::uint64_t>& codes, const std::vector<std::int64_t>& shape, nb::handle policy) {
          return Tensor::from_codes(codes, shape, policy_argument(policy, "policy"));
        });
  m.def("_native_numpy_dtype", [](nb::handle spec) -> nb::object {
    auto native = native_dtype(policy_argument(spec, "dtype").storage);
    if (!native) return nb::none();
    switch (native->code) {
      case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float):
        return nb::str(("float" + std::to_string(native->bits)).c_str());
      case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int):
        return nb::str(("int" + std::to_string(native->bits)).c_str());
      case static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt):
        return nb::str(("uint" + std::to_string(native->bits)).c_str());
      case static_cast<std::uint8_t>(nb::dlpack::dtype_code::Complex):
        return nb::str(("complex" + std::to_string(native->bits)).c_str());
      default: return nb::str("bool");
    }
  });
  m.def("execute_op", &execute_op_py, nb::arg("name"), nb::arg("inputs"), nb::arg("attrs"),
        "Runs one Graph IR op eagerly: on a cached compiled single-op executable, or on the reference executor with "
        "TESSERA_EAGER=reference.");
  m.def("_eager_cache_size", &schedule::eager_cache_size);
  m.def("eager_backend", &schedule::eager_backend);
}

}  // namespace tessera::python
