// A writer of CUDA Tile IR bytecode (the input of NVIDIA's `tileiras`),
// written from the published format: a header (magic, version 13.3), then
// sections (functions, constants, types, strings) and an end marker. Values
// are numbered per function in definition order; a region's block arguments
// and values go out of scope when the region closes, and an op's results are
// numbered after its regions. Every op the writer encodes also appends one
// line to a text rendering (Module::text()), the form inspect_ir("target")
// shows, so the two can never disagree about what was emitted.
//
// Only the ops Tessera's lowering (lower.h) needs are here. Facts about the
// format (opcodes, field order, enum values) are in bytecode_format.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cuda_tile {

// Element types, by their type-table tag.
enum class Elem : std::uint8_t {
  i1 = 0x00, i8 = 0x01, i16 = 0x02, i32 = 0x03, i64 = 0x04,
  f16 = 0x05, bf16 = 0x06, f32 = 0x07, tf32 = 0x08, f64 = 0x09,
  f8e4m3fn = 0x0a, f8e5m2 = 0x0b,
};
bool is_float(Elem e);
int bit_width(Elem e);
std::string_view elem_name(Elem e);  // "f32", "i64", ...

struct TypeRef {
  std::uint32_t id = 0;
  bool operator==(const TypeRef&) const = default;
};

// A value of the function being written: its bytecode number and its type.
struct Value {
  std::uint32_t id = 0;
  TypeRef type;
  std::uint32_t name = 0;  // the text form's %N (unique in the module, unlike id)
};

// Comparison predicates and the rounding of integer division, as encoded.
enum class Cmp : std::uint8_t { eq = 0, ne = 1, lt = 2, le = 3, gt = 4, ge = 5 };
enum class Padding : std::uint8_t { zero = 0, neg_zero = 1, nan = 2, pos_inf = 3, neg_inf = 4 };

class Module;

// Optimization hints of a load_view_tko / store_view_tko for one
// architecture ("sm_90"): `latency` (1-10) tells tileiras how far ahead of
// its use to issue the load, which sets the depth of the pipeline it builds
// for the loop around it; `allow_tma` false keeps it off the bulk tensor
// copies. Unset fields are left to tileiras.
struct ViewHints {
  std::string arch;
  std::optional<int> latency;
  std::optional<bool> allow_tma;
  bool empty() const { return arch.empty() || (!latency && !allow_tma); }
};

// Writes one function's body. Obtained from Module::begin_entry; ops are
// appended in order; regions open and close like brackets.
class Body {
 public:
  const std::vector<Value>& params() const { return params_; }

  // Scalars are rank-0 tiles; `bytes` is the element's little-endian bytes
  // (one element: a splat of the result type).
  Value constant(TypeRef tile_type, const std::vector<std::uint8_t>& bytes, std::string_view shown);
  Value constant_int(TypeRef tile_type, std::int64_t v);
  Value constant_float(TypeRef tile_type, double v);

  Value make_tensor_view(TypeRef view_type, Value base, const std::vector<Value>& dyn_shape,
                         const std::vector<Value>& dyn_strides);
  Value make_partition_view(TypeRef view_type, Value tensor_view);
  // tile_block_id (x, y, z), each tile<i32>.
  std::vector<Value> tile_block_id();
  std::vector<Value> num_tile_blocks();
  // load_view_tko weak: the tile at `index` (in tiles) of a partition view.
  // Memory ops are ordered only by tokens: `token` (optional) is the one the
  // op waits for; the op's own token is returned (stores) or written to
  // `*token_out` (loads).
  Value load_view(TypeRef tile_type, Value view, const std::vector<Value>& index,
                  std::optional<Value> token = std::nullopt, Value* token_out = nullptr, const ViewHints& hints = {});
  Value store_view(Value tile, Value view, const std::vector<Value>& index, std::optional<Value> token = std::nullopt,
                   const ViewHints& hints = {});
  // load_ptr_tko weak: the elements `ptrs` (a tile of pointers) point at; where
  // `mask` (i1, the shape of `ptrs`) is false nothing is read and the element
  // is `padding` (of type `tile_type`, only with a mask; undefined without one).
  Value load_ptr(TypeRef tile_type, Value ptrs, std::optional<Value> mask, std::optional<Value> padding,
                 std::optional<Value> token = std::nullopt, Value* token_out = nullptr);
  // store_ptr_tko weak: stores `value` where `ptrs` point (only where `mask` is true).
  Value store_ptr(Value ptrs, Value value, std::optional<Value> mask, std::optional<Value> token = std::nullopt);
  // make_token: a token that depends on nothing; join_tokens: one that
  // depends on every token given.
  Value make_token();
  Value join_tokens(const std::vector<Value>& tokens);
  // iota: a 1-D integer tile holding 0..n-1.
  Value iota(TypeRef tile_type);

