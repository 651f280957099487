// Tile IR kernel -> one CUDA C++ translation unit (program structure and tile ops).
//
// Mapping (docs/guide/cuda_backend.md): a group is a thread block and a tile
// (lane) is a thread, so the SPMD program maps one to one: lane values are
// thread-local variables, structured control flow stays structured, and a
// barrier is __syncthreads(). Group-cooperative ops run in every thread of
// the block (the contract puts them under uniform control flow, which
// tile-verify-sync checks) and split their work over the threads:
//   smem_alloc    a view into dynamic shared memory at the planned offset;
//   cp_async      cp.async copies of 16-byte chunks + commit_group;
//   cp_async_wait cp.async.wait_group N;
//   tile values   registers distributed over the threads (tile_mma.cuh);
//   tile.mma      mma.sync on tensor cores for bf16/fp16 x fp32 when the
//                 shapes allow, else a scalar fma loop; operands that are
//                 tile_loads of whole shared buffers are read in place
//                 (a transposed b through tsr::tview, K-major; a
//                 transposed a likewise, MN-major, on wgmma only),
//                 others are staged to scratch shared memory;
//   transpose     fused into such an mma, else staged through scratch.
// A tile value is a group value on the CPU (every tile sees the same
// snapshot); here each thread reads its part of shared memory when it gets
// there, so a group op that reads shared memory is followed by a
// __syncthreads() unless no shared write can come before the next barrier.
// Kernels without a group shape and without group-cooperative ops run
// `flat`: blocks of 256 threads, tile.linear_id = the global index; other
// kernels without a group shape get one thread per block. A small flat body
// whose loads can be read ahead runs four tiles per thread, their loads
// first (read_ahead_loads).
#include "backends/cuda/codegen/emitter.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "backends/common/kernel_params.h"
#include "backends/cuda/codegen/tma_plan.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"
#include "tessera/tile/tile_dialect.h"

namespace tessera::cuda::detail {
namespace {

// tile.strands bodies up to this many ops (a nested region counts 64) are
// emitted twice: full rounds unguarded, then the partial round.
constexpr std::size_t kSplitStrandBodyOps = 24;

[[noreturn]] void unsupported(const ir::Operation& op, const std::string& what) {
  raise(ErrorCode::Compile, "CUDA backend: " + what + " (op '" + std::string(op.name()) + "')", op.location());
}

std::vector<const ir::Operation*> op_list(const ir::Block& block) {
  std::vector<const ir::Operation*> v;
  for (const auto& op : block.ops()) v.push_back(op.get());
  return v;
}

bool uses_group_ops(const ir::Block& block) {
  for (const auto& op : block.ops()) {
    if (tile::is_group_cooperative(*op)) return true;
    for (std::size_t i = 0; i < op->num_results(); ++i)
      if (op->result(i)->type().is_tile() || op->result(i)->type().is_smem()) return true;
    for (std::size_t r = 0; r < op->num_regions(); ++r)
      if (uses_group_ops(op->region(r).block())) return true;
  }
  return false;
}

// Writes shared memory (directly or inside a region).
bool writes_shared(const ir::Operation& op) {
  const std::string_view n = op.name();
  if (n == "tile.cp_async") return true;
  if ((n == "tile.store_elem" || n == "tile.tile_store") && op.operand(0)->type().is_smem()) return true;
  for (std::size_t r = 0; r < op.num_regions(); ++r)
    for (const auto& inner : op.region(r).block().ops())
      if (writes_shared(*inner)) return true;
  return false;
}

// Union-find over tile values that must share a C++ type (loop carries, yields, mma acc/result).
class Classes {
 public:
  const ir::Value* find(const ir::Value* v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    const ir::Value* r = find(it->second);
    parent_[v] = r;
    return r;
  }
  void join(const ir::Value* a, const ir::Value* b) {
    if (!a->type().is_tile() || !b->type().is_tile()) return;
    const ir::Value* ra = find(a);
    const ir::Value* rb = find(b);
    if (ra != rb) parent_[ra] = rb;
  }

 private:
  std::unordered_map<const ir::Value*, const ir::Value*> parent_;
};

class Emitter {
 public:
  Emitter(const ir::Operation& func, const KernelCompileOptions& options) : func_(func), options_(options) {}

  EmittedKernel run() {
    codegen::KernelHeader header = codegen::read_kernel_header(func_, "CUDA backend");
    out_.name = std::move(header.name);
    out_.group_shape = std::move(header.group_shape);
    out_.group_size = header.group_size;
    if (out_.group_size > 1024) {
      raise(ErrorCode::Compile, "CUDA backend: kernel '" + out_.name + "' has " + std::to_string(out_.group_size) +
                                    " tiles per group; a thread block holds at most 1024");
    }
    out_.specialized = options_.specialize;
    const ir::Block& body = ir::function_body(func_);
    if (out_.group_shape.empty()) {
      out_.flat = !uses_group_ops(body);
      out_.block_threads = out_.flat ? std::max(1, options_.flat_block) : 1;
    } else {
      out_.block_threads = static_cast<int>(out_.group_size);
    }
    bind_params(body);
    // Index bounds: a thread's linear_id is below the block size, so index
    // arithmetic built from it and constants stays in 32-bit registers
    // (int), which halves its instructions (64-bit adds and shifts are two
    // each). Symbols a scalar argument binds, or specialized outside the
    // extent range, bound nothing.
    scalar_symbols_ = codegen::unbounded_symbols(out_.params, options_.specialize);
    bounds_ = std::make_unique<codegen::IndexBounds>(
        func_, scalar_symbols_,
        out_.group_shape.empty() ? codegen::kIndexLimit : static_cast<std::uint64_t>(out_.group_size - 1));
    analyse(body);
    decide_layouts();
    plan_tma(body);
    indent_ = 1;
    if (out_.flat) read_ahead_ = read_ahead_loads(body);
    if (!read_ahead_.empty()) {
      emit_tiles_with_loads_ahead(body);
    } else {
      emit_block(body);
    }
    const std::int64_t budget = tile::shared_budget(func_);
    if (shared_cursor_ > budget) {
      raise(ErrorCode::Compile, "kernel '" + out_.name + "' uses " + std::to_string(shared_cursor_) +
                                    " bytes of shared memory, more than its budget of " + std::to_string(budget));
    }
    tma_bars_offset_ = (shared_cursor_ + 127) / 128 * 128;
    scratch_offset_ = (tma_bars_offset_ + 8 * static_cast<std::int64_t>(tma_bar_.size()) + 127) / 128 * 128;
    out_.shared_bytes = scratch_bytes_ > 0 || !tma_bar_.empty() ? scratch_offset_ + scratch_bytes_ : shared_cursor_;
    out_.smem_count = smem_count_;
    out_.source = assemble();
    return out_;
  }

 private:
  // ---- analysis ----

  void bind_params(const ir::Block& body) {
    if (body.num_arguments() > 16) {
      raise(ErrorCode::Compile, "CUDA backend: kernel '" + out_.name + "' has " + std::to_string(body.num_arguments()) +
                                    " parameters; at most 16 are supported");
    }
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      const ir::Value* arg = body.argument(i);
      const ir::Type& t = arg->type();
      KernelParam p = codegen::describe_kernel_param(*arg, i, out_.name, "CUDA backend", /*sub_byte_buffers=*/false);
      if (t.is_gmem()) {
        require_deterministic_rounding(t.policy, "parameter '" + p.name + "'");
        for (const ir::Dim& d : t.shape)
          for (const std::string& sym : codegen::dim_symbols(d)) symbol_index(sym);
      }
      name_[arg] = "p_" + codegen::c_identifier(p.name);
      out_.params.push_back(std::move(p));
    }
  }

  int symbol_index(const std::string& name) {
    auto it = std::find(out_.symbols.begin(), out_.symbols.end(), name);
    if (it != out_.symbols.end()) return static_cast<int>(it - out_.symbols.begin());
    if (out_.symbols.size() >= 16) {
      raise(ErrorCode::Compile, "CUDA backend: kernel '" + out_.name + "' reads more than 16 shape symbols");
    }
    out_.symbols.push_back(name);
    return static_cast<int>(out_.symbols.size()) - 1;
  }

  std::string symbol_expr(const std::string& name) {
    if (auto it = options_.specialize.find(name); it != options_.specialize.end()) return cu_int_literal(it->second);
    return "sym_" + codegen::c_identifier(name) + "_" + std::to_string(symbol_index(name));
  }

  std::int64_t resolve_dim(const ir::Dim& d) {
    return codegen::resolve_static_dim(d, options_.specialize, out_.name, "CUDA backend");
  }

  std::pair<std::int64_t, std::int64_t> rows_cols(const ir::Type& t) {
    const std::int64_t rows = t.rank() == 2 ? resolve_dim(t.shape[0]) : 1;
    return {rows, resolve_dim(t.shape.back())};
  }

