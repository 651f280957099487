// Python surface of the numerics library: DType and Policy objects, the
// policy modifiers behind `fp8_e4m3 @ accum(fp32)`, and array conversions.
// Argument checking that needs numpy (dtype kinds, shapes) happens in
// python/tessera/numerics.py; this file checks what reaches C++ again, so a
// wrong buffer can never be read or written out of bounds.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>

#include "bindings.h"
#include "tessera/numerics/block_scaled.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/philox.h"
#include "tessera/numerics/policy.h"
#include "tessera/support/error.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

struct PyDType {
  DType value;
};

// One `@ modifier` of the policy sugar.
struct PolicyModifier {
  enum class Kind { Accum, Rounding, Overflow, LossScale } kind;
  DType accum = DType::fp32;
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::inf_nan;
  double loss_scale = 1.0;
};

NumericsPolicy apply(NumericsPolicy policy, const PolicyModifier& modifier) {
  switch (modifier.kind) {
    case PolicyModifier::Kind::Accum: policy.accum = modifier.accum; break;
    case PolicyModifier::Kind::Rounding: policy.rounding = modifier.rounding; break;
    case PolicyModifier::Kind::Overflow: policy.overflow = modifier.overflow; break;
    case PolicyModifier::Kind::LossScale: policy.loss_scale = modifier.loss_scale; break;
  }
  return policy;
}

std::string modifier_repr(const PolicyModifier& modifier) {
  switch (modifier.kind) {
    case PolicyModifier::Kind::Accum: return "tessera.accum(tessera." + std::string(name(modifier.accum)) + ")";
    case PolicyModifier::Kind::Rounding:
      return modifier.rounding == Rounding::stochastic ? "tessera.stochastic_round"
                                                       : "tessera." + std::string(rounding_name(modifier.rounding));
    case PolicyModifier::Kind::Overflow: return "tessera." + std::string(overflow_name(modifier.overflow));
    case PolicyModifier::Kind::LossScale: return "tessera.loss_scale(" + std::to_string(modifier.loss_scale) + ")";
  }
  return "";
}

const PolicyModifier& modifier_argument(nb::handle value) {
  if (!nb::isinstance<PolicyModifier>(value)) {
    raise(ErrorCode::DtypeUnsupported,
          "a dtype or policy can only be combined with '@' and a policy modifier (tessera.accum(...), "
          "tessera.stochastic_round, tessera.toward_zero, tessera.saturate, tessera.loss_scale(...)); got " +
              nb::cast<std::string>(nb::repr(value)));
  }
  return nb::cast<const PolicyModifier&>(value);
}

using Flat = nb::ndarray<nb::c_contig, nb::device::cpu>;

template <typename T>
bool has_dtype(const Flat& array) {
  return array.dtype() == nb::dtype<T>();
}

void require(bool condition, ErrorCode code, const std::string& message) {
  if (!condition) raise(code, message);
}

// The unsigned integer width that holds one encoding of `dtype`.
void check_encodings(const Flat& bits, DType dtype, const char* what) {
  const auto code = static_cast<nb::dlpack::dtype_code>(bits.dtype().code);
  const bool integer = code == nb::dlpack::dtype_code::UInt || code == nb::dlpack::dtype_code::Int;
  require(integer && bits.itemsize() == static_cast<std::size_t>(storage_bytes(dtype)), ErrorCode::DtypeUnsupported,
          std::string(what) + ": encodings of " + std::string(name(dtype)) + " must be a " +
              std::to_string(storage_bytes(dtype) * 8) + "-bit integer array");
}