  // Elementwise ops over tiles of one type (float ops round to nearest even, no flush).
  // addf subf mulf divf maxf minf addi subi muli divi remi maxi mini andi ori xori shli shri shrui;
  // shri shifts right arithmetically (signed), shrui logically (unsigned).
  Value binary(std::string_view op, Value lhs, Value rhs);
  Value unary(std::string_view op, Value x);                // negf absf exp exp_approx sqrt tanh negi absi log
  // cmpf (ordered, or unordered: true where either side is NaN) or cmpi (signed).
  Value cmp(Value lhs, Value rhs, Cmp pred, bool unordered = false);
  Value select(Value cond, Value a, Value b);
  // exti trunci itof ftoi ftof, chosen from the types; integers are signed
  // unless `is_unsigned` (i1 always unsigned): exti zero-extends, itof reads
  // unsigned, ftoi produces unsigned.
  Value convert(TypeRef to, Value x, bool is_unsigned = false);
  Value bitcast(TypeRef to, Value x);                       // the same bits as another type of the same width
  Value fma(Value a, Value b, Value c);                     // a*b + c rounded once (nearest even, no flush)
  Value broadcast(TypeRef to, Value x);
  Value reshape(TypeRef to, Value x);
  // The dimensions of x in the order `permutation` gives (a transpose of a 2-D tile: {1, 0}).
  Value permute(Value x, const std::vector<std::int32_t>& permutation);
  Value offset(Value ptr, Value elements);                  // ptr + elements (a scalar pointer tile)
  Value mma(Value a, Value b, Value acc);                   // mmaf or mmai (signed)
  // assume div_by<divisor>: `x` (integers or pointers) is a multiple of `divisor`
  // (a power of two); a promise the compiler may rely on.
  Value assume_div_by(Value x, std::uint64_t divisor);
  // assume bounded<lo, hi>: x (an integer tile) lies in [lo, hi]; either bound may be open.
  Value assume_bounded(Value x, std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

  // for %iv in (lo to hi, step s) iter_values(inits): returns the block's
  // (iv, iters...); end_for(next) writes `continue next` and returns the results.
  std::vector<Value> begin_for(Value lo, Value hi, Value step, const std::vector<Value>& inits);
  std::vector<Value> end_for(const std::vector<Value>& next);
  // reduce x along `dim` with identity `identity`: returns the block's (a, b);
  // end_reduce(r) writes `yield r` and returns the reduced tile.
  std::vector<Value> begin_reduce(Value x, int dim, double identity, TypeRef result_type);
  Value end_reduce(Value combined);
  // if cond -> (result_types) { then } else { else }: begin_if opens the then
  // region (cond is a tile<i1> scalar); begin_else(then_yields) ends it with
  // `yield then_yields` and opens the else region; end_if(yields) ends the open
  // region with `yield yields` and returns the if's results. Without
  // begin_else the if has no else region, allowed only without results.
  void begin_if(Value cond, const std::vector<TypeRef>& result_types);
  void begin_else(const std::vector<Value>& then_yields);
  std::vector<Value> end_if(const std::vector<Value>& yields);

  void ret();

 private:
  friend class Module;
  struct Frame;  // an open region
  Body(Module& m) : m_(m) {}
  void op(std::uint32_t opcode);
  Value retyped(std::uint32_t opcode, const char* name, TypeRef to, Value x);
  std::vector<Value> grid_triple(std::uint32_t opcode, const char* name);
  void var(std::uint64_t v);
  void operand(Value v);
  Value result(TypeRef t);
  void line(const std::string& text);
  void yield_op(const std::vector<Value>& values);
  std::string ref(Value v) const;
  // Writes `hints` as an op's optimization_hints attribute; returns its text.
  std::string view_hints(const ViewHints& hints);

  Module& m_;
  std::vector<std::uint8_t> buf_;
  std::uint32_t next_id_ = 0;
  std::uint32_t num_ops_ = 0;
  std::vector<Value> params_;
  struct Open {
    std::vector<std::uint8_t> outer_buf;
    std::uint32_t outer_next_id = 0;
    std::uint32_t outer_num_ops = 0;
    std::vector<TypeRef> result_types;
    std::vector<std::uint32_t> result_names;  // an if's results, named in its header line
    std::string kind;  // "for", "reduce", "then" or "else"
  };
  void enter_region(const char* kind, std::vector<TypeRef> result_types);
  std::vector<TypeRef> leave_region();  // -> the region op's result types
  std::vector<Open> open_;
  int indent_ = 2;
};

class Module {
 public:
  explicit Module(std::string name);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  TypeRef elem(Elem e);
  TypeRef tile(Elem e, const std::vector<std::int64_t>& shape);  // shape {} = a scalar
  TypeRef pointer(Elem pointee);
  // A tile of any element type (a kernel's pointer parameters are tile<ptr<T>>).
  TypeRef tile_of(TypeRef element, const std::vector<std::int64_t>& shape);
  TypeRef token();
  // A view of global memory; kDynamic marks a dim or stride given at run time.
  static constexpr std::int64_t kDynamic = INT64_MIN;
  TypeRef tensor_view(Elem e, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides);
  // Tiles of `tile_shape` over a tensor view; `padding` fills elements past its bounds.
  TypeRef partition_view(const std::vector<std::int32_t>& tile_shape, TypeRef tensor_view,
                         std::optional<Padding> padding);
  TypeRef function(const std::vector<TypeRef>& params);

