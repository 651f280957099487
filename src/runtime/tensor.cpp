#include "tessera/runtime/tensor.h"

#include <cstring>

#include "runtime/strided_walk.h"
#include "tessera/numerics/convert.h"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/host_allocator.h"
#include "tessera/support/error.h"

namespace tessera {

namespace {

// Bits one element takes in packed storage.
int packed_bits(DType dtype) {
  int b = bit_width(dtype);
  return b < 8 ? b : storage_bytes(dtype) * 8;
}

std::uint64_t read_code(const std::byte* base, DType dtype, std::int64_t index) {
  if (is_packed(dtype)) {
    int b = packed_bits(dtype);
    std::uint64_t bit = static_cast<std::uint64_t>(index) * static_cast<std::uint64_t>(b);
    std::uint32_t window = 0;
    // A 6-bit field spans at most two bytes.
    std::memcpy(&window, base + bit / 8, (bit % 8) + static_cast<std::uint64_t>(b) > 8 ? 2 : 1);
    return (window >> (bit % 8)) & ((1u << b) - 1);
  }
  int nb = storage_bytes(dtype);
  std::uint64_t v = 0;
  std::memcpy(&v, base + index * nb, static_cast<std::size_t>(nb));
  return v;
}

void write_code(std::byte* base, DType dtype, std::int64_t index, std::uint64_t code) {
  if (is_packed(dtype)) {
    int b = packed_bits(dtype);
    std::uint64_t bit = static_cast<std::uint64_t>(index) * static_cast<std::uint64_t>(b);
    std::size_t nbytes = (bit % 8) + static_cast<std::uint64_t>(b) > 8 ? 2 : 1;
    std::uint32_t window = 0;
    std::memcpy(&window, base + bit / 8, nbytes);
    std::uint32_t mask = ((1u << b) - 1) << (bit % 8);
    window = (window & ~mask) | ((static_cast<std::uint32_t>(code) << (bit % 8)) & mask);
    std::memcpy(base + bit / 8, &window, nbytes);
    return;
  }
  std::memcpy(base + index * storage_bytes(dtype), &code, static_cast<std::size_t>(storage_bytes(dtype)));
}

// Host-memory reads on a GPU tensor would dereference a device address.
void require_host(const Tensor& t, const char* what) {
  if (!t.is_cpu()) {
    raise(ErrorCode::Device, std::string(what) + " reads host memory but this tensor is on " + t.device() +
                                 "; copy it with .to(\"cpu\") first");
  }
}

// "cuda" -> "cuda:0"; "cpu" stays; anything else raises ArgumentError.
std::string canonical_device(const std::string& device) {
  if (device == "cpu") return device;
  return "cuda:" + std::to_string(cuda::parse_device(device));
}

void check_shape(const std::vector<std::int64_t>& shape) {
  for (auto s : shape) {
    if (s < 0) raise(ErrorCode::ShapeMismatch, "negative dimension " + std::to_string(s) + " in tensor shape");
  }
}

}  // namespace

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::size_t storage_bytes_for(DType dtype, std::int64_t n) {
  if (is_packed(dtype)) {
    return static_cast<std::size_t>((n * packed_bits(dtype) + 7) / 8) + 1;  // +1: two-byte windows stay inside
  }
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(storage_bytes(dtype));
}

Tensor Tensor::empty(std::vector<std::int64_t> shape, const NumericsPolicy& policy, const std::string& device) {
  check_shape(shape);
  Tensor t;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.policy_ = policy;
  const std::size_t bytes = storage_bytes_for(policy.storage, t.numel());
  const std::string target = canonical_device(device);
  if (target == "cpu") {
    t.storage_ = runtime::allocate_host(bytes);
    return t;
  }
  try {
    t.storage_ = std::static_pointer_cast<std::byte>(cuda::allocate_shared(cuda::parse_device(target), std::max<std::size_t>(bytes, 1)));
  } catch (const Error& e) {
    raise(e.code(), "cannot allocate a tensor on " + target + ": " + e.message());
  }
  t.device_ = target;
  return t;
}

Tensor Tensor::zeros(std::vector<std::int64_t> shape, const NumericsPolicy& policy) {
  Tensor t = empty(std::move(shape), policy, "cpu");
  std::memset(t.storage_.get(), 0, std::max<std::size_t>(storage_bytes_for(policy.storage, t.numel()), 1));
  return t;
}

template <class V>
Tensor Tensor::encoded(std::span<const V> values, std::vector<std::int64_t> shape, const NumericsPolicy& policy,
                       std::uint64_t seed) {
  if (is_complex(policy.storage)) {  // real values: imaginary parts 0
    const std::vector<std::complex<double>> c(values.begin(), values.end());
    return from_complex_values(c, std::move(shape), policy);
  }
  Tensor t = zeros(std::move(shape), policy);
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    raise(ErrorCode::ShapeMismatch,
          std::to_string(values.size()) + " values do not fill a tensor of " + std::to_string(t.numel()) + " elements");
  }
  EncodeOptions opts{.rounding = policy.rounding, .overflow = policy.overflow, .seed = seed};
  if (!is_packed(policy.storage)) {
    encode(values.data(), values.size(), policy.storage, t.storage_.get(), opts);
    return t;
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    write_code(t.storage_.get(), policy.storage, static_cast<std::int64_t>(i),
               encode_value(static_cast<double>(values[i]), policy.storage, opts, i));
  }
  return t;
}

