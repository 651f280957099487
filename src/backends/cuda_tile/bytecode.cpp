// The CUDA Tile IR bytecode writer (see the header). Field layouts follow the
// published format at version 13.3; each op's comment gives its layout.
#include "tessera/backends/cuda_tile/bytecode.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "backends/cuda_tile/bytecode_format.h"
#include "tessera/numerics/convert.h"
#include "tessera/support/error.h"

namespace tessera::cuda_tile {

namespace f = format;

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  do {
    std::uint8_t byte = v & 0x7F;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out.push_back(byte);
  } while (v != 0);
}

void put_signed_varint(std::vector<std::uint8_t>& out, std::int64_t v) {
  // Zigzag: the sign moves to the low bit so small magnitudes stay short.
  const auto u = static_cast<std::uint64_t>(v);
  put_varint(out, (u << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

namespace {

template <typename T>
void put_le(std::vector<std::uint8_t>& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
}

// A list of fixed-width integers: count (varint), then each little-endian.
template <typename T>
void put_int_list(std::vector<std::uint8_t>& out, const std::vector<T>& values) {
  put_varint(out, values.size());
  for (T v : values) put_le(out, v);
}

void pad_to(std::vector<std::uint8_t>& out, std::size_t alignment) {
  while (out.size() % alignment != 0) out.push_back(f::kAlignmentByte);
}

// A table section body: count, padding to the offset width, one offset per
// entry (relative to the data), then the entries' data.
template <typename Offset>
std::vector<std::uint8_t> table(const std::vector<std::vector<std::uint8_t>>& entries, std::size_t start) {
  std::vector<std::uint8_t> out;
  put_varint(out, entries.size());
  // Padding is relative to the section start, which the caller aligns.
  (void)start;
  pad_to(out, sizeof(Offset));
  Offset at = 0;
  for (const auto& e : entries) {
    put_le<Offset>(out, at);
    at += static_cast<Offset>(e.size());
  }
  for (const auto& e : entries) out.insert(out.end(), e.begin(), e.end());
  return out;
}

// A section: id (high bit: aligned), length, alignment and padding to it
// (relative to the start of the file), then the body.
void put_section(std::vector<std::uint8_t>& file, std::uint8_t id, const std::vector<std::uint8_t>& body,
                 std::size_t alignment) {
  file.push_back(static_cast<std::uint8_t>(id | (alignment > 1 ? f::section::aligned : 0)));
  put_varint(file, body.size());
  if (alignment > 1) {
    put_varint(file, alignment);
    pad_to(file, alignment);
  }
  file.insert(file.end(), body.begin(), body.end());
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s;
  for (std::int64_t d : dims) s += (d == Module::kDynamic ? std::string("?") : std::to_string(d)) + "x";
  return s;
}

}  // namespace

bool is_float(Elem e) {
  switch (e) {
    case Elem::f16: case Elem::bf16: case Elem::f32: case Elem::tf32: case Elem::f64:
    case Elem::f8e4m3fn: case Elem::f8e5m2: return true;
    default: return false;
  }
}

int bit_width(Elem e) {
  switch (e) {
    case Elem::i1: return 1;
    case Elem::i8: case Elem::f8e4m3fn: case Elem::f8e5m2: return 8;
    case Elem::i16: case Elem::f16: case Elem::bf16: return 16;
    case Elem::i32: case Elem::f32: return 32;
    case Elem::tf32: return 19;
    case Elem::i64: case Elem::f64: return 64;
  }
  return 0;
}

std::string_view elem_name(Elem e) {
  switch (e) {
    case Elem::i1: return "i1"; case Elem::i8: return "i8"; case Elem::i16: return "i16";
    case Elem::i32: return "i32"; case Elem::i64: return "i64"; case Elem::f16: return "f16";
    case Elem::bf16: return "bf16"; case Elem::f32: return "f32"; case Elem::tf32: return "tf32";
    case Elem::f64: return "f64"; case Elem::f8e4m3fn: return "f8E4M3FN"; case Elem::f8e5m2: return "f8E5M2";
  }
  return "?";
}

// What the writer remembers of a type: for tiles the element and shape, and
// the text form of every type.
struct Module::TypeInfo {
  bool is_tile = false;
  Elem elem = Elem::i1;
  std::vector<std::int64_t> shape;
  std::string text;
  TypeRef element;  // a tile's element type (a number or a pointer)
};

Module::Module(std::string name) : name_(std::move(name)), infos_(new std::vector<TypeInfo>()) {}
Module::~Module() {
  delete body_;
  delete infos_;
}

TypeRef Module::intern(std::vector<std::uint8_t> encoding, TypeInfo info) {
  for (std::size_t i = 0; i < types_.size(); ++i) {
    if (types_[i] == encoding) return TypeRef{static_cast<std::uint32_t>(i)};
  }
  types_.push_back(std::move(encoding));
  infos_->push_back(std::move(info));
  return TypeRef{static_cast<std::uint32_t>(types_.size() - 1)};
}

TypeRef Module::elem(Elem e) {
  return intern({static_cast<std::uint8_t>(e)}, TypeInfo{false, e, {}, std::string(elem_name(e))});
}

TypeRef Module::tile(Elem e, const std::vector<std::int64_t>& shape) { return tile_of(elem(e), shape); }

TypeRef Module::tile_of(TypeRef el, const std::vector<std::int64_t>& shape) {
  // tag, element type, shape (i64 list; empty for a scalar).
  std::vector<std::uint8_t> enc{f::type_tag::tile};
  put_varint(enc, el.id);
  put_int_list<std::int64_t>(enc, shape);
  const TypeInfo& e = (*infos_)[el.id];
  return intern(std::move(enc), TypeInfo{true, e.elem, shape, "tile<" + dims_text(shape) + e.text + ">", el});
}

TypeRef Module::pointer(Elem pointee) {
  const TypeRef el = elem(pointee);
  // 13.3: the pointee only (the flags field came in 13.4).
  std::vector<std::uint8_t> enc{f::type_tag::pointer};
  put_varint(enc, el.id);
  return intern(std::move(enc), TypeInfo{false, pointee, {}, "ptr<" + std::string(elem_name(pointee)) + ">"});
}

TypeRef Module::token() {
  return intern({f::type_tag::token}, TypeInfo{false, Elem::i1, {}, "token"});
}

TypeRef Module::tensor_view(Elem e, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  const TypeRef el = elem(e);
  std::vector<std::uint8_t> enc{f::type_tag::tensor_view};
  put_varint(enc, el.id);
  put_int_list<std::int64_t>(enc, shape);
  put_int_list<std::int64_t>(enc, strides);
  std::string st;
  for (std::size_t i = 0; i < strides.size(); ++i) {
    st += (i ? "," : "") + (strides[i] == kDynamic ? std::string("?") : std::to_string(strides[i]));
  }
  return intern(std::move(enc), TypeInfo{false, e, {}, "tensor_view<" + dims_text(shape) + std::string(elem_name(e)) +
                                                           ", strides=[" + st + "]>"});
}

TypeRef Module::partition_view(const std::vector<std::int32_t>& tile_shape, TypeRef tv, std::optional<Padding> padding) {
  // 13.3: flags (bit 0: padding present), tile shape (i32 list), the tensor
  // view, the dim map (i32 list; identity here), then the padding byte.
  std::vector<std::uint8_t> enc{f::type_tag::partition_view};
  put_varint(enc, padding ? 1 : 0);
  put_int_list<std::int32_t>(enc, tile_shape);
  put_varint(enc, tv.id);
  std::vector<std::int32_t> dim_map;
  for (std::size_t i = 0; i < tile_shape.size(); ++i) dim_map.push_back(static_cast<std::int32_t>(i));
  put_int_list<std::int32_t>(enc, dim_map);
  if (padding) enc.push_back(static_cast<std::uint8_t>(*padding));
  std::string shape;
  for (std::size_t i = 0; i < tile_shape.size(); ++i) shape += (i ? "x" : "") + std::to_string(tile_shape[i]);
  static const char* const kPad[] = {"zero", "neg_zero", "nan", "pos_inf", "neg_inf"};
  return intern(std::move(enc),
                TypeInfo{false, (*infos_)[tv.id].elem, {},
                         "partition_view<tile=(" + shape + ")" +
                             (padding ? std::string(", padding_value = ") + kPad[static_cast<int>(*padding)] : "") +
                             ", " + (*infos_)[tv.id].text + ">"});
}

TypeRef Module::function(const std::vector<TypeRef>& params) {
  std::vector<std::uint8_t> enc{f::type_tag::function};
  put_varint(enc, params.size());
  for (TypeRef p : params) put_varint(enc, p.id);
  put_varint(enc, 0);  // no results: kernels return nothing
  return intern(std::move(enc), TypeInfo{false, Elem::i1, {}, "function"});
}

Elem Module::elem_of(TypeRef t) const { return (*infos_)[t.id].elem; }
std::vector<std::int64_t> Module::shape_of(TypeRef t) const { return (*infos_)[t.id].shape; }
TypeRef Module::reshaped(TypeRef tile_type, const std::vector<std::int64_t>& shape) {
  return tile_of((*infos_)[tile_type.id].element, shape);
}
std::string Module::type_text(TypeRef t) const { return (*infos_)[t.id].text; }

std::uint32_t Module::string_index(std::string_view s) {
  for (std::size_t i = 0; i < strings_.size(); ++i) {
    if (strings_[i] == s) return static_cast<std::uint32_t>(i);
  }
  strings_.emplace_back(s);
  return static_cast<std::uint32_t>(strings_.size() - 1);
}

std::uint32_t Module::constant_index(const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> enc;
  put_varint(enc, data.size());
  enc.insert(enc.end(), data.begin(), data.end());
  for (std::size_t i = 0; i < constants_.size(); ++i) {
    if (constants_[i] == enc) return static_cast<std::uint32_t>(i);
  }
  constants_.push_back(std::move(enc));
  return static_cast<std::uint32_t>(constants_.size() - 1);
}

Body& Module::begin_entry(std::string_view name, const std::vector<TypeRef>& params,
                          const std::vector<std::string>& param_names) {
  if (body_ != nullptr) raise(ErrorCode::Internal, "cuda_tile writer: one entry at a time");
  entry_name_ = std::string(name);
  entry_sig_ = function(params);
  body_ = new Body(*this);
  std::string sig;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Value v{body_->next_id_++, params[i], next_name()};
    body_->params_.push_back(v);
    sig += (i ? ", " : "") + std::string("%") + std::to_string(v.name) +
           (i < param_names.size() ? " /*" + param_names[i] + "*/" : "") + ": " + type_text(params[i]);
  }
  entry_line_ = lines_.size();
  entry_occupancy_.reset();
  lines_.push_back("  entry @" + entry_name_ + "(" + sig + ") {");
  return *body_;
}

void Module::entry_hints(const std::string& arch, int occupancy) {
  if (body_ == nullptr) raise(ErrorCode::Internal, "cuda_tile writer: entry hints outside an entry");
  entry_occupancy_ = std::make_pair(arch, occupancy);
  std::string& line = lines_.at(entry_line_);
  line.insert(line.size() - 2, " optimization_hints = <" + arch + " = {occupancy = " + std::to_string(occupancy) + "}>");
}

void Module::end_entry() {
  if (body_ == nullptr || !body_->open_.empty()) raise(ErrorCode::Internal, "cuda_tile writer: unbalanced entry");
  // Function record: name, signature, flags, location (0 = unknown, so no
  // debug section is needed), body length, body.
  put_varint(functions_, string_index(entry_name_));
  put_varint(functions_, entry_sig_.id);
  functions_.push_back(f::kFunctionKernel | (entry_occupancy_ ? f::kFunctionHints : 0));
  put_varint(functions_, 0);
  if (entry_occupancy_) {
    // A tagged optimization_hints: {arch: {occupancy: i32}}.
    functions_.push_back(f::attr_tag::optimization_hints);
    put_varint(functions_, 1);
    put_varint(functions_, string_index(entry_occupancy_->first));
    functions_.push_back(f::attr_tag::dictionary);
    put_varint(functions_, 1);
    put_varint(functions_, string_index("occupancy"));
    functions_.push_back(f::attr_tag::integer);
    put_varint(functions_, elem(Elem::i32).id);
    put_varint(functions_, static_cast<std::uint64_t>(entry_occupancy_->second));
  }
  put_varint(functions_, body_->buf_.size());
  functions_.insert(functions_.end(), body_->buf_.begin(), body_->buf_.end());
  ++num_functions_;
  delete body_;
  body_ = nullptr;
  lines_.push_back("  }");
}

std::vector<std::uint8_t> Module::bytes() const {
  std::vector<std::uint8_t> file(std::begin(f::kMagic), std::end(f::kMagic));
  file.push_back(f::kVersionMajor);
  file.push_back(f::kVersionMinor);
  put_le<std::uint16_t>(file, f::kVersionTag);

  std::vector<std::uint8_t> funcs;
  put_varint(funcs, num_functions_);
  funcs.insert(funcs.end(), functions_.begin(), functions_.end());
  put_section(file, f::section::func, funcs, 8);
  put_section(file, f::section::constant, table<std::uint64_t>(constants_, 0), 8);
  put_section(file, f::section::type, table<std::uint32_t>(types_, 0), 4);
  std::vector<std::vector<std::uint8_t>> strings;
  for (const std::string& s : strings_) strings.emplace_back(s.begin(), s.end());
  put_section(file, f::section::string, table<std::uint32_t>(strings, 0), 4);
  file.push_back(f::section::end);
  return file;
}

std::string Module::text() const {
  std::string out = "cuda_tile.module @" + name_ + " {\n";
  for (const std::string& l : lines_) out += l + "\n";
  return out + "}\n";
}

// ---- Body -----------------------------------------------------------------

void Body::op(std::uint32_t opcode) {
  put_varint(buf_, opcode);
  ++num_ops_;
}
void Body::var(std::uint64_t v) { put_varint(buf_, v); }
void Body::operand(Value v) { put_varint(buf_, v.id); }
Value Body::result(TypeRef t) { return Value{next_id_++, t, m_.next_name()}; }
void Body::line(const std::string& text) { m_.text_lines().push_back(std::string(indent_ + 2, ' ') + text); }
std::string Body::ref(Value v) const { return "%" + std::to_string(v.name); }

Value Body::constant(TypeRef t, const std::vector<std::uint8_t>& bytes, std::string_view shown) {
  // opcode, result type, constant-pool index (the element's raw bytes: a splat).
  op(f::op::constant);
  var(t.id);
  var(m_.constant_index(bytes));
  Value r = result(t);
  line(ref(r) + " = constant <" + std::string(elem_name(m_.elem_of(t))) + ": " + std::string(shown) + "> : " +
       m_.type_text(t));
  return r;
}

Value Body::constant_int(TypeRef t, std::int64_t v) {
  const Elem e = m_.elem_of(t);
  std::vector<std::uint8_t> bytes;
  if (e == Elem::i1) {
    bytes.push_back(v ? 0xFF : 0x00);  // a true i1 element is all ones
  } else {
    for (int i = 0; i < bit_width(e) / 8; ++i) bytes.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
  }
  return constant(t, bytes, std::to_string(v));
}

Value Body::constant_float(TypeRef t, double v) {
  const Elem e = m_.elem_of(t);
  std::vector<std::uint8_t> bytes;
  if (e == Elem::f32) {
    const float x = static_cast<float>(v);
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    put_le(bytes, bits);
  } else if (e == Elem::f64) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put_le(bytes, bits);
  } else if (e == Elem::f16 || e == Elem::bf16) {
    // The value rounded to the format (nearest even, overflow to inf), as
    // Tessera's encoder stores it.
    const std::uint64_t bits = encode_value(v, e == Elem::f16 ? DType::fp16 : DType::bf16);
    put_le(bytes, static_cast<std::uint16_t>(bits));
  } else {
    raise(ErrorCode::Compile, "cuda_tile: a constant of " + std::string(elem_name(e)) +
                                       " is not supported by this target yet (fp64, fp32, fp16 and bf16 constants are)");
  }
  std::ostringstream shown;
  shown.precision(17);
  shown << v;
  return constant(t, bytes, shown.str());
}

namespace {
std::string list(const std::vector<Value>& vs, const std::function<std::string(Value)>& f) {
  std::string s;
  for (std::size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + f(vs[i]);
  return s;
}

bool types_match(const std::vector<Value>& values, const std::vector<TypeRef>& types) {
  if (values.size() != types.size()) return false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(values[i].type == types[i])) return false;
  }
  return true;
}
}  // namespace