  // The element type and shape of a tile type (for the lowering's checks).
  Elem elem_of(TypeRef tile_type) const;
  // By value: interning a type may move the table a reference would point into.
  std::vector<std::int64_t> shape_of(TypeRef tile_type) const;
  // A tile type of the same element (a number or a pointer) and another shape.
  TypeRef reshaped(TypeRef tile_type, const std::vector<std::int64_t>& shape);
  std::string type_text(TypeRef t) const;

  // Starts the (single) kernel entry; param names are for the text form.
  Body& begin_entry(std::string_view name, const std::vector<TypeRef>& params,
                    const std::vector<std::string>& param_names);
  void end_entry();
  // The open entry's optimization hints for `arch`: occupancy, the CTAs per
  // SM tileiras should aim for (1 to 32).
  void entry_hints(const std::string& arch, int occupancy);

  std::vector<std::uint8_t> bytes() const;
  std::string text() const;

  // Internal to the writer (Body uses them).
  std::uint32_t string_index(std::string_view s);
  std::uint32_t constant_index(const std::vector<std::uint8_t>& data);
  std::uint32_t next_name() { return names_++; }
  std::vector<std::string>& text_lines() { return lines_; }

 private:
  struct TypeInfo;
  TypeRef intern(std::vector<std::uint8_t> encoding, TypeInfo info);

  std::string name_;
  std::vector<std::vector<std::uint8_t>> types_;
  std::vector<TypeInfo>* infos_;
  std::vector<std::string> strings_;
  std::vector<std::vector<std::uint8_t>> constants_;
  std::vector<std::uint8_t> functions_;  // encoded function records
  std::uint32_t num_functions_ = 0;
  Body* body_ = nullptr;
  std::string entry_name_;
  std::size_t entry_line_ = 0;
  std::optional<std::pair<std::string, int>> entry_occupancy_;
  TypeRef entry_sig_;
  std::vector<std::string> lines_;
  std::uint32_t names_ = 0;
};

// Encodings shared with the tests (the format's primitives).
void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v);
void put_signed_varint(std::vector<std::uint8_t>& out, std::int64_t v);

}  // namespace tessera::cuda_tile