Tensor Tensor::from_values(std::span<const double> values, std::vector<std::int64_t> shape,
                           const NumericsPolicy& policy, std::uint64_t seed) {
  return encoded(values, std::move(shape), policy, seed);
}

Tensor Tensor::from_values(std::span<const float> values, std::vector<std::int64_t> shape,
                           const NumericsPolicy& policy, std::uint64_t seed) {
  return encoded(values, std::move(shape), policy, seed);
}

Tensor Tensor::scalar(double value, const NumericsPolicy& policy) {
  return from_values(std::span<const double>(&value, 1), {}, policy);
}

Tensor Tensor::wrap(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                    const NumericsPolicy& policy, std::shared_ptr<void> owner) {
  check_shape(shape);
  if (is_packed(policy.storage)) {
    raise(ErrorCode::DtypeUnsupported,
          std::string(name(policy.storage)) + " is packed below a byte per element and cannot adopt external memory");
  }
  if (shape.size() != strides.size()) raise(ErrorCode::ShapeMismatch, "shape and strides differ in rank");
  Tensor t;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.policy_ = policy;
  t.storage_ = std::shared_ptr<std::byte>(std::move(owner), static_cast<std::byte*>(data));
  return t;
}

Tensor Tensor::wrap_device(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                           const NumericsPolicy& policy, const std::string& device, std::shared_ptr<void> owner) {
  Tensor t = wrap(data, std::move(shape), std::move(strides), policy, std::move(owner));
  t.device_ = canonical_device(device);
  return t;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto s : shape_) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  return strides_ == contiguous_strides(shape_) || numel() <= 1;
}

void* Tensor::data() const {
  require_host(*this, "data()");
  return device_data();
}

void* Tensor::device_data() const {
  if (is_packed(dtype())) raise(ErrorCode::DtypeUnsupported, "packed tensors have no per-element address");
  return storage_.get() + offset_ * storage_bytes(dtype());
}

std::uint8_t* Tensor::packed_data() const {
  require_host(*this, "packed_data()");
  if (!is_packed(dtype())) raise(ErrorCode::DtypeUnsupported, std::string(name(dtype())) + " is not a packed format");
  // Packed tensors have no strided views, so element 0 starts the stream.
  if (offset_ != 0) raise(ErrorCode::Internal, "a packed tensor with an element offset");
  return reinterpret_cast<std::uint8_t*>(storage_.get());
}

Tensor Tensor::to_byte_codes() const {
  std::uint8_t* bits = packed_data();
  Tensor codes = Tensor::empty(shape_, default_policy(DType::uint8));
  unpack_codes(dtype(), bits, static_cast<std::size_t>(numel()), static_cast<std::uint8_t*>(codes.data()));
  return codes;
}