Value Body::make_tensor_view(TypeRef view_type, Value base, const std::vector<Value>& shape,
                             const std::vector<Value>& strides) {
  // opcode, results (sized: 1), base, shape operands (sized), stride operands (sized).
  op(f::op::make_tensor_view);
  var(1);
  var(view_type.id);
  operand(base);
  var(shape.size());
  for (Value v : shape) operand(v);
  var(strides.size());
  for (Value v : strides) operand(v);
  Value r = result(view_type);
  auto name = [&](Value v) { return ref(v); };
  line(ref(r) + " = make_tensor_view " + ref(base) + ", shape = [" + list(shape, name) + "], strides = [" +
       list(strides, name) + "] : " + m_.type_text(view_type));
  return r;
}

Value Body::make_partition_view(TypeRef view_type, Value tv) {
  op(f::op::make_partition_view);
  var(view_type.id);
  operand(tv);
  Value r = result(view_type);
  line(ref(r) + " = make_partition_view " + ref(tv) + " : " + m_.type_text(view_type));
  return r;
}

// An op of no operands with three i32 results (the x, y, z of the launch grid).
std::vector<Value> Body::grid_triple(std::uint32_t opcode, const char* name) {
  const TypeRef i32 = m_.tile(Elem::i32, {});
  op(opcode);
  for (int i = 0; i < 3; ++i) var(i32.id);
  std::vector<Value> r{result(i32), result(i32), result(i32)};
  line(ref(r[0]) + ", " + ref(r[1]) + ", " + ref(r[2]) + " = " + name + " : tile<i32>");
  return r;
}

