// Host tensors: the arrays users hold and the reference executor computes on.
//
// A Tensor is a shape, strides (in elements), a numerics policy, a device and
// shared storage. Storage holds encodings: formats of 8 bits or more take
// whole bytes (2 for fp16/bf16, ...), sub-byte formats are packed: element at
// storage index i occupies bits [b*i, b*i + b) of the little-endian byte
// stream, b = 4 for fp4_e2m1 and int4 (two per byte, lower index in the low
// nibble) and b = 6 for fp6 (four per three bytes). Views (transpose, slices
// with steps, broadcasts with stride 0) share storage; wrap() adopts memory
// owned elsewhere (numpy, DLPack) without copying.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/numerics/policy.h"

namespace tessera {

class Tensor {
 public:
  Tensor() = default;

  // Contiguous tensor with every encoding zero (the value 0 in every format
  // except e8m0, whose code 0 is 2^-127).
  static Tensor zeros(std::vector<std::int64_t> shape, const NumericsPolicy& policy);
  // Contiguous tensor whose contents are unspecified (for results a kernel
  // writes in full) on `device`: large host blocks come from the host cache
  // (host_allocator.h), device memory from the device's caching allocator.
  static Tensor empty(std::vector<std::int64_t> shape, const NumericsPolicy& policy, const std::string& device = "cpu");
  // Row-major values encoded with the policy's rounding and overflow;
  // stochastic rounding draws from Philox(seed, element index).
  static Tensor from_values(std::span<const double> values, std::vector<std::int64_t> shape,
                            const NumericsPolicy& policy, std::uint64_t seed = 0);
  // The same from float values (each rounds as its double would), with the
  // vectorized float32 encoders where the policy rounds to nearest even.
  static Tensor from_values(std::span<const float> values, std::vector<std::int64_t> shape,
                            const NumericsPolicy& policy, std::uint64_t seed = 0);
  static Tensor scalar(double value, const NumericsPolicy& policy);
  // Adopts `data` (kept alive by `owner`) without copying. Strides are in
  // elements and may be zero or negative. Sub-byte formats cannot be wrapped.
  static Tensor wrap(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                     const NumericsPolicy& policy, std::shared_ptr<void> owner);
  // Adopts device memory (DLPack import): `data` is an address on `device`
  // ("cuda:N"), kept alive by `owner`. Nothing is copied or checked on the device.
  static Tensor wrap_device(void* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                            const NumericsPolicy& policy, const std::string& device, std::shared_ptr<void> owner);

  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t numel() const;
  const NumericsPolicy& policy() const { return policy_; }
  DType dtype() const { return policy_.storage; }
  const std::string& device() const { return device_; }
  bool defined() const { return storage_ != nullptr; }

  bool is_contiguous() const;
  // Address of element 0 (byte-aligned formats only) of a host tensor; a
  // tensor on another device raises DeviceError (use device_data()).
  void* data() const;
  // Address of element 0 on the tensor's own device (a device pointer for "cuda:N").
  void* device_data() const;
  // The bit stream of a packed sub-byte host tensor (int4, fp4, fp6): element
  // i at bits [i*w, (i+1)*w), as tessera::pack_codes writes it. Other
  // formats raise DtypeError.
  std::uint8_t* packed_data() const;
  // A packed sub-byte host tensor as a contiguous uint8 tensor of the same
  // shape holding one code per byte (how CPU kernels address such buffers),
  // and back: store_byte_codes writes such a uint8 tensor's codes into this
  // packed tensor. Other formats raise DtypeError.
  Tensor to_byte_codes() const;
  void store_byte_codes(const Tensor& codes) const;
  bool is_cpu() const { return device_ == "cpu"; }
  // Bytes one element takes in storage (0 for packed sub-byte formats).
  int element_bytes() const;
  std::int64_t storage_offset() const { return offset_; }

  // Every element decoded, in row-major order of the logical shape. Complex
  // tensors have no single real value per element: DtypeError (use
  // to_complex_values).
  std::vector<double> to_values() const;
  // Every element as a complex number, row-major: complex tensors exactly,
  // real tensors decoded with imaginary part 0.
  std::vector<std::complex<double>> to_complex_values() const;
  // A contiguous complex64/complex128 tensor: each part rounded to nearest
  // even at the part dtype (fp32 or fp64), overflowing to infinity as IEEE
  // does. Other policies: DtypeError.
  static Tensor from_complex_values(std::span<const std::complex<double>> values, std::vector<std::int64_t> shape,
                                    const NumericsPolicy& policy);
  // Every element's encoding, in row-major order.
  std::vector<std::uint64_t> codes() const;
  static Tensor from_codes(std::span<const std::uint64_t> codes, std::vector<std::int64_t> shape,
                           const NumericsPolicy& policy);

  // A contiguous copy (or *this when already contiguous).
  Tensor contiguous() const;
  // Views sharing storage.
  Tensor permute(const std::vector<std::int64_t>& perm) const;
  // A view sharing this tensor's storage: element i of the view sits at
  // element offset + sum(i_d * strides_d) of this tensor's storage, counted
  // from this tensor's element 0 (in elements; strides may be zero).
  // Packed sub-byte formats have no element strides: DtypeError.
  Tensor as_strided(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, std::int64_t offset) const;
  Tensor reshape(const std::vector<std::int64_t>& shape) const;  // copies when not contiguous
  // A view of this tensor's storage read as `policy`'s elements (byte-aligned
  // formats), its element 0 `byte_offset` bytes after this tensor's element 0:
  // a recorded kernel argument placed on a new buffer (a run plan's replay).
  Tensor view_bytes(std::int64_t byte_offset, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                    const NumericsPolicy& policy) const;
  // Names this tensor's storage (its views share it) without keeping it alive:
  // two handles name one allocation when neither owner_before the other.
  std::weak_ptr<const std::byte> storage_handle() const { return storage_; }
  // Same encodings, new policy fields other than storage (accum, rounding, ...).
  Tensor with_policy(const NumericsPolicy& policy) const;
  // The same bytes read as `code` (code_dtype(dtype()), default policy):
  // copies through it move encodings exactly.
  Tensor as_codes() const;
  // A complex tensor's elements read as their parts: a 1-D tensor of
  // 2 * numel() fp32 (complex64) or fp64 (complex128) values, real then
  // imaginary, sharing storage (a copy first when not contiguous). Compiled
  // kernels take complex buffers this way. Other dtypes: DtypeError.
  Tensor as_parts() const;
  // A copy on `device` ("cpu", "cuda", "cuda:N"), or *this when already there.
  // To a GPU the copy is contiguous (same encodings, sub-byte formats packed
  // as on the host); back to the host the strides of a view are kept. Device
  // storage comes from the device's caching allocator and returns to it with
  // the last tensor that shares it. Reading values (to_values, codes, data)
  // needs a host tensor: on a GPU tensor they raise DeviceError.
  Tensor to(const std::string& device) const;

 private:
  // from_values of double or float values.
  template <class V>
  static Tensor encoded(std::span<const V> values, std::vector<std::int64_t> shape, const NumericsPolicy& policy,
                        std::uint64_t seed);

  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  NumericsPolicy policy_;
  std::string device_ = "cpu";
  std::shared_ptr<std::byte> storage_;
  std::int64_t offset_ = 0;  // in elements
};

// Row-major strides for `shape`.
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);
// Bytes needed to hold n elements of `dtype` (packed for sub-byte formats).
std::size_t storage_bytes_for(DType dtype, std::int64_t n);
// "[2, 3] fp16 @accum(fp32)" for messages.
std::string describe(const Tensor& t);

}  // namespace tessera