void Tensor::store_byte_codes(const Tensor& codes) const {
  std::uint8_t* bits = packed_data();
  if (codes.dtype() != DType::uint8 || codes.shape() != shape_) {
    raise(ErrorCode::Internal, "store_byte_codes needs a uint8 tensor of the packed tensor's shape");
  }
  const Tensor dense = codes.contiguous();
  pack_codes(dtype(), static_cast<const std::uint8_t*>(dense.data()), static_cast<std::size_t>(numel()), bits);
}

int Tensor::element_bytes() const {
  return is_packed(dtype()) ? 0 : storage_bytes(dtype());
}

std::vector<std::uint64_t> Tensor::codes() const {
  require_host(*this, "codes()");
  if (dtype() == DType::complex128) {
    raise(ErrorCode::DtypeUnsupported, "complex128 elements take 16 bytes and have no 64-bit code; read them with "
                                       "complex values (.numpy())");
  }
  std::vector<std::uint64_t> out;
  out.reserve(static_cast<std::size_t>(numel()));
  for_each_offset(shape_, strides_, offset_,
                  [&](std::int64_t i) { out.push_back(read_code(storage_.get(), dtype(), i)); });
  return out;
}

std::vector<double> Tensor::to_values() const {
  require_host(*this, "to_values()");
  if (is_complex(dtype())) {
    raise(ErrorCode::DtypeUnsupported, std::string(name(dtype())) +
                                           " values are complex; this operation takes real operands only (take "
                                           "real(), imag() or abs() first)");
  }
  std::vector<double> out(static_cast<std::size_t>(numel()));
  if (out.empty()) return out;
  if (is_contiguous() && !is_packed(dtype())) {
    decode(data(), out.size(), dtype(), out.data());
    return out;
  }
  std::size_t k = 0;
  for_each_offset(shape_, strides_, offset_,
                  [&](std::int64_t i) { out[k++] = decode_value(read_code(storage_.get(), dtype(), i), dtype()); });
  return out;
}

std::vector<std::complex<double>> Tensor::to_complex_values() const {
  require_host(*this, "to_complex_values()");
  if (!is_complex(dtype())) {
    const std::vector<double> real = to_values();
    return std::vector<std::complex<double>>(real.begin(), real.end());
  }
  std::vector<std::complex<double>> out;
  out.reserve(static_cast<std::size_t>(numel()));
  const std::byte* base = storage_.get();
  const bool single = dtype() == DType::complex64;
  for_each_offset(shape_, strides_, offset_, [&](std::int64_t i) {
    if (single) {
      float parts[2];
      std::memcpy(parts, base + i * 8, sizeof parts);
      out.emplace_back(parts[0], parts[1]);
    } else {
      double parts[2];
      std::memcpy(parts, base + i * 16, sizeof parts);
      out.emplace_back(parts[0], parts[1]);
    }
  });
  return out;
}

Tensor Tensor::from_complex_values(std::span<const std::complex<double>> values, std::vector<std::int64_t> shape,
                                   const NumericsPolicy& policy) {
  if (!is_complex(policy.storage)) {
    raise(ErrorCode::DtypeUnsupported, "from_complex_values makes complex64 or complex128 tensors, not " +
                                           std::string(name(policy.storage)));
  }
  Tensor t = empty(std::move(shape), policy, "cpu");
  if (static_cast<std::int64_t>(values.size()) != t.numel()) {
    raise(ErrorCode::ShapeMismatch, "value count does not match the shape");
  }
  std::byte* base = t.storage_.get();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (policy.storage == DType::complex64) {
      // The C++ conversion double -> float rounds to nearest even (the default mode).
      const float parts[2] = {static_cast<float>(values[i].real()), static_cast<float>(values[i].imag())};
      std::memcpy(base + i * 8, parts, sizeof parts);
    } else {
      const double parts[2] = {values[i].real(), values[i].imag()};
      std::memcpy(base + i * 16, parts, sizeof parts);
    }
  }
  return t;
}