std::vector<Value> Body::tile_block_id() {
  return grid_triple(f::op::get_tile_block_id, "get_tile_block_id");
}

std::vector<Value> Body::num_tile_blocks() {
  return grid_triple(f::op::get_num_tile_blocks, "get_num_tile_blocks");
}

// The optimization_hints attribute of an op (not tagged: the op's field
// says what it is): a dictionary of one entry, the architecture, whose value
// is a tagged dictionary of the hints (keys sorted, as the dialect prints them).
std::string Body::view_hints(const ViewHints& hints) {
  var(1);
  var(m_.string_index(hints.arch));
  var(f::attr_tag::dictionary);
  var((hints.allow_tma ? 1 : 0) + (hints.latency ? 1 : 0));
  std::string shown;
  if (hints.allow_tma) {
    var(m_.string_index("allow_tma"));
    var(f::attr_tag::bool_);
    buf_.push_back(*hints.allow_tma ? 1 : 0);
    shown = std::string("allow_tma = ") + (*hints.allow_tma ? "true" : "false");
  }
  if (hints.latency) {
    var(m_.string_index("latency"));
    var(f::attr_tag::integer);
    var(m_.elem(Elem::i32).id);
    var(static_cast<std::uint64_t>(*hints.latency));
    shown += (shown.empty() ? "" : ", ") + std::string("latency = ") + std::to_string(*hints.latency);
  }
  return " optimization_hints = <" + hints.arch + " = {" + shown + "}>";
}