void encode_into(const Flat& values, nb::handle dtype_arg, const std::string& rounding, const std::string& overflow,
                 std::uint64_t seed, const Flat& out) {
  const DType dtype = dtype_argument(dtype_arg, "encode: dtype");
  EncodeOptions options;
  options.rounding = parse_rounding(rounding);
  options.overflow = parse_overflow(overflow);
  options.seed = seed;
  check_encodings(out, dtype, "encode");
  require(values.size() == out.size(), ErrorCode::ShapeMismatch, "encode: output size differs from input size");
  if (has_dtype<float>(values)) {
    const auto* data = static_cast<const float*>(values.data());
    nb::gil_scoped_release unlocked;
    encode(data, values.size(), dtype, out.data(), options);
  } else if (has_dtype<double>(values)) {
    const auto* data = static_cast<const double*>(values.data());
    nb::gil_scoped_release unlocked;
    encode(data, values.size(), dtype, out.data(), options);
  } else {
    raise(ErrorCode::DtypeUnsupported, "encode: values must be float32 or float64");
  }
}

void decode_into(const Flat& bits, nb::handle dtype_arg, const Flat& out) {
  const DType dtype = dtype_argument(dtype_arg, "decode: dtype");
  check_encodings(bits, dtype, "decode");
  require(bits.size() == out.size(), ErrorCode::ShapeMismatch, "decode: output size differs from input size");
  if (has_dtype<float>(out)) {
    nb::gil_scoped_release unlocked;
    decode(bits.data(), bits.size(), dtype, static_cast<float*>(out.data()));
  } else if (has_dtype<double>(out)) {
    nb::gil_scoped_release unlocked;
    decode(bits.data(), bits.size(), dtype, static_cast<double*>(out.data()));
  } else {
    raise(ErrorCode::DtypeUnsupported, "decode: output must be float32 or float64");
  }
}

// Checks a float32 value array, uint8 codes of the same size, and uint8 scales.
void check_block_arrays(const Flat& values, const Flat& codes, const Flat& scales, std::size_t expected_scales,
                        const char* what) {
  require(has_dtype<float>(values), ErrorCode::DtypeUnsupported, std::string(what) + ": values must be float32");
  require(has_dtype<std::uint8_t>(codes) && has_dtype<std::uint8_t>(scales), ErrorCode::DtypeUnsupported,
          std::string(what) + ": codes and scales must be uint8 arrays");
  require(codes.size() == values.size(), ErrorCode::ShapeMismatch,
          std::string(what) + ": codes must have one entry per value");
  require(scales.size() == expected_scales, ErrorCode::ShapeMismatch,
          std::string(what) + ": expected " + std::to_string(expected_scales) + " scales, got " +
              std::to_string(scales.size()));
}

}  // namespace

DType dtype_argument(nb::handle value, const char* what) {
  if (nb::isinstance<PyDType>(value)) return nb::cast<const PyDType&>(value).value;
  if (nb::isinstance<nb::str>(value)) return parse_dtype(nb::cast<std::string>(value));
  if (nb::isinstance<NumericsPolicy>(value)) return nb::cast<const NumericsPolicy&>(value).storage;
  raise(ErrorCode::DtypeUnknown,
        std::string(what) + " must be a tessera dtype or its name, got " + nb::cast<std::string>(nb::repr(value)));
}

NumericsPolicy policy_argument(nb::handle value, const char* what) {
  if (nb::isinstance<NumericsPolicy>(value)) return nb::cast<const NumericsPolicy&>(value);
  if (nb::isinstance<PyDType>(value)) return default_policy(nb::cast<const PyDType&>(value).value);
  if (nb::isinstance<nb::str>(value)) {
    const auto text = nb::cast<std::string>(value);
    if (text.find('@') != std::string::npos) return parse_policy(text, "<dtype>");
    auto first = text.find_first_not_of(" \t\n");
    auto last = text.find_last_not_of(" \t\n");
    return default_policy(parse_dtype(first == std::string::npos ? "" : text.substr(first, last - first + 1)));
  }
  raise(ErrorCode::DtypeUnknown, std::string(what) + " must be a tessera dtype, policy or their text, got " +
                                     nb::cast<std::string>(nb::repr(value)));
}

nb::object dtype_object(DType dtype) {
  return nb::cast(PyDType{dtype});
}