Tensor Tensor::from_codes(std::span<const std::uint64_t> codes, std::vector<std::int64_t> shape,
                          const NumericsPolicy& policy) {
  if (policy.storage == DType::complex128) {
    raise(ErrorCode::DtypeUnsupported, "complex128 elements take 16 bytes and cannot be built from 64-bit codes");
  }
  Tensor t = zeros(std::move(shape), policy);
  if (static_cast<std::int64_t>(codes.size()) != t.numel()) {
    raise(ErrorCode::ShapeMismatch, "code count does not match the shape");
  }
  for (std::size_t i = 0; i < codes.size(); ++i)
    write_code(t.storage_.get(), t.dtype(), static_cast<std::int64_t>(i), codes[i]);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous() && offset_ == 0) return *this;
  if (!is_cpu()) {
    // Packed (sub-byte) elements share bytes, so a view of them cannot be
    // gathered element by element in memory: those go through the host.
    if (is_packed(dtype())) return to("cpu").contiguous().to(device_);
    // Everything else is gathered on the device, queued on its stream.
    Tensor t = empty(shape_, policy_, device_);
    cuda::strided_copy(cuda::parse_device(device_), reinterpret_cast<cuda::DevicePtr>(t.device_data()),
                       reinterpret_cast<cuda::DevicePtr>(device_data()), static_cast<std::size_t>(element_bytes()),
                       shape_, strides_);
    return t;
  }
  if (is_complex(dtype())) {
    // Elements wider than a 64-bit code: gathered byte for byte.
    Tensor t = empty(shape_, policy_, "cpu");
    const auto bytes = static_cast<std::size_t>(storage_bytes(dtype()));
    std::byte* dst = t.storage_.get();
    for_each_offset(shape_, strides_, offset_, [&](std::int64_t i) {
      std::memcpy(dst, storage_.get() + static_cast<std::size_t>(i) * bytes, bytes);
      dst += bytes;
    });
    return t;
  }
  auto c = codes();
  return from_codes(c, shape_, policy_);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& perm) const {
  if (perm.size() != rank()) raise(ErrorCode::ShapeMismatch, "permutation length differs from tensor rank");
  Tensor t = *this;
  std::vector<bool> seen(rank(), false);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    auto p = perm[i];
    if (p < 0 || p >= static_cast<std::int64_t>(rank()) || seen[static_cast<std::size_t>(p)]) {
      raise(ErrorCode::ShapeMismatch, "invalid permutation");
    }
    seen[static_cast<std::size_t>(p)] = true;
    t.shape_[i] = shape_[static_cast<std::size_t>(p)];
    t.strides_[i] = strides_[static_cast<std::size_t>(p)];
  }
  return t;
}