Value Body::load_view(TypeRef tile_type, Value view, const std::vector<Value>& index, std::optional<Value> token,
                      Value* token_out, const ViewHints& hints) {
  // opcode, results (sized: tile, token), flags (no scope; the hints' and
  // the token's bits), ordering (weak), the hints if any, view, index
  // (sized), the token if any. 13.3 has no `inbounds` field.
  op(f::op::load_view_tko);
  var(2);
  var(tile_type.id);
  var(m_.token().id);
  var((token ? f::view_flag::token : 0) | (hints.empty() ? 0 : f::view_flag::hints));
  buf_.push_back(f::memory::weak);
  const std::string shown_hints = hints.empty() ? std::string() : view_hints(hints);
  operand(view);
  var(index.size());
  for (Value v : index) operand(v);
  if (token) operand(*token);
  Value r = result(tile_type);
  Value t = result(m_.token());
  if (token_out) *token_out = t;
  line(ref(r) + ", " + ref(t) + " = load_view_tko weak " + ref(view) + "[" +
       list(index, [&](Value v) { return ref(v); }) + "]" + (token ? " token=" + ref(*token) : std::string()) +
       shown_hints + " : " + m_.type_text(tile_type));
  return r;
}

Value Body::store_view(Value tile, Value view, const std::vector<Value>& index, std::optional<Value> token,
                       const ViewHints& hints) {
  op(f::op::store_view_tko);
  var(1);
  var(m_.token().id);
  var((token ? f::view_flag::token : 0) | (hints.empty() ? 0 : f::view_flag::hints));
  buf_.push_back(f::memory::weak);
  const std::string shown_hints = hints.empty() ? std::string() : view_hints(hints);
  operand(tile);
  operand(view);
  var(index.size());
  for (Value v : index) operand(v);
  if (token) operand(*token);
  Value t = result(m_.token());
  line(ref(t) + " = store_view_tko weak " + ref(tile) + ", " + ref(view) + "[" +
       list(index, [&](Value v) { return ref(v); }) + "]" + (token ? " token=" + ref(*token) : std::string()) +
       shown_hints + " : " + m_.type_text(tile.type));
  return t;
}
Value Body::make_token() {
  // opcode, result type (token).
  op(f::op::make_token);
  var(m_.token().id);
  Value t = result(m_.token());
  line(ref(t) + " = make_token : token");
  return t;
}
Value Body::join_tokens(const std::vector<Value>& tokens) {
  // opcode, result types (sized, as in every op with a variadic operand:
  // the token), operands (sized).
  op(f::op::join_tokens);
  var(1);
  var(m_.token().id);
  var(tokens.size());
  for (Value v : tokens) operand(v);
  Value t = result(m_.token());
  line(ref(t) + " = join_tokens " + list(tokens, [&](Value v) { return ref(v); }) + " : token");
  return t;
}

Value Body::load_ptr(TypeRef tile_type, Value ptrs, std::optional<Value> mask, std::optional<Value> padding,
                     std::optional<Value> token, Value* token_out) {
  // The format requires the mask to have the pointers' shape and the padding
  // to be of the result type exactly (no splat of a scalar); a padding means
  // something only with a mask.
  if (padding && !mask) raise(ErrorCode::Internal, "cuda_tile writer: load_ptr padding without a mask");
  if (mask && m_.shape_of(mask->type) != m_.shape_of(ptrs.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: load_ptr mask " + m_.type_text(mask->type) + " for " +
                                   m_.type_text(ptrs.type));
  }
  if (padding && !(padding->type == tile_type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: load_ptr padding " + m_.type_text(padding->type) + " for " +
                                   m_.type_text(tile_type));
  }
  // opcode, result types (tile, token; not sized: no operand is variadic),
  // flags (which optional fields follow), ordering (weak), pointers, then
  // the mask, padding and token where present.
  op(f::op::load_ptr_tko);
  var(tile_type.id);
  var(m_.token().id);
  var((mask ? f::load_ptr_flag::mask : 0) | (padding ? f::load_ptr_flag::padding : 0) |
      (token ? f::load_ptr_flag::token : 0));
  buf_.push_back(f::memory::weak);
  operand(ptrs);
  if (mask) operand(*mask);
  if (padding) operand(*padding);
  if (token) operand(*token);
  Value r = result(tile_type);
  Value t = result(m_.token());
  if (token_out) *token_out = t;
  std::string operands = ref(ptrs), types = m_.type_text(ptrs.type);
  for (const std::optional<Value>& v : {mask, padding}) {
    if (!v) continue;
    operands += ", " + ref(*v);
    types += ", " + m_.type_text(v->type);
  }
  line(ref(r) + ", " + ref(t) + " = load_ptr_tko weak " + operands + (token ? " token=" + ref(*token) : std::string()) +
       " : " + types + " -> " + m_.type_text(tile_type) + ", token");
  return r;
}