void bind_numerics(nb::module_& m) {
  nb::class_<PyDType>(m, "DType", "A storage dtype: how one element is stored.")
      .def_prop_ro("name", [](const PyDType& d) { return std::string(name(d.value)); })
      .def_prop_ro("bits", [](const PyDType& d) { return bit_width(d.value); })
      .def_prop_ro(
          "itemsize", [](const PyDType& d) { return storage_bytes(d.value); },
          "bytes one element takes in unpacked storage")
      .def_prop_ro("is_float", [](const PyDType& d) { return is_float(d.value); })
      .def_prop_ro("is_signed", [](const PyDType& d) { return info(d.value).is_signed; })
      .def_prop_ro("is_complex", [](const PyDType& d) { return is_complex(d.value); })
      .def_prop_ro(
          "max",
          [](const PyDType& d) -> nb::object {
            if (!is_float(d.value)) return nb::none();
            return nb::float_(info(d.value).format.max_finite());
          },
          "largest finite value (float formats), else None")
      .def_prop_ro("has_inf", [](const PyDType& d) { return is_float(d.value) && info(d.value).format.has_infinity(); })
      .def_prop_ro("has_nan", [](const PyDType& d) { return is_float(d.value) && info(d.value).format.has_nan(); })
      .def("__repr__", [](const PyDType& d) { return "tessera." + std::string(name(d.value)); })
      .def("__str__", [](const PyDType& d) { return std::string(name(d.value)); })
      .def("__eq__",
           [](const PyDType& d, nb::handle other) {
             DType parsed{};
             if (nb::isinstance<PyDType>(other)) return nb::cast<const PyDType&>(other).value == d.value;
             return nb::isinstance<nb::str>(other) && try_parse_dtype(nb::cast<std::string>(other), parsed) &&
                    parsed == d.value;
           })
      .def("__hash__", [](const PyDType& d) { return std::hash<std::string_view>{}(name(d.value)); })
      .def("__matmul__", [](const PyDType& d, nb::handle modifier) {
        return apply(default_policy(d.value), modifier_argument(modifier));
      });

  nb::class_<NumericsPolicy>(m, "Policy",
                             "A numerics policy: storage dtype, accumulation dtype, rounding, overflow, loss scale.")
      .def(
          "__init__",
          [](NumericsPolicy* self, nb::handle storage, nb::handle accum, const std::string& rounding,
             const std::string& overflow, std::optional<double> loss_scale) {
            NumericsPolicy policy = default_policy(dtype_argument(storage, "Policy: storage"));
            if (!accum.is_none()) policy.accum = dtype_argument(accum, "Policy: accum");
            policy.rounding = parse_rounding(rounding);
            policy.overflow = parse_overflow(overflow);
            if (loss_scale && !(*loss_scale > 0.0 && *loss_scale < INFINITY)) {
              raise(ErrorCode::ArgumentInvalid, "Policy: loss_scale must be a positive finite number");
            }
            policy.loss_scale = loss_scale;
            new (self) NumericsPolicy(policy);
          },
          nb::arg("storage"), nb::arg("accum") = nb::none(), nb::arg("rounding") = "nearest_even",
          nb::arg("overflow") = "inf_nan", nb::arg("loss_scale") = nb::none())
      .def_prop_ro("storage", [](const NumericsPolicy& p) { return PyDType{p.storage}; })
      .def_prop_ro("accum", [](const NumericsPolicy& p) { return PyDType{p.accum}; })
      .def_prop_ro("rounding", [](const NumericsPolicy& p) { return std::string(rounding_name(p.rounding)); })
      .def_prop_ro("overflow", [](const NumericsPolicy& p) { return std::string(overflow_name(p.overflow)); })
      .def_prop_ro("loss_scale", [](const NumericsPolicy& p) { return p.loss_scale; })
      .def("__str__", &print_policy)
      .def("__repr__", [](const NumericsPolicy& p) { return "tessera.dtype(\"" + print_policy(p) + "\")"; })
      .def("__eq__",
           [](const NumericsPolicy& a, nb::handle b) {
             return nb::isinstance<NumericsPolicy>(b) && a == nb::cast<const NumericsPolicy&>(b);
           })
      .def("__hash__", [](const NumericsPolicy& p) { return std::hash<std::string>{}(print_policy(p)); })
      .def("__matmul__",
           [](const NumericsPolicy& p, nb::handle modifier) { return apply(p, modifier_argument(modifier)); });

  nb::class_<PolicyModifier>(m, "PolicyModifier", "One '@' modifier of a numerics policy.")
      .def("__repr__", &modifier_repr);

  m.def("dtypes", [] {
    std::vector<PyDType> out;
    for (DType d : all_dtypes()) out.push_back(PyDType{d});
    return out;
  });
  m.def(
      "dtype",
      [](nb::handle spec) -> nb::object {
        if (nb::isinstance<PyDType>(spec) || nb::isinstance<NumericsPolicy>(spec)) return nb::borrow(spec);
        if (!nb::isinstance<nb::str>(spec)) {
          raise(ErrorCode::DtypeUnknown,
                "tessera.dtype expects a dtype name or policy text, got " + nb::cast<std::string>(nb::repr(spec)));
        }
        const auto text = nb::cast<std::string>(spec);
        const auto first = text.find_first_not_of(" \t\n");
        const auto last = text.find_last_not_of(" \t\n");
        const std::string trimmed = first == std::string::npos ? "" : text.substr(first, last - first + 1);
        // A bare name is a dtype; anything more is policy text, whose parser
        // reports errors with their column.
        if (trimmed.find_first_of("@ \t\n") != std::string::npos) return nb::cast(parse_policy(text, "<dtype>"));
        return nb::cast(PyDType{parse_dtype(trimmed)});
      },
      nb::arg("spec"), "A dtype (\"fp8_e4m3\") or a numerics policy (\"fp8_e4m3 @accum(fp32)\") from text.");
  m.def("accum", [](nb::handle dtype) {
    PolicyModifier modifier{PolicyModifier::Kind::Accum};
    modifier.accum = dtype_argument(dtype, "accum");
    return modifier;
  });
  m.def("loss_scale", [](double scale) {
    if (!(scale > 0.0 && scale < INFINITY)) {
      raise(ErrorCode::ArgumentInvalid, "loss_scale must be a positive finite number, got " + std::to_string(scale));
    }
    PolicyModifier modifier{PolicyModifier::Kind::LossScale};
    modifier.loss_scale = scale;
    return modifier;
  });
  auto rounding_modifier = [](Rounding r) {
    PolicyModifier modifier{PolicyModifier::Kind::Rounding};
    modifier.rounding = r;
    return modifier;
  };
  auto overflow_modifier = [](Overflow o) {
    PolicyModifier modifier{PolicyModifier::Kind::Overflow};
    modifier.overflow = o;
    return modifier;
  };
  m.attr("stochastic_round") = rounding_modifier(Rounding::stochastic);
  m.attr("toward_zero") = rounding_modifier(Rounding::toward_zero);
  m.attr("nearest_even") = rounding_modifier(Rounding::nearest_even);
  m.attr("saturate") = overflow_modifier(Overflow::saturate);
  m.attr("inf_nan") = overflow_modifier(Overflow::inf_nan);

  m.def("_encode_into", &encode_into);
  // Philox4x32-10 on n counters (an [n, 4] uint32 array) with one key: the
  // generator every Tessera random bit comes from (tessera/numerics/philox.h).
  m.def("_philox4x32_into", [](const Flat& counters, std::uint32_t k0, std::uint32_t k1, const Flat& out) {
    require(has_dtype<std::uint32_t>(counters) && has_dtype<std::uint32_t>(out), ErrorCode::DtypeUnsupported,
            "philox4x32: counters must be uint32");
    require(counters.size() % 4 == 0 && out.size() == counters.size(), ErrorCode::ShapeMismatch,
            "philox4x32: counters must have 4 words each");
    const auto* in = static_cast<const std::uint32_t*>(counters.data());
    auto* o = static_cast<std::uint32_t*>(out.data());
    nb::gil_scoped_release unlocked;
    for (std::size_t i = 0; i < counters.size(); i += 4) {
      const auto r = philox4x32({in[i], in[i + 1], in[i + 2], in[i + 3]}, {k0, k1});
      for (int w = 0; w < 4; ++w) o[i + static_cast<std::size_t>(w)] = r[static_cast<std::size_t>(w)];
    }
  });
  m.def("_decode_into", &decode_into);
  m.def("_pack_int4", [](const Flat& codes, const Flat& packed) {
    require(has_dtype<std::uint8_t>(codes) && has_dtype<std::uint8_t>(packed), ErrorCode::DtypeUnsupported,
            "pack_int4: arrays must be uint8");
    require(packed.size() == packed_int4_bytes(codes.size()), ErrorCode::ShapeMismatch, "pack_int4: wrong output size");
    pack_int4(static_cast<const std::uint8_t*>(codes.data()), codes.size(), static_cast<std::uint8_t*>(packed.data()));
  });
  m.def("_unpack_int4", [](const Flat& packed, const Flat& codes) {
    require(has_dtype<std::uint8_t>(codes) && has_dtype<std::uint8_t>(packed), ErrorCode::DtypeUnsupported,
            "unpack_int4: arrays must be uint8");
    require(packed.size() == packed_int4_bytes(codes.size()), ErrorCode::ShapeMismatch,
            "unpack_int4: packed size does not match the element count");
    unpack_int4(static_cast<const std::uint8_t*>(packed.data()), codes.size(),
                static_cast<std::uint8_t*>(codes.data()));
  });
  m.def("scale_count", &scale_count, nb::arg("n"), nb::arg("block"), nb::arg("row_length") = 0);
  m.def("mx_element_emax", [](nb::handle elem) { return mx_element_emax(dtype_argument(elem, "elem")); });
  m.def("_quantize_mx", [](const Flat& values, nb::handle elem, std::size_t block, std::size_t row,
                           const std::string& rounding, std::uint64_t seed, const Flat& codes, const Flat& scales) {
    const DType element = dtype_argument(elem, "quantize_mx: elem");
    mx_element_emax(element);
    check_block_arrays(values, codes, scales, scale_count(values.size(), block, row), "quantize_mx");
    const Rounding mode = parse_rounding(rounding);
    nb::gil_scoped_release unlocked;
    quantize_mx(static_cast<const float*>(values.data()), values.size(), element,
                static_cast<std::uint8_t*>(codes.data()), static_cast<std::uint8_t*>(scales.data()), block, mode, seed,
                row);
  });
  m.def("_dequantize_mx", [](const Flat& codes, const Flat& scales, nb::handle elem, std::size_t block, std::size_t row,
                             const Flat& out) {
    const DType element = dtype_argument(elem, "dequantize_mx: elem");
    mx_element_emax(element);
    check_block_arrays(out, codes, scales, scale_count(out.size(), block, row), "dequantize_mx");
    nb::gil_scoped_release unlocked;
    dequantize_mx(static_cast<const std::uint8_t*>(codes.data()), static_cast<const std::uint8_t*>(scales.data()),
                  out.size(), element, static_cast<float*>(out.data()), block, row);
  });
  m.def("_quantize_nvfp4", [](const Flat& values, std::size_t row, const Flat& codes, const Flat& scales) {
    check_block_arrays(values, codes, scales, scale_count(values.size(), kNvfp4Block, row), "quantize_nvfp4");
    nb::gil_scoped_release unlocked;
    return quantize_nvfp4(static_cast<const float*>(values.data()), values.size(),
                          static_cast<std::uint8_t*>(codes.data()), static_cast<std::uint8_t*>(scales.data()), row);
  });
  m.def("_dequantize_nvfp4", [](const Flat& codes, const Flat& scales, float tensor_scale, std::size_t row,
                                const Flat& out) {
    check_block_arrays(out, codes, scales, scale_count(out.size(), kNvfp4Block, row), "dequantize_nvfp4");
    nb::gil_scoped_release unlocked;
    dequantize_nvfp4(static_cast<const std::uint8_t*>(codes.data()), static_cast<const std::uint8_t*>(scales.data()),
                     tensor_scale, out.size(), static_cast<float*>(out.data()), row);
  });
}

}  // namespace tessera::python