  // Joins tile values that share storage, and finds tile_loads an mma reads in place.
  void analyse(const ir::Block& block) {
    const std::vector<const ir::Operation*> ops = op_list(block);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const ir::Operation& op = *ops[i];
      const std::string_view n = op.name();
      if (n == "tile.for") {
        const ir::Block& b = op.region(0).block();
        for (std::size_t k = 0; k < op.num_results(); ++k) {
          classes_.join(op.operand(3 + k), b.argument(1 + k));
          classes_.join(b.argument(1 + k), b.terminator()->operand(k));
          classes_.join(b.argument(1 + k), op.result(k));
        }
      } else if (n == "tile.if") {
        for (std::size_t k = 0; k < op.num_results(); ++k)
          for (std::size_t r = 0; r < 2; ++r)
            classes_.join(op.result(k), op.region(r).block().terminator()->operand(k));
      } else if (n == "tile.while") {
        const ir::Block& before = op.region(0).block();
        const ir::Block& after = op.region(1).block();
        for (std::size_t k = 0; k < op.num_results(); ++k) {
          classes_.join(op.operand(k), before.argument(k));
          classes_.join(before.argument(k), after.terminator()->operand(k));
          classes_.join(before.terminator()->operand(1 + k), after.argument(k));
          classes_.join(after.argument(k), op.result(k));
        }
      } else if (n == "tile.tile_add") {
        // One layout for both operands and the sum: the add is slot by slot.
        classes_.join(op.operand(0), op.result(0));
        classes_.join(op.operand(1), op.result(0));
      } else if (n == "tile.tile_cast") {
        // Slot by slot too: the cast keeps its operand's layout (an mma
        // accumulator cast to bf16 stays in the mma's registers).
        classes_.join(op.operand(0), op.result(0));
      } else if (n == "tile.tile_unary" || n == "tile.tile_causal_fill") {
        classes_.join(op.operand(0), op.result(0));  // slot by slot
      } else if (n == "tile.tile_binary") {
        // An operand of the result's shape shares its layout (slot by slot);
        // a broadcast one is read from scratch.
        for (std::size_t k = 0; k < 2; ++k) {
          if (op.operand(k)->type().shape == op.result(0)->type().shape) classes_.join(op.operand(k), op.result(0));
        }
      } else if (n == "tile.mma") {
        classes_.join(op.operand(2), op.result(0));
        mmas_.push_back(&op);
      } else if (n == "tile.tile_load") {
        check_fusable(ops, i);
      }
      for (std::size_t r = 0; r < op.num_regions(); ++r) analyse(op.region(r).block());
    }
  }

  // A tile_load of a whole shared buffer whose only use is an mma operand
  // later in the same block, with nothing in between that writes shared
  // memory or synchronises: the mma reads the buffer in place. So does
  // mma(x, transpose(tile_load(buf))) when the transpose is the load's only
  // use and the mma's b its only use: b reads buf [N, K] as a K-major [K, N]
  // (both ops are then fused and emit nothing).
  void check_fusable(const std::vector<const ir::Operation*>& ops, std::size_t i) {
    const ir::Operation& load = *ops[i];
    const ir::Value* src = load.operand(0);
    const ir::Value* t = load.result(0);
    if (!src->type().is_smem() || src->type().rank() != t->type().rank() || t->uses().size() != 1) return;
    const ir::Use* use_ptr = &t->uses().front();
    const ir::Operation* transpose = nullptr;
    if (use_ptr->user->name() == "tile.transpose" && use_ptr->user->parent_block() == load.parent_block()) {
      transpose = use_ptr->user;
      if (transpose->result(0)->uses().size() != 1) return;
      use_ptr = &transpose->result(0)->uses().front();
      // A transposed b reads in place K-major; a transposed a reads in place
      // MN-major on wgmma only (decide_layouts stages it again elsewhere).
      if (use_ptr->operand_index > 1) return;
    }
    const ir::Use& use = *use_ptr;
    if (use.user->name() != "tile.mma" || use.operand_index > 1 || use.user->parent_block() != load.parent_block())
      return;
    for (std::size_t k = 1; k < load.num_operands(); ++k) {
      const ir::Operation* def = load.operand(k)->defining_op();
      if (def == nullptr || def->name() != "tile.const") return;
      const ir::Attribute* v = def->attrs().find("value");
      if (v == nullptr || ir::kind_of(*v) != ir::AttrKind::integer || std::get<std::int64_t>(*v) != 0) return;
    }
    for (std::size_t d = 0; d < t->type().rank(); ++d) {
      if (t->type().shape[d].is_symbolic() || src->type().shape[d].is_symbolic()) return;
      if (t->type().shape[d].size != src->type().shape[d].size) return;
    }
    if (t->type().dtype() != src->type().dtype()) return;
    for (std::size_t k = i + 1; k < ops.size(); ++k) {
      const ir::Operation& mid = *ops[k];
      if (&mid == use.user) {
        fused_.insert(&load);
        if (transpose != nullptr) fused_.insert(transpose);
        return;
      }
      if (writes_shared(mid) || mid.name() == "tile.barrier" || mid.num_regions() != 0) return;
    }
  }

  // The shared buffer an mma operand reads in place (a fused tile_load, or a
  // fused transpose of one: `transposed` set), or nullptr when it is staged.
  const ir::Value* in_place_buffer(const ir::Value* operand, bool& transposed) const {
    transposed = false;
    const ir::Operation* def = operand->defining_op();
    if (def == nullptr || fused_.count(def) == 0) return nullptr;
    if (def->name() == "tile.transpose") {
      transposed = true;
      def = def->operand(0)->defining_op();
    }
    return def->operand(0);
  }