Value Body::store_ptr(Value ptrs, Value value, std::optional<Value> mask, std::optional<Value> token) {
  if (mask && m_.shape_of(mask->type) != m_.shape_of(ptrs.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: store_ptr mask " + m_.type_text(mask->type) + " for " +
                                   m_.type_text(ptrs.type));
  }
  // opcode, result type (token), flags, ordering (weak), pointers, value,
  // then the mask and token where present.
  op(f::op::store_ptr_tko);
  var(m_.token().id);
  var((mask ? f::store_ptr_flag::mask : 0) | (token ? f::store_ptr_flag::token : 0));
  buf_.push_back(f::memory::weak);
  operand(ptrs);
  operand(value);
  if (mask) operand(*mask);
  if (token) operand(*token);
  Value t = result(m_.token());
  line(ref(t) + " = store_ptr_tko weak " + ref(ptrs) + ", " + ref(value) + (mask ? ", " + ref(*mask) : std::string()) +
       (token ? " token=" + ref(*token) : std::string()) + " : " + m_.type_text(ptrs.type) + ", " +
       m_.type_text(value.type) + (mask ? ", " + m_.type_text(mask->type) : std::string()) + " -> token");
  return t;
}

Value Body::iota(TypeRef tile_type) {
  // opcode, result type: no attributes or operands.
  op(f::op::iota);
  var(tile_type.id);
  Value r = result(tile_type);
  line(ref(r) + " = iota : " + m_.type_text(tile_type));
  return r;
}

Value Body::binary(std::string_view name, Value a, Value b) {
  if (!(a.type == b.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: " + std::string(name) + " of " + m_.type_text(a.type) + " and " +
                                   m_.type_text(b.type));
  }
  struct Form { std::string_view name; std::uint32_t code; int kind; };
  // kind 0: flags(ftz), rounding; 1: flags(nan, ftz); 2: overflow; 3: signedness;
  // 4: signedness, rounding(zero); 5: nothing; 6: signedness unsigned (shrui is
  // shri with an unsigned operand: a logical shift).
  static const Form kForms[] = {
      {"addf", f::op::addf, 0}, {"subf", f::op::subf, 0}, {"mulf", f::op::mulf, 0}, {"divf", f::op::divf, 0},
      {"maxf", f::op::maxf, 1}, {"minf", f::op::minf, 1}, {"addi", f::op::addi, 2}, {"subi", f::op::subi, 2},
      {"muli", f::op::muli, 2}, {"divi", f::op::divi, 4}, {"remi", f::op::remi, 3}, {"maxi", f::op::maxi, 3},
      {"mini", f::op::mini, 3}, {"andi", f::op::andi, 5}, {"ori", f::op::ori, 5}, {"xori", f::op::xori, 5},
      {"shli", f::op::shli, 2}, {"shri", f::op::shri, 3}, {"shrui", f::op::shri, 6}};
  for (const Form& form : kForms) {
    if (form.name != name) continue;
    op(form.code);
    var(a.type.id);
    std::string attrs;
    std::string_view mnemonic = name;
    switch (form.kind) {
      case 0: var(0); buf_.push_back(f::rounding::nearest_even); break;
      case 1: var(1); attrs = " propagate_nan"; break;  // NaN in, NaN out, as the reference
      case 2: buf_.push_back(f::overflow::none); break;
      case 3: buf_.push_back(f::signedness::signed_); attrs = " signed"; break;
      case 4: buf_.push_back(f::signedness::signed_); buf_.push_back(f::rounding::zero); attrs = " signed rounding<zero>"; break;
      case 6: buf_.push_back(f::signedness::unsigned_); attrs = " unsigned"; mnemonic = "shri"; break;
      default: break;
    }
    operand(a);
    operand(b);
    Value r = result(a.type);
    line(ref(r) + " = " + std::string(mnemonic) + " " + ref(a) + ", " + ref(b) + attrs + " : " + m_.type_text(a.type));
    return r;
  }
  raise(ErrorCode::Internal, "cuda_tile writer: no binary op " + std::string(name));
}

Value Body::unary(std::string_view name, Value x) {
  struct Form { std::string_view name; std::uint32_t code; int kind; };
  // kind 0: nothing; 1: rounding(full); 2: flags(ftz), rounding(nearest even); 3: overflow;
  // 4: rounding(approx), the hardware's approximation (exp_approx: exp rounding<approx>);
  // 5: flags(flush to zero), the hardware's base-2 exponential (exp2_ftz: exp2 flush_to_zero).
  static const Form kForms[] = {{"negf", f::op::negf, 0},   {"absf", f::op::absf, 0}, {"absi", f::op::absi, 0},
                                {"log", f::op::log, 0},     {"exp", f::op::exp, 1},   {"tanh", f::op::tanh, 1},
                                {"sqrt", f::op::sqrt, 2},   {"negi", f::op::negi, 3}, {"exp_approx", f::op::exp, 4},
                                {"exp2_ftz", f::op::exp2, 5}};
  for (const Form& form : kForms) {
    if (form.name != name) continue;
    op(form.code);
    var(x.type.id);
    switch (form.kind) {
      case 1: buf_.push_back(f::rounding::full); break;
      case 2: var(0); buf_.push_back(f::rounding::nearest_even); break;
      case 3: buf_.push_back(f::overflow::none); break;
      case 4: buf_.push_back(f::rounding::approx); break;
      case 5: var(1); break;
      default: break;
    }
    operand(x);
    Value r = result(x.type);
    if (form.kind == 4) {
      line(ref(r) + " = exp " + ref(x) + " rounding<approx> : " + m_.type_text(x.type));
      return r;
    }
    if (form.kind == 5) {
      line(ref(r) + " = exp2 " + ref(x) + " flush_to_zero : " + m_.type_text(x.type));
      return r;
    }
    line(ref(r) + " = " + std::string(name) + " " + ref(x) + " : " + m_.type_text(x.type));
    return r;
  }
  raise(ErrorCode::Internal, "cuda_tile writer: no unary op " + std::string(name));
}