Tensor Tensor::as_strided(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                          std::int64_t offset) const {
  check_shape(shape);
  if (shape.size() != strides.size()) raise(ErrorCode::ShapeMismatch, "as_strided: shape and strides differ in rank");
  if (is_packed(dtype())) {
    raise(ErrorCode::DtypeUnsupported,
          std::string(name(dtype())) + " is packed below a byte per element and has no strided views");
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = offset_ + offset;
  return t;
}

Tensor Tensor::view_bytes(std::int64_t byte_offset, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                          const NumericsPolicy& policy) const {
  check_shape(shape);
  if (shape.size() != strides.size()) raise(ErrorCode::ShapeMismatch, "view_bytes: shape and strides differ in rank");
  if (is_packed(dtype()) || is_packed(policy.storage)) {
    raise(ErrorCode::DtypeUnsupported, "view_bytes: packed sub-byte formats have no byte offsets");
  }
  const std::int64_t at = offset_ * storage_bytes(dtype()) + byte_offset;
  const std::int64_t size = storage_bytes(policy.storage);
  if (at < 0 || at % size != 0) {
    raise(ErrorCode::ArgumentInvalid, "view_bytes: byte " + std::to_string(at) + " does not start a " +
                                          std::string(name(policy.storage)) + " element");
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.policy_ = policy;
  t.offset_ = at / size;
  return t;
}

Tensor Tensor::reshape(const std::vector<std::int64_t>& shape) const {
  check_shape(shape);
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  if (n != numel()) {
    raise(ErrorCode::ShapeMismatch,
          "cannot reshape " + std::to_string(numel()) + " elements into " + std::to_string(n));
  }
  Tensor t = contiguous();
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::with_policy(const NumericsPolicy& policy) const {
  if (policy.storage != dtype()) {
    raise(ErrorCode::DtypeUnsupported, "with_policy keeps the storage dtype; use cast to change it");
  }
  Tensor t = *this;
  t.policy_ = policy;
  return t;
}

Tensor Tensor::as_codes() const {
  Tensor t = *this;
  t.policy_ = default_policy(code_dtype(dtype()));
  return t;
}

Tensor Tensor::as_parts() const {
  if (!is_complex(dtype())) {
    raise(ErrorCode::DtypeUnsupported, "as_parts reads a complex tensor's parts; this tensor is " + std::string(name(dtype())));
  }
  Tensor t = contiguous();
  t.shape_ = {2 * t.numel()};
  t.strides_ = {1};
  t.offset_ *= 2;
  t.policy_ = default_policy(complex_part(dtype()));
  return t;
}

Tensor Tensor::to(const std::string& device) const {
  const std::string target = canonical_device(device);
  if (target == device_) return *this;
  if (!is_cpu() && target != "cpu") return to("cpu").to(target);  // GPU to GPU through the host
  if (is_cpu()) {
    const int ordinal = cuda::parse_device(target);
    const Tensor host = contiguous();
    const std::size_t bytes = storage_bytes_for(dtype(), numel());
    Tensor t = host;
    try {
      t.storage_ = std::static_pointer_cast<std::byte>(cuda::allocate_shared(ordinal, bytes));
    } catch (const Error& e) {
      // Name the device the user asked for: the driver's message alone does not.
      raise(e.code(), "cannot move a tensor to " + target + ": " + e.message());
    }
    t.offset_ = 0;
    t.device_ = target;
    // The host copy starts at element 0 (contiguous() leaves no offset); packed
    // storage has one spare byte that may be absent from adopted memory.
    const std::size_t exact = is_packed(dtype()) ? bytes - 1 : bytes;
    cuda::copy_to_device(ordinal, reinterpret_cast<cuda::DevicePtr>(t.storage_.get()), host.storage_.get(), exact);
    return t;
  }
  // To the host: copy the span of elements the view touches, keep its strides.
  const int ordinal = cuda::parse_device(device_);
  std::int64_t lo = offset_, hi = offset_;
  for (std::size_t i = 0; i < rank(); ++i) {
    if (shape_[i] == 0) {
      lo = hi = offset_;
      break;
    }
    const std::int64_t reach = (shape_[i] - 1) * strides_[i];
    (reach < 0 ? lo : hi) += reach;
  }
  if (is_packed(dtype())) lo = 0;  // keep the bit alignment of packed fields
  Tensor t = *this;
  t.device_ = "cpu";
  const std::size_t first_byte = is_packed(dtype()) ? 0 : static_cast<std::size_t>(lo) * storage_bytes(dtype());
  const std::size_t bytes = storage_bytes_for(dtype(), hi + 1) - first_byte;
  std::shared_ptr<std::byte> buf = runtime::allocate_host(bytes);
  std::memset(buf.get(), 0, std::max<std::size_t>(bytes, 1));
  t.storage_ = buf;
  t.offset_ = offset_ - lo;
  const std::size_t exact = is_packed(dtype()) ? bytes - 1 : bytes;
  if (numel() > 0) {
    cuda::copy_to_host(ordinal, buf.get(), reinterpret_cast<cuda::DevicePtr>(storage_.get()) + first_byte, exact);
  }
  // The copy waited for the queued work: faults it recorded surface here.
  cuda::run_deferred_checks(ordinal);
  return t;
}

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < t.rank(); ++i) s += (i ? ", " : "") + std::to_string(t.shape()[i]);
  return s + "] " + print_policy(t.policy());
}

}  // namespace tessera