  // The warp grid of a tensor-core mma of [M, N] with `warps` warps, or {0, 0}.
  static std::pair<int, int> warp_grid(std::int64_t m, std::int64_t n, int warps) {
    std::pair<int, int> best{0, 0};
    std::int64_t best_cost = -1;
    for (int wm = 1; wm <= warps; ++wm) {
      if (warps % wm != 0) continue;
      const int wn = warps / wm;
      if ((m / 16) % wm != 0 || (n / 8) % wn != 0) continue;
      const std::int64_t am = m / 16 / wm, an = n / 8 / wn;
      const std::int64_t cost = 2 * am + an;  // fragment loads per k-step per warp
      if (am * an > 64) continue;             // registers: 4 floats per atom
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best = {wm, wn};
      }
    }
    return best;
  }

  // A shared buffer type the wgmma path can read through a descriptor: xor
  // swizzled, 2-D, 16-bit or 8-bit elements, rows of whole 128-byte panels
  // (64 or 128 elements), a multiple of 8 rows (stored in the kPanel128
  // layout in wgmma kernels).
  bool panel_type(const ir::Type& t) {
    if (!t.is_smem() || t.swizzle != ir::Swizzle::xor_ || t.rank() != 2) return false;
    const std::int64_t es = storage_bytes(t.dtype());
    if (es != 2 && !(es == 1 && (t.dtype() == DType::fp8_e4m3 || t.dtype() == DType::fp8_e5m2))) return false;
    if (t.shape[0].is_symbolic() && options_.specialize.count(t.shape[0].symbol) == 0) return false;
    if (t.shape[1].is_symbolic() && options_.specialize.count(t.shape[1].symbol) == 0) return false;
    const auto [rows, cols] = rows_cols(t);
    return rows % 8 == 0 && (cols * es) % 128 == 0;
  }

  // Every planned allocation of a panel type sits at a multiple of 1024
  // bytes (the 128-byte swizzle pattern repeats every 1024 bytes, and the
  // hardware applies it to absolute shared addresses).
  bool panels_aligned(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      if (op->name() == "tile.smem_alloc" && panel_type(op->result(0)->type())) {
        const ir::Attribute* o = op->attrs().find("offset");
        if (o == nullptr || ir::kind_of(*o) != ir::AttrKind::integer || std::get<std::int64_t>(*o) % 1024 != 0)
          return false;
      }
      for (std::size_t r = 0; r < op->num_regions(); ++r)
        if (!panels_aligned(op->region(r).block())) return false;
    }
    return true;
  }

  // The warpgroup grid {WGM, WGN} of a wgmma mma of [M, N], or {0, 0}: each
  // warpgroup takes M/WGM rows in m64 strips and N/WGN <= 256 columns (whole
  // 64-column panels of B), at most 128 accumulators per thread; the grid
  // that reads the fewest shared bytes per k-step wins (wider N on a tie).
  static std::pair<int, int> warpgroup_grid(std::int64_t m, std::int64_t n, int groups) {
    std::pair<int, int> best{0, 0};
    std::int64_t best_cost = -1;
    for (int gm = 1; gm <= groups; ++gm) {
      if (groups % gm != 0) continue;
      const int gn = groups / gm;
      if (m % (64 * gm) != 0 || n % (64 * gn) != 0) continue;
      const std::int64_t mi = m / gm / 64, nw = n / gn;
      if (nw > 256 || mi * nw / 2 > 128) continue;
      const std::int64_t cost = groups * mi * (2048 + 32 * nw);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best = {gm, gn};
      }
    }
    return best;
  }

  // The wgmma path (sm_90a): bf16 x bf16 or fp16 x fp16 into fp32 (b
  // row-major [K, N] or K-major: a transposed [N, K] buffer), or e4m3 x e4m3
  // or e5m2 x e5m2 into fp32 with b K-major (wgmma takes 8-bit operands only
  // K-major); both operands whole shared buffers read in place in the panel
  // layout, whole warpgroups, M % 64 = 0, K a multiple of the instruction's
  // k (16, or 32 for fp8) and a warpgroup grid that fits.
  std::pair<int, int> wgmma_grid(const ir::Operation& op) {
    if (options_.arch != "sm_90a" || out_.block_threads % 128 != 0) return {0, 0};
    const ir::Type& a = op.operand(0)->type();
    const ir::Type& b = op.operand(1)->type();
    const DType dt = a.dtype();
    const bool fp8 = dt == DType::fp8_e4m3 || dt == DType::fp8_e5m2;
    if (b.dtype() != dt || (dt != DType::bf16 && dt != DType::fp16 && !fp8)) return {0, 0};
    if (op.result(0)->type().dtype() != DType::fp32 || a.rank() != 2 || b.rank() != 2) return {0, 0};
    for (std::size_t i = 0; i < 2; ++i) {
      bool transposed = false;
      const ir::Value* buf = in_place_buffer(op.operand(i), transposed);
      if (buf == nullptr || !panel_type(buf->type())) return {0, 0};
      if (i == 1 && fp8 && !transposed) return {0, 0};
      if (i == 0 && fp8 && transposed) return {0, 0};  // 8-bit a is K-major only
    }
    const auto [m, k] = rows_cols(a);
    const auto [k2, n] = rows_cols(b);
    if (k != k2 || k % (fp8 ? 32 : 16) != 0) return {0, 0};
    return warpgroup_grid(m, n, out_.block_threads / 128);
  }

  void decide_layouts() {
    const int threads = out_.block_threads;
    // wgmma where every mma of an accumulator chain can take it (one layout per chain).
    std::unordered_map<const ir::Value*, std::pair<int, int>> chain;
    std::unordered_set<const ir::Value*> no_wgmma;
    const bool aligned = panels_aligned(ir::function_body(func_));
    for (const ir::Operation* op : mmas_) {
      const ir::Value* root = classes_.find(op->result(0));
      const std::pair<int, int> g = aligned ? wgmma_grid(*op) : std::pair<int, int>{0, 0};
      auto it = chain.find(root);
      if (g.first == 0 || (it != chain.end() && it->second != g)) no_wgmma.insert(root);
      chain[root] = g;
    }
    for (const ir::Operation* op : mmas_) {
      const ir::Value* root = classes_.find(op->result(0));
      if (no_wgmma.count(root) != 0) continue;
      const auto [m, n] = rows_cols(op->result(0)->type());
      const auto [gm, gn] = chain.at(root);
      wg_.insert(op);
      wg_kernel_ = true;
      layout_[root] = "tsr::WgLayout<" + std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(gm) +
                      ", " + std::to_string(gn) + ">";
      wg_slots_ = std::max<std::int64_t>(wg_slots_, m / gm / 64 * (n / gn) / 2);
      ++out_.tensor_core_mmas;
    }
    for (const ir::Operation* op : mmas_) {
      if (wg_.count(op) != 0) continue;
      const ir::Type& a = op->operand(0)->type();
      const ir::Type& b = op->operand(1)->type();
      const ir::Type& acc = op->result(0)->type();
      if (a.rank() != 2 || b.rank() != 2 || acc.rank() != 2) unsupported(*op, "tile.mma needs 2-D tiles");
      const auto [m, k] = rows_cols(a);
      const auto [k2, n] = rows_cols(b);
      if (k != k2) unsupported(*op, "tile.mma inner dims differ");
      const DType ad = a.dtype(), bd = b.dtype(), cd = acc.dtype();
      if (cd != DType::fp32 && cd != DType::fp64) {
        unsupported(*op, "tile.mma with a " + std::string(name(cd)) +
                             " accumulator is not supported by the CUDA backend yet (fp32 and fp64 are)");
      }
      if (!is_float(ad) || !is_float(bd) || (ad == DType::fp64) != (cd == DType::fp64) ||
          (bd == DType::fp64) != (cd == DType::fp64)) {
        unsupported(*op, "tile.mma operands " + std::string(name(ad)) + " x " + std::string(name(bd)) + " into " +
                             std::string(name(cd)) + " are not supported by the CUDA backend yet");
      }
      // fp8 on mma.sync (m16n8k32) needs sm_89+ and b read in place K-major
      // (a transposed [N, K] buffer): ldmatrix cannot transpose bytes.
      bool b_transposed = false;
      const bool fp8 = ad == bd && (ad == DType::fp8_e4m3 || ad == DType::fp8_e5m2) && arch_number() >= 89 &&
                       in_place_buffer(op->operand(1), b_transposed) != nullptr && b_transposed;
      const bool tc_dtype = ad == bd && (ad == DType::bf16 || ad == DType::fp16 || fp8) && cd == DType::fp32;
      if (tc_dtype && threads % 32 == 0 && m % 16 == 0 && n % 8 == 0 && k % (fp8 ? 32 : 16) == 0) {
        const auto [wm, wn] = warp_grid(m, n, threads / 32);
        if (wm > 0) {
          tc_[op] = true;
          layout_[classes_.find(op->result(0))] = "tsr::MmaLayout<" + std::to_string(m) + ", " + std::to_string(n) +
                                                  ", " + std::to_string(wm) + ", " + std::to_string(wn) + ">";
          ++out_.tensor_core_mmas;
        }
      }
    }
    for (const ir::Operation* op : mmas_) {
      if (is_async_mma(*op) && wg_.count(op) == 0) async_off_wg_ = true;
    }
    // A transposed a read in place is wgmma's alone: elsewhere the transpose
    // and its load run as ops again (the a is staged, transposed).
    for (const ir::Operation* op : mmas_) {
      if (wg_.count(op) != 0) continue;
      const ir::Operation* t = op->operand(0)->defining_op();
      if (t == nullptr || t->name() != "tile.transpose" || fused_.count(t) == 0) continue;
      fused_.erase(t);
      fused_.erase(t->operand(0)->defining_op());
    }
  }

  // Copies through the bulk tensor copy engine (TMA) where the whole kernel
  // can take it (tma_plan.h). The kernel copies only through TMA;
  // compile_kernel also compiles its cp.async form (no_tma) for launches
  // whose tensors no map describes.
  void plan_tma(const ir::Block& body) {
    if (!wg_kernel_ || options_.no_tma) return;
    TmaPlan plan = detail::plan_tma(
        body, [this](const ir::Type& t) { return panel_type(t); }, [this](const ir::Type& t) { return rows_cols(t); });
    if (plan.maps.empty()) return;
    out_.tma_maps = std::move(plan.maps);
    tma_map_of_ = std::move(plan.map_of);
    for (const ir::Value* dst : plan.destinations) {
      const std::string i = std::to_string(tma_bar_.size());
      tma_bar_[dst] = "tma_bar" + i + ", tma_issued" + i + ", tma_waited" + i;
    }
  }

  // Waits for the latest TMA copy into `buf`, when it is a TMA destination.
  void tma_settle(const ir::Value* buf) {
    if (auto it = tma_bar_.find(buf); it != tma_bar_.end()) line("tsr::tma_settle(" + it->second + ");");
  }

  // The target's compute capability as a number (sm_90a: 90), 80 for the
  // portable form (no arch given).
  int arch_number() const {
    const std::string& a = options_.arch;
    if (a.rfind("sm_", 0) != 0 || a.size() < 5) return 80;
    return std::atoi(a.c_str() + 3);
  }

  static bool is_async_mma(const ir::Operation& op) { return op.attrs().has("async") && op.attrs().get_bool("async"); }

  // ---- types ----

  std::string smem_type(const ir::Type& t) {
    const auto [rows, cols] = rows_cols(t);
    int mask = 0;
    if (wg_kernel_ && panel_type(t)) {
      mask = -128;  // tsr::kPanel128
    } else if (t.swizzle == ir::Swizzle::xor_) {
      const std::int64_t row_bytes = cols * storage_bytes(t.dtype());
      const std::int64_t chunks = row_bytes % 16 == 0 ? row_bytes / 16 : 0;
      int m = 1;
      while (m * 2 <= std::min<std::int64_t>(chunks, 8)) m *= 2;
      mask = chunks >= 2 ? m - 1 : 0;
    }
    return "tsr::SView<" + cu_dtype(t.dtype()) + ", " + std::to_string(rows) + ", " + std::to_string(cols) + ", " +
           std::to_string(mask) + ", " + std::to_string(t.rank()) + ">";
  }

  std::string tile_type(const ir::Value* v) {
    const ir::Type& t = v->type();
    const auto [rows, cols] = rows_cols(t);
    std::string layout;
    if (auto it = layout_.find(classes_.find(v)); it != layout_.end()) {
      layout = it->second;
    } else {
      layout = "tsr::Strided<" + std::to_string(rows) + ", " + std::to_string(cols) + ", kThreads>";
    }
    return "tsr::Tile<" + cu_dtype(t.dtype()) + ", " + std::to_string(rows) + ", " + std::to_string(cols) + ", " +
           layout + ">";
  }

  std::string type_of(const ir::Value* v) {
    const ir::Type& t = v->type();
    switch (t.kind) {
      case ir::TypeKind::lane: return cu_value_type(t.dtype());
      case ir::TypeKind::tile: return tile_type(v);
      case ir::TypeKind::smem: return smem_type(t);
      case ir::TypeKind::gmem: return "tsr::GView<" + cu_dtype(t.dtype()) + ", " + std::to_string(t.rank()) + ">";
      case ir::TypeKind::tensor: break;
    }
    raise(ErrorCode::Compile, "CUDA backend: kernels take no tensor values, got " + ir::print_type(t));
  }

  // ---- emission ----

  std::string fresh(const std::string& hint = "v") { return hint + std::to_string(next_value_++); }

  void line(const std::string& text) {
    body_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    body_ += text;
    body_ += '\n';
  }

  // Operand names; int (narrow) operands of an op whose result is not known
  // to fit an int are widened first, so their arithmetic is 64-bit.
  std::vector<std::string> args_of(const ir::Operation& op) {
    const bool int_result = op.num_results() == 1 && narrow_index(op.result(0));
    std::vector<std::string> a;
    for (const ir::Value* v : op.operands()) {
      auto it = name_.find(v);  // a tile_load the mma reads in place has no variable
      if (it == name_.end()) {
        a.emplace_back();
      } else {
        a.push_back(!int_result && narrow_index(v) ? "((tsr::i64)" + it->second + ")" : it->second);
      }
    }
    return a;
  }

  LaneContext lane_context() {
    LaneContext c;
    c.linear_id = out_.group_shape.empty() ? "group" : "((tsr::i64)tid)";
    c.symbol = [this](const std::string& s) { return symbol_expr(s); };
    c.bounds = bounds_.get();
    return c;
  }

  void emit_block(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      if (op->def().is_terminator) break;
      emit_op(*op);
    }
  }

  // An integer lane value known to fit an int (IndexBounds::fits_int32).
  bool narrow_index(const ir::Value* v) const {
    return v->type().is_lane() && v->type().dtype() == DType::int64 && bounds_ && bounds_->fits_int32(v);
  }

  void define(const ir::Value* v, const std::string& expr) {
    name_[v] = fresh();
    if (narrow_index(v)) return line("const int " + name_.at(v) + " = (int)(" + expr + ");");
    // A wgmma accumulator made by ordinary instructions is fenced before any
    // wgmma reads it; otherwise the compiler serializes the wgmmas of a loop.
    const bool fence = wg_accumulator(v) && expr.rfind("tsr::mma_wg", 0) != 0;
    line("const " + type_of(v) + " " + name_.at(v) + " = " + (fence ? "tsr::wg_fenced(" + expr + ")" : expr) + ";");
  }

  bool wg_accumulator(const ir::Value* v) {
    if (!v->type().is_tile()) return false;
    auto it = layout_.find(classes_.find(v));
    return it != layout_.end() && it->second.rfind("tsr::WgLayout<", 0) == 0;
  }

  // Declares mutable storage for a control-flow result or carried value.
  void declare(const ir::Value* v, const std::string& init = {}) {
    name_[v] = fresh(v->type().is_lane() ? "a" : "t");
    line(type_of(v) + " " + name_.at(v) + (init.empty() ? "" : " = " + init) + ";");
  }

  void carry(const std::vector<const ir::Value*>& dst, const ir::Operation& yield, std::size_t first) {
    if (dst.empty()) return;
    line("{");
    ++indent_;
    std::vector<std::string> tmp;
    for (std::size_t k = 0; k < dst.size(); ++k) {
      tmp.push_back(fresh("y"));
      line("const auto " + tmp.back() + " = " + name_.at(yield.operand(first + k)) + ";");
    }
    for (std::size_t k = 0; k < dst.size(); ++k) line(name_.at(dst[k]) + " = " + tmp[k] + ";");
    --indent_;
    line("}");
  }

  void emit_op(const ir::Operation& op) {
    const std::string_view n = op.name();
    if (n == "tile.for") return emit_for(op);
    if (n == "tile.strands") return emit_strands(op);
    if (n == "tile.if") return emit_if(op);
    if (n == "tile.while") return emit_while(op);
    // An access is unchecked when its template proves it (`in_bounds`) or
    // an enclosing extent guard does (guarded_access).
    if (n == "tile.store_elem") {
      if (const ir::Value* wide = rounded_store_source(op)) {
        // Round and store in one step: the stored code is the fp32 value's
        // encoding, without decoding the rounded value and encoding it again.
        std::vector<std::string> a = args_of(op);
        a.back() = name_.at(wide);
        return line(store_rounded_stmt(a, unchecked_access(op), proven_not_nan(op)));
      }
      return line(store_stmt(op, args_of(op), unchecked_access(op)));
    }
    if (n == "tile.load_elem") {
      if (auto it = preloaded_.find(&op); it != preloaded_.end()) return define(op.result(0), it->second);
      return define(op.result(0), load_expr(args_of(op), unchecked_access(op)));
    }
    if (n == "tile.load_vector") return emit_load_vector(op);
    if (n == "tile.store_vector") return emit_store_vector(op);
    if (n == "tile.lane_shuffle") return emit_lane_shuffle(op);
    // A lane's hint is a CPU's: a GPU hides memory latency with its other
    // warps. A bulk hint (a row another group reads soon) goes to the L2.
    if (n == "tile.prefetch") {
      if (op.attrs().has("bulk") && op.attrs().get_bool("bulk")) {
        const std::vector<std::string> a = args_of(op);
        return line("tsr::prefetch_l2(" + a[0] + ", " + a[1] + ", " + a[2] + ");");
      }
      return line("// tile.prefetch: no code on the GPU");
    }
    if (is_lane_value_op(op)) return define(op.result(0), lane_expr(op, args_of(op), lane_context()));
    if (op.num_regions() != 0) unsupported(op, "unknown control-flow op");
    emit_group_op(op);
  }

  // A lane's run of elements: its codes as loaded (tsr::LoadedRun), each
  // result the decode of its element where used (indexed by constants, so
  // they stay in registers).
  void emit_load_vector(const ir::Operation& op) {
    const std::vector<std::string> a = args_of(op);
    const std::string run = fresh("run");
    const std::string count = std::to_string(op.num_results());
    if (aligned_vector(op)) {
      line("const auto " + run + " = tsr::load_vector_aligned<" + count + ">(" + a[0] + ", " + a[1] + ");");
    } else {
      line("const auto " + run + " = tsr::load_vector<" + count + ">(" + a[0] + ", " + a[1] + ", W);");
    }
    for (std::size_t k = 0; k < op.num_results(); ++k) name_[op.result(k)] = run + "[" + std::to_string(k) + "]";
  }
  // A warp shuffle: the group is the block, whose threads are its lanes in
  // linear order, so lanes t and t ^ xor share a warp (xor < 32) and the
  // block (its size a multiple of 2 xor). A block under a warp names its
  // threads in the mask.
  void emit_lane_shuffle(const ir::Operation& op) {
    const std::int64_t x = op.attrs().get_int("xor");
    const std::int64_t threads = out_.block_threads;
    if (const std::string why = tile::lane_shuffle_group_error(op, threads); !why.empty()) unsupported(op, why);
    const std::string mask = threads >= 32 ? "0xffffffffu" : std::to_string((1ull << threads) - 1) + "u";
    const std::string v = name_.at(op.operand(0));
    const DType d = op.operand(0)->type().dtype();
    // Bools travel as ints (no bool overload).
    const std::string expr = d == DType::bool_ ? "(__shfl_xor_sync(" + mask + ", (int)" + v + ", " + std::to_string(x) + ") != 0)"
                                               : "__shfl_xor_sync(" + mask + ", " + v + ", " + std::to_string(x) + ")";
    define(op.result(0), expr);
  }
  void emit_store_vector(const ir::Operation& op) {
    const std::vector<std::string> a = args_of(op);
    const std::string count = std::to_string(a.size() - 2);
    const bool aligned = aligned_vector(op);
    const std::string end = aligned ? ");" : ", W);";  // the checked forms take the fault record
    // Every value an fp32 lane rounded to the bf16/fp16 buffer: each is
    // rounded and encoded in one step, as a rounded element store is.
    std::string wide;
    std::size_t rounded = 0;
    for (std::size_t k = 2; k < op.num_operands(); ++k, ++rounded) {
      const ir::Value* w = rounded_source(op.operand(0)->type(), op.operand(k));
      if (!w) break;
      wide += (k > 2 ? ", " : "") + name_.at(w);
    }
    if (rounded + 2 == op.num_operands()) {
      line(std::string(aligned ? "tsr::store_rounded_vector_aligned<" : "tsr::store_rounded_vector<") + count + ", " +
           (proven_not_nan(op) ? "true" : "false") + ">(" + a[0] + ", " + a[1] + ", {" + wide + "}" + end);
      return;
    }
    std::string values;
    for (std::size_t k = 2; k < a.size(); ++k) values += (k > 2 ? ", " : "") + a[k];
    line(std::string(aligned ? "tsr::store_vector_aligned<" : "tsr::store_vector<") + count + ">(" + a[0] + ", " + a[1] +
         ", {" + values + "}, " + store_overflow(op) + end);
  }
  // A run proven in bounds in a kernel for contiguous buffers: the launch
  // checks that every buffer is 16-byte aligned (CompiledKernel::
  // aligned_buffers, from EmittedKernel::aligned_vectors, recorded here),
  // and the run starts at a multiple of its length, so its words move
  // unchecked.
  bool aligned_vector(const ir::Operation& op) {
    const bool aligned = options_.contiguous_buffers && proven_in_bounds(op);
    out_.aligned_vectors = out_.aligned_vectors || aligned;
    return aligned;
  }

  // A loop body of at most 48 ops with no regions, barriers, shared
  // buffers or tile-level ops (whose copies could not be interleaved).
  static bool small_leaf_loop(const ir::Block& body) {
    std::size_t n = 0;
    for (const auto& op : body.ops()) {
      if (++n > 48 || op->num_regions() != 0) return false;
      const std::string_view name = op->name();
      if (name == "tile.barrier" || name == "tile.smem_alloc" || name.starts_with("tile.cp_async") ||
          name == "tile.mma" || name == "tile.tile_load" || name == "tile.tile_store")
        return false;
    }
    return true;
  }

  void emit_for(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    std::vector<const ir::Value*> iters;
    for (std::size_t i = 1; i < body.num_arguments(); ++i) iters.push_back(body.argument(i));
    for (std::size_t i = 0; i < iters.size(); ++i) declare(iters[i], name_.at(op.operand(3 + i)));
    const std::string lo = fresh("lo"), hi = fresh("hi"), step = fresh("step");
    line("{  // tile.for");
    ++indent_;
    // An int loop when its limits and step fit one with room for the last
    // step (IndexBounds::kInt32Limit leaves 2^24 of it).
    const bool narrow = narrow_index(body.argument(0)) && narrow_index(op.operand(1)) && narrow_index(op.operand(2)) &&
                        codegen::constant_integer(op.operand(2)).value_or(std::int64_t{1} << 24) < (std::int64_t{1} << 24);
    const std::string index_type = narrow ? "int" : "tsr::i64";
    line("const " + index_type + " " + lo + " = " + name_.at(op.operand(0)) + ", " + hi + " = " +
         name_.at(op.operand(1)) + ", " + step + " = " + name_.at(op.operand(2)) + ";");
    line("if (" + step + " <= 0) tsr::fault(p.fault, 2, 4, -1, 0, " + step + ", 0, group);");
    const std::string iv = fresh("iv");
    name_[body.argument(0)] = iv;
    const bool unroll = small_leaf_loop(body);
    if (unroll) {
      // A short body without inner control flow: unrolled by 4, the loads
      // of consecutive iterations are in flight together, where a rolled
      // loop waits a memory latency per iteration (reduction strands).
      // Bounds checks do not branch (tsr::Where), so the copies share one
      // basic block.
      line("else {");
      ++indent_;
      line("#pragma unroll 4");
    }
    line(std::string(unroll ? "" : "else ") + "for (" + index_type + " " + iv + " = " + lo + "; " + iv + " < " + hi +
         "; " + iv + " += " + step + ") {");
    ++indent_;
    emit_block(body);
    carry(iters, *body.terminator(), 0);
    --indent_;
    line("}");
    if (unroll) {
      --indent_;
      line("}");
    }
    --indent_;
    line("}");
    for (std::size_t i = 0; i < op.num_results(); ++i) name_[op.result(i)] = name_.at(iters[i]);
  }

  // tile.strands: rounds of `count` consecutive indices, strand s taking the
  // s-th index of each round (the op's order; one thread runs them all).
  void emit_strands(const ir::Operation& op) {
    const ir::Block& body = op.region(0).block();
    const std::int64_t count = std::get<std::int64_t>(*op.attrs().find("count"));
    const std::string count_text = std::to_string(count);
    const std::size_t n_acc = body.num_arguments() - 1;
    for (std::size_t i = 0; i < op.num_results(); ++i) declare(op.result(i));
    line("{  // tile.strands");
    ++indent_;
    const std::string lo = fresh("lo"), hi = fresh("hi"), round = fresh("round"), s = fresh("s");
    line("const tsr::i64 " + lo + " = " + name_.at(op.operand(0)) + ", " + hi + " = " + name_.at(op.operand(1)) + ";");
    std::vector<std::string> accs;
    for (std::size_t j = 0; j < n_acc; ++j) {
      accs.push_back(fresh("strand"));
      line(type_of(body.argument(1 + j)) + " " + accs[j] + "[" + count_text + "];");
      line("#pragma unroll");
      line("for (int k = 0; k < " + count_text + "; ++k) " + accs[j] + "[k] = " + name_.at(op.operand(2 + j)) + ";");
    }
    // The strand loop unrolls fully, so the strand arrays live in registers
    // (indexed by constants) rather than in local memory. A small body runs
    // the full rounds without the per-index test, then the last partial
    // round with it: behind a test per index each add waited for its load
    // before the next load issued. The indices meet the strands in the same
    // order either way.
    std::size_t body_ops = 0;
    for (const auto& inner : body.ops()) body_ops += inner->num_regions() == 0 ? 1 : 64;
    const bool split = body_ops <= kSplitStrandBodyOps;
    auto emit_round = [&](bool guarded) {
      line("#pragma unroll");
      line("for (int " + s + " = 0; " + s + " < " + count_text + "; ++" + s + ")");
      line(guarded ? "if (" + round + " + " + s + " < " + hi + ") {" : "{");
      ++indent_;
      name_[body.argument(0)] = fresh("iv");
      line("const tsr::i64 " + name_.at(body.argument(0)) + " = " + round + " + " + s + ";");
      for (std::size_t j = 0; j < n_acc; ++j) {
        name_[body.argument(1 + j)] = fresh("a");
        line(type_of(body.argument(1 + j)) + " " + name_.at(body.argument(1 + j)) + " = " + accs[j] + "[" + s + "];");
      }
      emit_block(body);
      for (std::size_t j = 0; j < n_acc; ++j)
        line(accs[j] + "[" + s + "] = " + name_.at(body.terminator()->operand(j)) + ";");
      --indent_;
      line("}");
    };
    if (split) {
      line("tsr::i64 " + round + " = " + lo + ";");
      line("for (; " + round + " + " + count_text + " <= " + hi + "; " + round + " += " + count_text + ")");
      emit_round(false);
      line("if (" + round + " < " + hi + ")");
      emit_round(true);
    } else {
      line("for (tsr::i64 " + round + " = " + lo + "; " + round + " < " + hi + "; " + round + " += " + count_text + ")");
      emit_round(true);
    }
    for (std::int64_t k = 0; k < count; ++k)
      for (std::size_t j = 0; j < n_acc; ++j)
        line(name_.at(op.result(static_cast<std::size_t>(k) * n_acc + j)) + " = " + accs[j] + "[" +
             std::to_string(k) + "];");
    --indent_;
    line("}");
  }

  // ---- flat kernels: several tiles per thread, loads first ----
  //
  // A flat kernel's thread holding one tile has one load in flight: at 4
  // bytes a load, 2048 threads keep 8 KiB per multiprocessor in flight,
  // where a Hopper GPU's memory needs about three times that (the spec's
  // `scale` ran at 0.65x of a copy; a probe taking four tiles per thread with
  // their loads first ran at 1.0x, and without moving the loads at 0.77x:
  // a load cannot pass the previous tile's store to a buffer it may alias).
  // Tiles of a flat launch are not ordered with one another, so a thread may
  // read tile k + 1's inputs before it writes tile k's outputs; within a
  // tile the order stays: only loads that come before the tile's first
  // store (or other op with effects) move.

  static bool index_op(const ir::Operation& op) {
    static const std::unordered_set<std::string_view> ops = {
        "tile.const", "tile.symbol", "tile.linear_id", "tile.add", "tile.sub", "tile.mul", "tile.min", "tile.max",
        "tile.neg",   "tile.abs",    "tile.cmp",       "tile.and", "tile.or",  "tile.not", "tile.select", "tile.cast"};
    return ops.count(op.name()) != 0;
  }

  // Walks `block` in order up to the tile's first op with effects, calling
  // `visit` on each op it passes: index ops of pure operands (`pure`
  // collects their results), loads of gmem parameters at pure indices, and
  // tile.ifs on pure conditions, whose then-branch it enters. Other ops
  // without effects are passed over. Returns false where it stopped.
  bool walk_ahead(const ir::Block& block, std::unordered_set<const ir::Value*>& pure,
                  const std::function<void(const ir::Operation&, bool enter)>& visit) const {
    auto is_pure = [&](const ir::Value* v) {
      return pure.count(v) != 0 || (v->defining_op() == nullptr && v->type().is_lane() && !v->type().is_gmem());
    };
    for (const auto& holder : block.ops()) {
      const ir::Operation& op = *holder;
      if (op.def().is_terminator) break;
      const std::string_view n = op.name();
      const bool operands_pure = std::all_of(op.operands().begin(), op.operands().end(), is_pure);
      if (index_op(op) && operands_pure) {
        pure.insert(op.result(0));
        visit(op, false);
      } else if (n == "tile.load_elem") {
        const ir::Value* buffer = op.operand(0);
        const bool ahead = buffer->type().is_gmem() && buffer->defining_op() == nullptr &&
                           std::all_of(op.operands().begin() + 1, op.operands().end(), is_pure);
        if (ahead) visit(op, false);
      } else if (n == "tile.if" && op.num_results() == 0 && is_pure(op.operand(0))) {
        visit(op, true);
        const bool went_through = walk_ahead(op.region(0).block(), pure, visit);
        visit(op, false);  // leaves the branch
        if (!went_through || has_effects(op.region(1).block())) return false;
      } else if (op.num_regions() != 0 || has_effects_op(op)) {
        return false;
      }
    }
    return true;
  }
  static bool has_effects_op(const ir::Operation& op) {
    const std::string_view n = op.name();
    return n == "tile.store_elem" || n == "tile.store_vector" || n == "tile.check_range" || n == "tile.check_span" ||
           n == "tile.div" || n == "tile.rem" || n == "tile.floordiv" || !is_lane_value_op(op);
  }
  static bool has_effects(const ir::Block& block) {
    for (const auto& op : block.ops()) {
      if (op->def().is_terminator) continue;
      if (op->num_regions() != 0 || has_effects_op(*op)) return true;
    }
    return false;
  }

  // The loads a flat kernel reads ahead: none unless the body is small
  // (four copies of it are emitted) and one load can move.
  std::vector<const ir::Operation*> read_ahead_loads(const ir::Block& body) const {
    std::size_t ops = 0;
    std::function<void(const ir::Block&)> count = [&](const ir::Block& b) {
      for (const auto& op : b.ops()) {
        ++ops;
        for (std::size_t r = 0; r < op->num_regions(); ++r) count(op->region(r).block());
      }
    };
    count(body);
    std::vector<const ir::Operation*> loads;
    if (ops > 64) return loads;
    std::unordered_set<const ir::Value*> pure;
    walk_ahead(body, pure, [&](const ir::Operation& op, bool) {
      if (op.name() == "tile.load_elem") loads.push_back(&op);
    });
    return loads;
  }

  // Each thread: the read-ahead loads of its tiles, then the tiles in turn,
  // each behind `group < p.grid` with its own fault record.
  void emit_tiles_with_loads_ahead(const ir::Block& body) {
    constexpr int kTiles = 4;
    out_.tiles_per_thread = kTiles;
    std::vector<std::vector<std::string>> ahead(kTiles);
    for (int k = 0; k < kTiles; ++k) {
      for (const ir::Operation* load : read_ahead_) {
        ahead[k].push_back(fresh("ahead"));
        line(type_of(load->result(0)) + " " + ahead[k].back() + "{};");
      }
    }
    auto open_tile = [&](int k) {
      line("{");
      ++indent_;
      line("const tsr::i64 group = first + " + std::to_string(k) + " * kThreads;");
      line("const tsr::Where& W = W" + std::to_string(k) + ";");
      line("(void)W;");
      line("if (group < p.grid) {");
      ++indent_;
    };
    auto close_tile = [&](bool report) {
      --indent_;
      line("}");
      if (report) line("W.report();");
      --indent_;
      line("}");
    };
    for (int k = 0; k < kTiles; ++k) {
      open_tile(k);
      std::unordered_set<const ir::Value*> pure;
      std::vector<std::optional<ExtentGuard>> open_ifs;
      walk_ahead(body, pure, [&](const ir::Operation& op, bool enter) {
        if (op.name() == "tile.if") {
          if (enter) {
            line("if (" + name_.at(op.operand(0)) + ") {");
            ++indent_;
            open_ifs.push_back(extent_guard(*op.operand(0)));
            if (open_ifs.back()) guards_.push_back(*open_ifs.back());
          } else {
            if (open_ifs.back()) guards_.pop_back();
            open_ifs.pop_back();
            --indent_;
            line("}");
          }
        } else if (op.name() == "tile.load_elem") {
          const std::size_t j = static_cast<std::size_t>(
              std::find(read_ahead_.begin(), read_ahead_.end(), &op) - read_ahead_.begin());
          line(ahead[static_cast<std::size_t>(k)][j] + " = " + load_expr(args_of(op), unchecked_access(op)) + ";");
        } else {
          emit_op(op);
        }
      });
      close_tile(false);
    }
    for (int k = 0; k < kTiles; ++k) {
      open_tile(k);
      for (std::size_t j = 0; j < read_ahead_.size(); ++j)
        preloaded_[read_ahead_[j]] = ahead[static_cast<std::size_t>(k)][j];
      emit_block(body);
      preloaded_.clear();
      close_tile(true);
    }
  }

  void emit_if(const ir::Operation& op) {
    std::vector<const ir::Value*> results;
    for (std::size_t i = 0; i < op.num_results(); ++i) {
      declare(op.result(i));
      results.push_back(op.result(i));
    }
    line("if (" + name_.at(op.operand(0)) + ") {");
    const std::optional<ExtentGuard> guard = extent_guard(*op.operand(0));
    for (std::size_t r = 0; r < 2; ++r) {
      if (r == 1) line("} else {");
      ++indent_;
      if (r == 0 && guard) guards_.push_back(*guard);
      const ir::Block& b = op.region(r).block();
      for (std::size_t i = 0; i < b.num_arguments(); ++i) name_[b.argument(i)] = name_.at(op.operand(1 + i));
      emit_block(b);
      carry(results, *b.terminator(), 0);
      if (r == 0 && guard) guards_.pop_back();
      --indent_;
    }
    line("}");
  }

  // `if (i < n)` with i a non-negative index and n a symbol the launcher
  // binds to buffer extents: inside, an access at exactly i of a 1-D buffer
  // whose extent is n is in bounds (the spec's `scale`: one tile per element
  // behind that guard), so it goes unchecked like a template's `in_bounds`.
  struct ExtentGuard {
    const ir::Value* index;
    std::string symbol;
  };
  std::optional<ExtentGuard> extent_guard(const ir::Value& cond) const {
    const ir::Operation* c = cond.defining_op();
    if (c == nullptr || c->name() != "tile.cmp" || c->attrs().get_string("pred") != "lt") return std::nullopt;
    const ir::Operation* s = c->operand(1)->defining_op();
    if (s == nullptr || s->name() != "tile.symbol") return std::nullopt;
    const std::string& name = s->attrs().get_string("name");
    if (scalar_symbols_.count(name) != 0 || !bounds_->non_negative(c->operand(0))) return std::nullopt;
    return ExtentGuard{c->operand(0), name};
  }
  // The fp32 value a global bf16 / fp16 store rounds (its value a tile.cast
  // of an fp32 lane to the buffer's type, to nearest, infinities kept), or
  // null.
  static const ir::Value* rounded_store_source(const ir::Operation& store) {
    return rounded_source(store.operand(0)->type(), store.operands().back());
  }
  // The fp32 value that `stored`, a value stored into `buffer`, rounds, or null.
  static const ir::Value* rounded_source(const ir::Type& buffer, const ir::Value* stored) {
    const ir::Operation* cast = stored->defining_op();
    if (!buffer.is_gmem() || !cast || cast->name() != "tile.cast") return nullptr;
    const NumericsPolicy& to = cast->attrs().get_policy("to");
    const NumericsPolicy& from = cast->operand(0)->type().policy;
    const bool narrow = to.storage == DType::bf16 || to.storage == DType::fp16;
    if (!narrow || to.storage != buffer.policy.storage || to.rounding != Rounding::nearest_even ||
        to.overflow != Overflow::inf_nan || buffer.policy.overflow != Overflow::inf_nan) {
      return nullptr;
    }
    const bool plain_f32 = from.storage == DType::fp32 && from.rounding == Rounding::nearest_even &&
                           from.overflow == Overflow::inf_nan;
    return plain_f32 ? cast->operand(0) : nullptr;
  }
  bool unchecked_access(const ir::Operation& op) const { return proven_in_bounds(op) || guarded_access(op); }
  bool guarded_access(const ir::Operation& op) const {
    const ir::Type& t = op.operand(0)->type();
    if (!t.is_gmem() || t.rank() != 1 || !t.shape[0].is_symbolic()) return false;
    for (const ExtentGuard& g : guards_)
      if (g.index == op.operand(1) && g.symbol == t.shape[0].symbol) return true;
    return false;
  }

  void emit_while(const ir::Operation& op) {
    const ir::Block& before = op.region(0).block();
    const ir::Block& after = op.region(1).block();
    std::vector<const ir::Value*> loop_vals, results, after_args;
    for (std::size_t i = 0; i < before.num_arguments(); ++i) {
      declare(before.argument(i), name_.at(op.operand(i)));
      loop_vals.push_back(before.argument(i));
    }
    for (std::size_t i = 0; i < op.num_results(); ++i) {
      declare(op.result(i));
      results.push_back(op.result(i));
    }
    line("while (true) {  // tile.while");
    ++indent_;
    emit_block(before);
    const ir::Operation& cond = *before.terminator();
    line("if (!(" + name_.at(cond.operand(0)) + ")) {");
    ++indent_;
    carry(results, cond, 1);
    line("break;");
    --indent_;
    line("}");
    for (std::size_t i = 0; i < after.num_arguments(); ++i) {
      declare(after.argument(i), name_.at(cond.operand(1 + i)));
      after_args.push_back(after.argument(i));
    }
    emit_block(after);
    carry(loop_vals, *after.terminator(), 0);
    --indent_;
    line("}");
  }

  // True when a shared-memory write can happen after `op` before the next
  // barrier (scanning the rest of its block, a loop body's start on the back
  // edge, and the code after the loop).
  bool shared_write_before_barrier(const ir::Operation& op) {
    const ir::Block* block = op.parent_block();
    const std::vector<const ir::Operation*> ops = op_list(*block);
    std::size_t i = 0;
    while (ops[i] != &op) ++i;
    for (std::size_t k = i + 1; k < ops.size(); ++k) {
      if (ops[k]->name() == "tile.barrier") return false;
      if (writes_shared(*ops[k])) return true;
    }
    const ir::Operation* owner = block->parent_region() ? block->parent_region()->parent_op() : nullptr;
    if (owner == nullptr || owner == &func_) return false;  // the kernel ends
    if (owner->name() != "tile.for") return true;
    bool barrier_first = false;
    for (std::size_t k = 0; k < i; ++k) {
      if (ops[k]->name() == "tile.barrier") {
        barrier_first = true;
        break;
      }
      if (writes_shared(*ops[k])) return true;
    }
    if (!barrier_first) return true;
    const std::vector<const ir::Operation*> outer = op_list(*owner->parent_block());
    std::size_t j = 0;
    while (outer[j] != owner) ++j;
    for (std::size_t k = j + 1; k < outer.size(); ++k) {
      if (outer[k]->name() == "tile.barrier") return false;
      if (writes_shared(*outer[k])) return true;
    }
    return owner->parent_block() != &ir::function_body(func_);
  }

  void sync_after_shared_read(const ir::Operation& op) {
    if (shared_write_before_barrier(op)) line("__syncthreads();  // every thread has read its part");
  }

  // A shared view for mma operand `i`: the buffer itself (read transposed
  // through tsr::tview for a fused transpose), or staging scratch.
  std::string mma_operand(const ir::Operation& op, std::size_t i, std::int64_t& scratch_at, bool& staged) {
    const ir::Value* v = op.operand(i);
    bool transposed = false;
    if (const ir::Value* buf = in_place_buffer(v, transposed)) {
      tma_settle(buf);
      return transposed ? "tsr::tview(" + name_.at(buf) + ")" : name_.at(buf);
    }
    return stage_value(v, scratch_at, staged);
  }

  // Stages register tile `v` into scratch shared memory at `scratch_at`
  // (after a barrier, the first time `staged` is false); returns the view.
  std::string stage_value(const ir::Value* v, std::int64_t& scratch_at, bool& staged) {
    const auto [rows, cols] = rows_cols(v->type());
    const std::string view = fresh("stage");
    const std::string type = "tsr::SView<" + cu_dtype(v->type().dtype()) + ", " + std::to_string(rows) + ", " +
                             std::to_string(cols) + ", 0, 2>";
    if (!staged) line("__syncthreads();  // earlier readers of the staging area are done");
    staged = true;
    line("const " + type + " " + view + "{reinterpret_cast<" + type + "::S*>(tsr_smem + kScratch + " +
         std::to_string(scratch_at) + "), -1000};");
    line("tsr::stage(" + view + ", " + name_.at(v) + ", tid);");
    const std::int64_t bytes = rows * cols * storage_bytes(v->type().dtype());
    scratch_at += (bytes + 127) / 128 * 128;
    scratch_bytes_ = std::max(scratch_bytes_, scratch_at);
    return view;
  }

  // Stages register tile `v` into scratch and waits until the whole tile is
  // there: the view every thread then reads.
  std::string staged_view(const ir::Value* v) {
    std::int64_t scratch_at = 0;
    bool staged = false;
    const std::string view = stage_value(v, scratch_at, staged);
    line("__syncthreads();  // the staged tile is complete");
    return view;
  }

  // Declares result tile `r` (filled by the statement that follows); its name.
  const std::string& declare_result(const ir::Value* r) {
    name_[r] = fresh("t");
    line(type_of(r) + " " + name_.at(r) + ";");
    return name_.at(r);
  }

  void emit_group_op(const ir::Operation& op) {
    const std::string n(op.name().substr(op.name().find('.') + 1));
    const std::vector<std::string> a = args_of(op);
    if (n == "smem_alloc") return emit_smem_alloc(op);
    if (n == "barrier") {
      // wgmma reads shared memory through the async proxy: writes are fenced into it first.
      return line(wg_kernel_ ? "tsr::barrier_async();" : "__syncthreads();");
    }
    if (n == "cp_async_wait") {
      const std::int64_t pending = op.attrs().get_int("pending");
      line("tsr::cp_async_wait<" + std::to_string(pending) + ">();");
      // Waiting for every copy covers the bulk tensor copies too: the
      // pipeline's copies past the end may still be landing, and the space
      // they land in can be reused after the barrier that follows
      // (tile-plan-shared).
      if (pending == 0) {
        std::vector<std::string> bars;  // in a fixed order (the map's is by address)
        for (const auto& entry : tma_bar_) bars.push_back(entry.second);
        std::sort(bars.begin(), bars.end());
        for (const std::string& bar : bars) line("tsr::tma_settle(" + bar + ");");
      }
      return;
    }
    if (n == "mma_wait") {
      // Only wgmma mmas stay in flight; the other paths complete when issued.
      // When some async mma is not a wgmma the counts differ, so wait for all.
      const std::int64_t pending = async_off_wg_ ? 0 : op.attrs().get_int("pending");
      if (!wg_kernel_) return line("// tile.mma_wait: every mma of this kernel completes when issued");
      return line("tsr::wg_wait<" + std::to_string(pending) + ">();");
    }
    if (n == "cp_async") {
      const ir::Type& dst = op.operand(0)->type();
      const ir::Type& src = op.operand(1)->type();
      if (dst.rank() > 2 || src.rank() != dst.rank()) unsupported(op, "cp_async copies 1-D or 2-D boxes of equal rank");
      const std::string r0 = dst.rank() == 2 ? a[2] : "0", c0 = dst.rank() == 2 ? a[3] : a[2];
      const std::string copy = "tsr::cp_async(" + a[0] + ", " + a[1] + ", " + r0 + ", " + c0 + ", tid, kThreads);";
      if (auto it = tma_map_of_.find(&op); it != tma_map_of_.end()) {
        return line("tsr::tma_copy(" + a[0] + ", &p.tma[" + std::to_string(it->second) + "], " + r0 + ", " + c0 + ", " +
                    tma_bar_.at(op.operand(0)) + ", tid);");
      }
      return line(copy);
    }
    if (n == "tile_load") {
      if (fused_.count(&op) != 0) return;  // the mma reads the shared buffer in place
      tma_settle(op.operand(0));
      const ir::Type& src = op.operand(0)->type();
      if (src.rank() > 2) unsupported(op, "tile loads read 1-D or 2-D buffers");
      const std::string r0 = src.rank() == 2 ? a[1] : "0", c0 = src.rank() == 2 ? a[2] : a[1];
      const ir::Value* r = op.result(0);
      name_[r] = fresh("t");
      line(type_of(r) + " " + name_.at(r) + ";");
      line("tsr::tile_load(" + name_.at(r) + ", " + a[0] + ", " + r0 + ", " + c0 + ", tid);");
      if (wg_accumulator(r)) line(name_.at(r) + " = tsr::wg_fenced(" + name_.at(r) + ");");
      if (src.is_smem()) sync_after_shared_read(op);
      return;
    }
    if (n == "tile_store") {
      const ir::Type& dst = op.operand(0)->type();
      if (dst.rank() > 2) unsupported(op, "tile stores write 1-D or 2-D buffers");
      const std::string r0 = dst.rank() == 2 ? a[1] : "0", c0 = dst.rank() == 2 ? a[2] : a[1];
      return line("tsr::tile_store(" + a[0] + ", " + r0 + ", " + c0 + ", " + a.back() + ", " +
                  cu_overflow(dst.policy.overflow) + ", tid);");
    }
    if (n == "zeros") {
      const std::string type = type_of(op.result(0));
      return define(op.result(0), "tsr::zeros<" + type + ">()");
    }
    if (n == "transpose") {
      if (fused_.count(&op) != 0) return;  // the mma reads the shared buffer in place, transposed
      // Threads hold other elements of the result than of the operand: the
      // tile goes through scratch shared memory (the next scratch user
      // synchronises before writing it).
      const std::string view = staged_view(op.operand(0));
      return line("tsr::transpose_from(" + declare_result(op.result(0)) + ", " + view + ", tid);");
    }
    if (n == "tile_add") {
      const DType d = op.result(0)->type().dtype();
      if (d != DType::fp32 && d != DType::fp64) {
        unsupported(op, "tile.tile_add of " + std::string(name(d)) + " tiles (fp32 and fp64 are supported)");
      }
      return define(op.result(0), "tsr::tile_add(" + a[0] + ", " + a[1] + ")");
    }
    if (n == "tile_full") {
      const ir::Type& t = op.result(0)->type();
      return define(op.result(0), "tsr::tile_full<" + type_of(op.result(0)) + ">(" +
                                      cu_literal(op.attrs().get_real("value"), t.dtype(), Overflow::inf_nan,
                                                 Rounding::nearest_even) +
                                      ")");
    }
    if (n == "tile_unary") {
      return define(op.result(0), "tsr::tile_unary<tsr::kFn_" + op.attrs().get_string("fn") + ">(" + a[0] + ")");
    }
    if (n == "tile_causal_fill") {
      const ir::Type& t = op.result(0)->type();
      const bool rows = !op.attrs().has("rows") || op.attrs().get_bool("rows");
      return define(op.result(0), "tsr::tile_causal_fill(" + a[0] + ", " + a[1] + ", " + a[2] + ", " + a[3] + ", " +
                                      cu_literal(op.attrs().get_real("value"), t.dtype(), Overflow::inf_nan,
                                                 Rounding::nearest_even) +
                                      ", tid" + (rows ? "" : ", false") + ")");
    }
    if (n == "tile_binary") {
      const std::string fn = "tsr::kFn_" + op.attrs().get_string("fn");
      const ir::Shape& shape = op.result(0)->type().shape;
      const bool full0 = op.operand(0)->type().shape == shape, full1 = op.operand(1)->type().shape == shape;
      if (full0 && full1) return define(op.result(0), "tsr::tile_binary<" + fn + ">(" + a[0] + ", " + a[1] + ")");
      if (!full0 && !full1) {
        unsupported(op, "tile.tile_binary broadcasting both operands (one must have the result's shape)");
      }
      // The broadcast operand goes through scratch; the other stays in registers.
      const std::string view = staged_view(op.operand(full0 ? 1 : 0));
      return define(op.result(0), "tsr::tile_binary_staged<" + fn + ", " + (full0 ? "false" : "true") + ">(" +
                                      a[full0 ? 0 : 1] + ", " + view + ", tid)");
    }
    if (n == "tile_reduce") {
      // Each result element is one thread's walk along the staged row (or column).
      const std::string view = staged_view(op.operand(0));
      return line("tsr::tile_reduce<tsr::kFn_" + op.attrs().get_string("fn") + ", " +
                  std::to_string(op.attrs().get_int("axis")) + ">(" + declare_result(op.result(0)) + ", " + view +
                  ", tid);");
    }
    if (n == "tile_cast") {
      const NumericsPolicy& to = op.attrs().get_policy("to");
      require_deterministic_rounding(to, "tile.tile_cast");
      return define(op.result(0), "tsr::tile_cast<" + cu_dtype(to.storage) + ">(" + a[0] + cu_rounding_args(to) + ")");
    }
    if (n == "mma") {
      std::int64_t scratch_at = 0;
      bool staged = false;
      const std::string av = mma_operand(op, 0, scratch_at, staged);
      const std::string bv = mma_operand(op, 1, scratch_at, staged);
      if (staged) line("__syncthreads();  // the staged operands are complete");
      std::string call;
      const bool async = is_async_mma(op);
      if (wg_.count(&op) != 0) {
        const bool bf16 = op.operand(0)->type().dtype() == DType::bf16;
        call = std::string(async ? "tsr::mma_wg_async<" : "tsr::mma_wg<") + (bf16 ? "true" : "false") + ">(" + av +
               ", " + bv + ", " + a[2] + ", tid)";
      } else if (tc_.count(&op) != 0) {
        const bool bf16 = op.operand(0)->type().dtype() == DType::bf16;
        call = std::string("tsr::mma_tc<") + (bf16 ? "true" : "false") + ">(" + av + ", " + bv + ", " + a[2] + ", tid)";
      } else {
        call = "tsr::mma_scalar<" + cu_dtype(op.operand(0)->type().dtype()) + ", " +
               cu_dtype(op.operand(1)->type().dtype()) + ">(" + av + ", " + bv + ", " + a[2] + ", tid)";
      }
      define(op.result(0), call);
      // An async wgmma still reads its buffers: the tile.mma_wait and the
      // barrier after it (tile-pipeline) end the reads instead.
      if (async && wg_.count(&op) != 0) return;
      const ir::Operation* da = op.operand(0)->defining_op();
      const ir::Operation* db = op.operand(1)->defining_op();
      if ((da != nullptr && fused_.count(da) != 0) || (db != nullptr && fused_.count(db) != 0)) {
        sync_after_shared_read(op);
      }
      return;
    }
    unsupported(op, "the op is not supported by the CUDA backend");
  }

  void emit_smem_alloc(const ir::Operation& op) {
    const ir::Value* r = op.result(0);
    const ir::Type& t = r->type();
    require_deterministic_rounding(t.policy, "shared buffer");
    if (t.rank() > 2) unsupported(op, "shared buffers of rank 1 or 2 are supported");
    const auto [rows, cols] = rows_cols(t);
    const std::int64_t bytes = rows * cols * storage_bytes(t.dtype());
    std::int64_t offset = 0;
    if (const ir::Attribute* o = op.attrs().find("offset"); o && ir::kind_of(*o) == ir::AttrKind::integer) {
      offset = std::get<std::int64_t>(*o);  // planned by tile-plan-shared
    } else {
      offset = next_shared_;
      next_shared_ += (bytes + tile::kSharedAlignment - 1) / tile::kSharedAlignment * tile::kSharedAlignment;
    }
    shared_cursor_ = std::max(shared_cursor_, offset + bytes);
    const std::string type = smem_type(t);
    name_[r] = fresh("s");
    line("const " + type + " " + name_.at(r) + "{reinterpret_cast<" + type + "::S*>(tsr_smem + " +
         std::to_string(offset) + "), " + std::to_string(-1 - smem_count_++) + "};");
  }

  std::string assemble() {
    std::ostringstream s;
    std::string source;
    if (const ir::Attribute* a = func_.attrs().find("source"); a && ir::kind_of(*a) == ir::AttrKind::string) {
      source = std::get<std::string>(*a);
    }
    s << "// Generated by the Tessera CUDA backend from Tile IR kernel '" << out_.name << "'"
      << (source.empty() ? "" : " (" + source + ")") << ".\n";
    if (out_.flat) {
      s << "// No group shape and no group-cooperative ops: "
        << (out_.tiles_per_thread > 1 ? std::to_string(out_.tiles_per_thread) + " tiles per thread, their loads first, "
                                      : std::string("one tile per thread, "))
        << out_.block_threads << " threads per block.\n";
    } else {
      s << "// One thread block per group, one thread per tile (" << out_.block_threads << " threads).\n";
    }
    s << "#include \"tessera/tile.cuh\"\n\n";
    // A wgmma kernel whose accumulators and shared memory leave room for two
    // blocks per multiprocessor asks for them (registers capped at 128), so
    // one block's copies and barriers overlap the other's tensor-core work.
    const bool two_blocks =
        wg_kernel_ && wg_slots_ <= 64 && out_.block_threads <= 512 && out_.shared_bytes * 2 <= 227 * 1024 - 2048;
    const bool tma = !out_.tma_maps.empty();
    // A kernel asking for several resident groups (blocks) per
    // multiprocessor gets registers to match: a memory-bound kernel's
    // blocks then keep more loads in flight than a block's barriers allow.
    std::int64_t min_blocks = two_blocks ? 2 : 0;
    if (const ir::Attribute* r = func_.attrs().find("resident_groups"); r && !two_blocks) {
      min_blocks = std::get<std::int64_t>(*r);
    }
    // TMA reads its tensor maps from the parameter itself.
    s << "extern \"C\" __global__ void __launch_bounds__(" << out_.block_threads
      << (min_blocks > 1 ? ", " + std::to_string(min_blocks) : std::string()) << ") "
      << kEntryName << "(const " << (tma ? "__grid_constant__ " : "") << "tsr::Params p) {\n";
    s << "  extern __shared__ __align__(" << (wg_kernel_ ? 1024 : 128) << ") unsigned char tsr_smem[];\n";
    s << "  constexpr int kThreads = " << out_.block_threads << ";\n";
    s << "  constexpr tsr::i64 kGroupSize = " << out_.group_size << ";\n";
    s << "  constexpr int kScratch = " << scratch_offset_ << ";\n";
    s << "  const int tid = threadIdx.x;\n";
    if (out_.tiles_per_thread > 1) {
      // Tile k of a thread: first + k * kThreads (consecutive threads take
      // consecutive tiles); each has its own fault record.
      s << "  const tsr::i64 first = (tsr::i64)blockIdx.x * (kThreads * " << out_.tiles_per_thread << ") + tid;\n";
      for (int k = 0; k < out_.tiles_per_thread; ++k)
        s << "  const tsr::Where W" << k << "{p.fault, first + " << k << " * kThreads};\n";
      s << "  (void)kGroupSize; (void)kScratch; (void)tsr_smem;\n";
    } else {
      if (out_.flat) {
        s << "  const tsr::i64 group = (tsr::i64)blockIdx.x * kThreads + tid;\n";
        s << "  if (group >= p.grid) return;\n";
      } else {
        s << "  const tsr::i64 group = blockIdx.x;\n";
      }
      s << "  const tsr::Where W{p.fault, group};\n";
      s << "  (void)kGroupSize; (void)kScratch; (void)W; (void)tsr_smem;\n";
    }
    if (tma) {
      // One mbarrier per TMA destination, after the planned buffers; thread
      // 0 initialises them before any copy.
      for (std::size_t i = 0; i < tma_bar_.size(); ++i) {
        const std::string n = std::to_string(i);
        s << "  const tsr::u32 tma_bar" << n << " = tsr::smem_addr(tsr_smem + " << tma_bars_offset_ << " + " << 8 * i
          << ");\n";
        s << "  tsr::u32 tma_issued" << n << " = 0, tma_waited" << n << " = 0;\n";
      }
      s << "  if (tid == 0) {\n";
      for (std::size_t i = 0; i < tma_bar_.size(); ++i) s << "    tsr::mbar_init(tma_bar" << i << ");\n";
      s << "  }\n  __syncthreads();\n";
    }
    const ir::Block& body = ir::function_body(func_);
    for (std::size_t i = 0; i < body.num_arguments(); ++i) {
      const ir::Value* arg = body.argument(i);
      const ir::Type& t = arg->type();
      const std::string& n = name_.at(arg);
      if (t.is_gmem()) {
        s << "  const auto " << n << " = tsr::" << (options_.contiguous_buffers ? "gview_unit<" : "gview<")
          << cu_dtype(t.dtype()) << ", " << t.rank() << ">(p.buf[" << i
          << "], " << i << ");\n";
      } else {
        const DType d = t.dtype();
        const std::string field =
            is_float(d) ? "p.real[" + std::to_string(i) + "]" : "p.integer[" + std::to_string(i) + "]";
        s << "  const " << cu_value_type(d) << " " << n << " = (" << cu_value_type(d) << ")" << field << ";\n";
      }
      s << "  (void)" << n << ";\n";
    }
    for (std::size_t i = 0; i < out_.symbols.size(); ++i) {
      const std::string& sym = out_.symbols[i];
      if (options_.specialize.count(sym) != 0u) continue;
      s << "  const tsr::i64 " << symbol_expr(sym) << " = p.sym[" << i << "];\n";
    }
    // Out-of-range accesses are noted as they happen and recorded here
    // (tsr::Where; with several tiles per thread, at the end of each).
    s << body_ << (out_.tiles_per_thread > 1 ? "}\n" : "  W.report();\n}\n");
    return s.str();
  }

  const ir::Operation& func_;
  const KernelCompileOptions& options_;
  std::unordered_set<std::string> scalar_symbols_;
  std::unique_ptr<codegen::IndexBounds> bounds_;
  std::vector<ExtentGuard> guards_;  // the extent guards of the enclosing tile.ifs' then-branches
  EmittedKernel out_;
  std::string body_;
  int indent_ = 1;
  std::unordered_map<const ir::Value*, std::string> name_;
  Classes classes_;
  std::unordered_map<const ir::Value*, std::string> layout_;  // class root -> layout type
  std::vector<const ir::Operation*> mmas_;
  std::unordered_map<const ir::Operation*, bool> tc_;
  std::unordered_set<const ir::Operation*> wg_;               // tile.mma ops on the wgmma path
  bool wg_kernel_ = false;                                    // some tile.mma uses wgmma (sm_90a)
  bool async_off_wg_ = false;                                 // some async tile.mma is not on the wgmma path
  std::unordered_map<const ir::Operation*, int> tma_map_of_;  // cp_async -> its tensor map (plan_tma)
  std::map<const ir::Value*, std::string> tma_bar_;           // TMA buffer -> "bar, issued, waited" names
  std::int64_t wg_slots_ = 0;                                 // accumulators per thread of the largest wgmma tile
  std::unordered_set<const ir::Operation*> fused_;
  std::vector<const ir::Operation*> read_ahead_;                      // flat loads each thread reads first
  std::unordered_map<const ir::Operation*, std::string> preloaded_;  // those loads' values, for the tile emitted now
  int next_value_ = 0;
  std::int64_t next_shared_ = 0;
  std::int64_t shared_cursor_ = 0;
  std::int64_t scratch_offset_ = 0;
  std::int64_t tma_bars_offset_ = 0;
  std::int64_t scratch_bytes_ = 0;
  int smem_count_ = 0;
};

}  // namespace

EmittedKernel emit_kernel(const ir::Operation& kernel_func, const KernelCompileOptions& options) {
  return Emitter(kernel_func, options).run();
}

}  // namespace tessera::cuda::detail