Value Body::cmp(Value a, Value b, Cmp pred, bool unordered) {
  if (!(a.type == b.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: cmp of " + m_.type_text(a.type) + " and " + m_.type_text(b.type));
  }
  const Elem e = m_.elem_of(a.type);
  if (unordered && !is_float(e)) raise(ErrorCode::Internal, "cuda_tile writer: unordered cmpi");
  const TypeRef bool_type = m_.tile(Elem::i1, m_.shape_of(a.type));
  op(is_float(e) ? f::op::cmpf : f::op::cmpi);
  var(bool_type.id);
  buf_.push_back(static_cast<std::uint8_t>(pred));
  buf_.push_back(is_float(e) ? (unordered ? f::ordering::unordered : f::ordering::ordered) : f::signedness::signed_);
  operand(a);
  operand(b);
  Value r = result(bool_type);
  static const char* const kPred[] = {"equal", "not_equal", "less_than", "less_than_or_equal", "greater_than",
                                      "greater_than_or_equal"};
  line(ref(r) + " = " + (is_float(e) ? "cmpf " : "cmpi ") + kPred[static_cast<int>(pred)] + " " + ref(a) + ", " +
       ref(b) + (is_float(e) ? (unordered ? " unordered" : " ordered") : " signed") + " : " + m_.type_text(a.type));
  return r;
}

Value Body::select(Value c, Value a, Value b) {
  op(f::op::select);
  var(a.type.id);
  operand(c);
  operand(a);
  operand(b);
  Value r = result(a.type);
  line(ref(r) + " = select " + ref(c) + ", " + ref(a) + ", " + ref(b) + " : " + m_.type_text(a.type));
  return r;
}

Value Body::convert(TypeRef to, Value x, bool is_unsigned) {
  const Elem from = m_.elem_of(x.type), dst = m_.elem_of(to);
  // The signedness of the integer side (an i1 is always read as unsigned: 0 or 1).
  const bool int_unsigned = is_unsigned || from == Elem::i1;
  const std::uint8_t sign = int_unsigned ? f::signedness::unsigned_ : f::signedness::signed_;
  std::string name;
  if (is_float(from) && is_float(dst)) {
    op(f::op::ftof);
    var(to.id);
    buf_.push_back(f::rounding::nearest_even);
    name = "ftof";
  } else if (!is_float(from) && is_float(dst)) {
    op(f::op::itof);
    var(to.id);
    buf_.push_back(sign);
    buf_.push_back(f::rounding::nearest_even);
    name = "itof";
  } else if (is_float(from)) {
    // 13.3: no flags field (saturation came in 13.4); C's truncation toward zero.
    op(f::op::ftoi);
    var(to.id);
    buf_.push_back(is_unsigned ? f::signedness::unsigned_ : f::signedness::signed_);
    buf_.push_back(f::rounding::nearest_int_to_zero);
    name = "ftoi";
  } else if (bit_width(dst) > bit_width(from)) {
    op(f::op::exti);
    var(to.id);
    buf_.push_back(sign);
    name = "exti";
  } else {
    op(f::op::trunci);
    var(to.id);
    buf_.push_back(f::overflow::none);
    name = "trunci";
  }
  operand(x);
  Value r = result(to);
  const bool shown_unsigned = is_unsigned && name != "trunci" && name != "ftof";
  line(ref(r) + " = " + name + " " + ref(x) + (shown_unsigned ? " unsigned" : "") + " : " + m_.type_text(x.type) +
       " -> " + m_.type_text(to));
  return r;
}

// An op of one operand whose only attribute is its result type (broadcast, reshape).
Value Body::retyped(std::uint32_t opcode, const char* name, TypeRef to, Value x) {
  op(opcode);
  var(to.id);
  operand(x);
  Value r = result(to);
  line(ref(r) + " = " + name + " " + ref(x) + " : " + m_.type_text(x.type) + " -> " + m_.type_text(to));
  return r;
}

Value Body::broadcast(TypeRef to, Value x) {
  return retyped(f::op::broadcast, "broadcast", to, x);
}

Value Body::reshape(TypeRef to, Value x) {
  return retyped(f::op::reshape, "reshape", to, x);
}

Value Body::permute(Value x, const std::vector<std::int32_t>& permutation) {
  // opcode, result type, the permutation (i32 list), the operand.
  const std::vector<std::int64_t> in = m_.shape_of(x.type);
  if (permutation.size() != in.size()) raise(ErrorCode::Internal, "cuda_tile writer: permute of the wrong rank");
  std::vector<std::int64_t> out;
  for (std::int32_t d : permutation) out.push_back(in.at(static_cast<std::size_t>(d)));
  const TypeRef to = m_.reshaped(x.type, out);
  op(f::op::permute);
  var(to.id);
  put_int_list<std::int32_t>(buf_, permutation);
  operand(x);
  Value r = result(to);
  std::string dims;
  for (std::size_t i = 0; i < permutation.size(); ++i) dims += (i ? ", " : "") + std::to_string(permutation[i]);
  line(ref(r) + " = permute " + ref(x) + " [" + dims + "] : " + m_.type_text(x.type) + " -> " + m_.type_text(to));
  return r;
}

Value Body::bitcast(TypeRef to, Value x) {
  // The format allows numbers of equal width only (pointers have ops of their own).
  if (bit_width(m_.elem_of(to)) != bit_width(m_.elem_of(x.type)) || m_.shape_of(to) != m_.shape_of(x.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: bitcast " + m_.type_text(x.type) + " -> " + m_.type_text(to));
  }
  return retyped(f::op::bitcast, "bitcast", to, x);
}

Value Body::fma(Value a, Value b, Value c) {
  if (!(a.type == b.type) || !(a.type == c.type)) {
    raise(ErrorCode::Internal, "cuda_tile writer: fma of " + m_.type_text(a.type) + ", " + m_.type_text(b.type) +
                                   " and " + m_.type_text(c.type));
  }
  // opcode, result type, flags (flush to zero: no), rounding, a, b, c.
  op(f::op::fma);
  var(a.type.id);
  var(0);
  buf_.push_back(f::rounding::nearest_even);
  operand(a);
  operand(b);
  operand(c);
  Value r = result(a.type);
  line(ref(r) + " = fma " + ref(a) + ", " + ref(b) + ", " + ref(c) + " : " + m_.type_text(a.type));
  return r;
}

Value Body::assume_div_by(Value x, std::uint64_t divisor) {
  // opcode, result type, the predicate as a self-contained attribute (the
  // op's predicate is an interface: tag, divisor, flags 0 = no every/along),
  // the operand.
  op(f::op::assume);
  var(x.type.id);
  var(f::attr_tag::div_by);
  var(divisor);
  buf_.push_back(0x00);
  operand(x);
  Value r = result(x.type);
  line(ref(r) + " = assume div_by<" + std::to_string(divisor) + ">, " + ref(x) + " : " + m_.type_text(x.type));
  return r;
}

Value Body::assume_bounded(Value x, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  // opcode, result type, the predicate (tag, flags: bit 0 lower bound, bit
  // 1 upper bound, then the bounds as signed varints), the operand.
  op(f::op::assume);
  var(x.type.id);
  var(f::attr_tag::bounded);
  buf_.push_back(static_cast<std::uint8_t>((lo ? 1 : 0) | (hi ? 2 : 0)));
  if (lo) put_signed_varint(buf_, *lo);
  if (hi) put_signed_varint(buf_, *hi);
  operand(x);
  Value r = result(x.type);
  line(ref(r) + " = assume bounded<" + (lo ? std::to_string(*lo) : std::string("?")) + ", " +
       (hi ? std::to_string(*hi) : std::string("?")) + ">, " + ref(x) + " : " + m_.type_text(x.type));
  return r;
}

Value Body::offset(Value ptr, Value elements) {
  op(f::op::offset);
  var(ptr.type.id);
  operand(ptr);
  operand(elements);
  Value r = result(ptr.type);
  line(ref(r) + " = offset " + ref(ptr) + ", " + ref(elements) + " : " + m_.type_text(ptr.type) + ", " +
       m_.type_text(elements.type));
  return r;
}

Value Body::mma(Value a, Value b, Value acc) {
  const bool fl = is_float(m_.elem_of(acc.type));
  op(fl ? f::op::mmaf : f::op::mmai);
  var(acc.type.id);
  if (fl) {
    var(0);  // flags: no fast accumulation (every product added at the accumulator's precision)
  } else {
    buf_.push_back(f::signedness::signed_);
    buf_.push_back(f::signedness::signed_);
  }
  operand(a);
  operand(b);
  operand(acc);
  Value r = result(acc.type);
  line(ref(r) + " = " + (fl ? "mmaf " : "mmai ") + ref(a) + ", " + ref(b) + ", " + ref(acc) + " : " +
       m_.type_text(a.type) + ", " + m_.type_text(b.type) + ", " + m_.type_text(acc.type));
  return r;
}

// A region's ops are written to a buffer of their own with their own op
// count; leaving it writes the count and the ops into the enclosing buffer
// and restores the outer value ids and count (and the text indentation,
// which the begin_* call raised after its header lines).
void Body::enter_region(const char* kind, std::vector<TypeRef> result_types) {
  Open o;
  o.kind = kind;
  o.result_types = std::move(result_types);
  o.outer_buf = std::move(buf_);
  o.outer_next_id = next_id_;
  o.outer_num_ops = num_ops_;
  buf_.clear();
  num_ops_ = 0;
  open_.push_back(std::move(o));
}

std::vector<TypeRef> Body::leave_region() {
  Open o = std::move(open_.back());
  open_.pop_back();
  std::vector<std::uint8_t> inner = std::move(buf_);
  buf_ = std::move(o.outer_buf);
  var(num_ops_);
  buf_.insert(buf_.end(), inner.begin(), inner.end());
  next_id_ = o.outer_next_id;
  num_ops_ = o.outer_num_ops;
  indent_ -= 2;
  return o.result_types;
}

std::vector<Value> Body::begin_for(Value lo, Value hi, Value step, const std::vector<Value>& inits) {
  // opcode, result types (sized), flags (unsigned compare: no), operands
  // (sized: lo, hi, step, inits), then one region: blocks (1), the block's
  // argument types (iv, iters), its op count and ops.
  op(f::op::for_);
  var(inits.size());
  for (Value v : inits) var(v.type.id);
  var(0);
  var(3 + inits.size());
  operand(lo);
  operand(hi);
  operand(step);
  for (Value v : inits) operand(v);
  var(1);  // regions
  var(1);  // blocks in the region
  var(1 + inits.size());
  var(lo.type.id);
  for (Value v : inits) var(v.type.id);
  std::vector<TypeRef> result_types;
  for (Value v : inits) result_types.push_back(v.type);
  enter_region("for", std::move(result_types));
  std::vector<Value> args{result(lo.type)};
  for (Value v : inits) args.push_back(result(v.type));
  std::string iters;
  for (std::size_t i = 0; i < inits.size(); ++i) iters += (i ? ", " : "") + ref(args[i + 1]) + " = " + ref(inits[i]);
  line("for " + ref(args[0]) + " in (" + ref(lo) + " to " + ref(hi) + ", step " + ref(step) + ") : " +
       m_.type_text(lo.type) + (inits.empty() ? "" : " iter_values(" + iters + ")") + " {");
  indent_ += 2;
  return args;
}

std::vector<Value> Body::end_for(const std::vector<Value>& next) {
  if (open_.empty() || open_.back().kind != "for") raise(ErrorCode::Internal, "cuda_tile writer: end_for without for");
  // continue: opcode, result types (none), operands (sized).
  op(f::op::continue_);
  var(0);
  var(next.size());
  for (Value v : next) operand(v);
  line("continue" + (next.empty() ? std::string() : " " + list(next, [&](Value v) { return ref(v); })));
  std::vector<Value> results;
  for (TypeRef t : leave_region()) results.push_back(result(t));
  line("} -> (" + list(results, [&](Value v) { return ref(v); }) + ")");
  return results;
}

std::vector<Value> Body::begin_reduce(Value x, int dim, double identity, TypeRef result_type) {
  // opcode, result types (sized), dim, identities (array of tagged floats),
  // operands (sized), one region whose block takes two scalar tiles.
  const Elem e = m_.elem_of(x.type);
  if (e != Elem::f32 && e != Elem::f64) {
    raise(ErrorCode::Compile, "cuda_tile: reductions of " + std::string(elem_name(e)) + " tiles are not supported");
  }
  op(f::op::reduce);
  var(1);
  var(result_type.id);
  var(static_cast<std::uint64_t>(dim));
  var(1);
  buf_.push_back(f::attr_tag::float_);
  var(m_.elem(e).id);
  if (e == Elem::f32) {
    const float v = static_cast<float>(identity);
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put_signed_varint(buf_, bits);
  } else {
    std::uint64_t bits;
    std::memcpy(&bits, &identity, 8);
    put_signed_varint(buf_, static_cast<std::int64_t>(bits));
  }
  var(1);
  operand(x);
  var(1);  // regions
  var(1);  // blocks
  const TypeRef scalar = m_.tile(e, {});
  var(2);
  var(scalar.id);
  var(scalar.id);
  enter_region("reduce", {result_type});
  std::vector<Value> args{result(scalar), result(scalar)};
  std::ostringstream id;
  id << identity;
  line("reduce " + ref(x) + " dim=" + std::to_string(dim) + " identities=[" + id.str() + " : " +
       std::string(elem_name(e)) + "] : " + m_.type_text(x.type) + " -> " + m_.type_text(result_type));
  line("(" + ref(args[0]) + ": " + m_.type_text(scalar) + ", " + ref(args[1]) + ": " + m_.type_text(scalar) + ") {");
  indent_ += 2;
  return args;
}

Value Body::end_reduce(Value combined) {
  if (open_.empty() || open_.back().kind != "reduce") raise(ErrorCode::Internal, "cuda_tile writer: end_reduce without reduce");
  op(f::op::yield);
  var(0);
  var(1);
  operand(combined);
  line("yield " + ref(combined));
  Value r = result(leave_region().at(0));
  line("} -> " + ref(r));
  return r;
}

// yield: opcode, result types (sized: none), operands (sized).
void Body::yield_op(const std::vector<Value>& values) {
  op(f::op::yield);
  var(0);
  var(values.size());
  for (Value v : values) operand(v);
  line("yield" + (values.empty() ? std::string()
                                 : " " + list(values, [&](Value v) { return ref(v); }) + " : " +
                                       list(values, [&](Value v) { return m_.type_text(v.type); })));
}

void Body::begin_if(Value cond, const std::vector<TypeRef>& result_types) {
  // opcode, result types (sized), the condition (not sized: the only
  // operand), regions (always 2: then, else), then the then region: blocks
  // (1), the block's arguments (none), its op count and ops. Every block ends
  // in a terminator, so even a region with nothing to do holds a `yield`.
  op(f::op::if_);
  var(result_types.size());
  for (TypeRef t : result_types) var(t.id);
  operand(cond);
  var(2);
  var(1);
  var(0);
  std::vector<std::uint32_t> names;
  for (std::size_t i = 0; i < result_types.size(); ++i) names.push_back(m_.next_name());
  std::string head, types;
  for (std::size_t i = 0; i < result_types.size(); ++i) {
    head += (i ? ", %" : "%") + std::to_string(names[i]);
    types += (i ? ", " : "") + m_.type_text(result_types[i]);
  }
  line((head.empty() ? "" : head + " = ") + "if " + ref(cond) + (types.empty() ? "" : " -> (" + types + ")") + " {");
  enter_region("then", result_types);
  open_.back().result_names = std::move(names);
  indent_ += 2;
}

void Body::begin_else(const std::vector<Value>& then_yields) {
  if (open_.empty() || open_.back().kind != "then") raise(ErrorCode::Internal, "cuda_tile writer: begin_else without if");
  if (!types_match(then_yields, open_.back().result_types)) {
    raise(ErrorCode::Internal, "cuda_tile writer: the then region yields other types than the if's results");
  }
  yield_op(then_yields);
  std::vector<std::uint32_t> names = std::move(open_.back().result_names);
  std::vector<TypeRef> result_types = leave_region();
  line("} else {");
  // The else region: blocks (1), arguments (none), then its ops.
  var(1);
  var(0);
  enter_region("else", std::move(result_types));
  open_.back().result_names = std::move(names);
  indent_ += 2;
}

std::vector<Value> Body::end_if(const std::vector<Value>& yields) {
  if (open_.empty() || (open_.back().kind != "then" && open_.back().kind != "else")) {
    raise(ErrorCode::Internal, "cuda_tile writer: end_if without if");
  }
  const bool has_else = open_.back().kind == "else";
  if (!has_else && !open_.back().result_types.empty()) {
    raise(ErrorCode::Internal, "cuda_tile writer: an if with results needs an else region");
  }
  if (!types_match(yields, open_.back().result_types)) {
    raise(ErrorCode::Internal, "cuda_tile writer: a region yields other types than the if's results");
  }
  yield_op(yields);
  const std::vector<std::uint32_t> names = std::move(open_.back().result_names);
  const std::vector<TypeRef> result_types = leave_region();
  if (!has_else) var(0);  // the else region: no blocks
  line("}");
  std::vector<Value> results;
  for (std::size_t i = 0; i < result_types.size(); ++i) results.push_back(Value{next_id_++, result_types[i], names[i]});
  return results;
}

void Body::ret() {
  op(f::op::return_);
  var(0);
  var(0);
  line("return");
}

}  // namespace tessera::cuda_tile
