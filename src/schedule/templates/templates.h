// The Schedule IR -> Tile IR templates, one per op family
// (tessera/schedule/lower_to_tile.h dispatches to them).
#pragma once

#include <optional>
#include <string>

#include "tessera/schedule/lower_to_tile.h"

namespace tessera::schedule::templates {

bool elementwise_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_elementwise(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool reduction_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_reduction(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool gemm_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_gemm(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool copy_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_copy(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool random_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_random(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool normalization_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_normalization(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool sparse_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_sparse(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool fft_covers(const ir::Operation& kernel, std::string* why);
// The shared memory a line of `points` complex points takes in an FFT
// kernel (two arrays, padded against bank conflicts), parts of `part_bytes`.
std::int64_t fft_line_bytes(std::int64_t points, std::int64_t part_bytes);
TileKernel lower_fft(const ir::Operation& kernel, ir::Module& out, const std::string& name);

bool complex_parts_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_complex_parts(const ir::Operation& kernel, ir::Module& out, const std::string& name);

// The axes a reduction root (graph.sum, mean, max, min, argmax and the
// split sums' ops) reduces, normalized and ascending.
std::vector<std::int64_t> reduced_axes(const ir::Operation& root);
// The number of elements each output of a graph.sum or graph.mean root adds,
// when every reduced dim is known; nullopt for other roots.
std::optional<std::int64_t> static_sum_length(const ir::Operation& root);

bool attention_covers(const ir::Operation& kernel, std::string* why);
TileKernel lower_attention(const ir::Operation& kernel, ir::Module& out, const std::string& name);
// Whether an attention kernel takes the blocked tensor-core form: the
// `attn_blocked` knob set (by assign_tiles or the CUDA Tile IR default, which
// apply their target's rule) and blocked_attention_covers.
bool blocked_attention_applies(const ir::Operation& kernel, std::string* why = nullptr);
// Whether the blocked form covers the kernel (the same rule on every target):
// graph.flash_attn or graph.flash_attn_bwd on bf16/fp16/fp32, or fp8 forwards (fp32 accumulation; the backward's do of the inputs'
// dtype), without dropout, D 64, 128 or 256, Sq and Sk known multiples of the
// `attn_tile` [BM, BN] (default 64, 64).
bool blocked_attention_covers(const ir::Operation& kernel, std::string* why = nullptr);
// fp8_e4m3 or fp8_e5m2: codes the blocked forward multiplies as bf16 values.
inline bool is_fp8(DType t) { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2; }
// The storage rule of the blocked form: bf16 and fp16; fp8 for forwards
// (their codes are exactly bf16 values); fp32, whose products are fp32
// fused multiply-adds in k order on every target (the CPU's tile mma and
// the PTX path's scalar mma), so a GPU gives the CPU's bits. CUDA Tile IR's
// mma could take fp32 at tf32: fp32 attention stays on the PTX path
// (cuda_tile_attention). The rule is the same on every target.
inline bool blocked_attention_storage(DType storage, bool forward) {
  return storage == DType::bf16 || storage == DType::fp16 || (forward && is_fp8(storage)) ||
         storage == DType::fp32;
}
// Whether a target runs attention of this storage dtype as the CPU does:
// the CPU itself, and fp32 on CUDA (the PTX path's scalar FMAs). Such
// attention takes the blocked form by default, is padded to it, and takes
// the CPU's blocks, so its bits are the CPU's (docs/design/0052).
inline bool attention_as_on_the_cpu(bool cuda, DType storage) { return !cuda || storage == DType::fp32; }
// Whether the CUDA Tile IR target may run the kernel's blocked attention:
// blocked_attention_covers on CUDA, and not fp32 (whose exact fp32 products
// only the PTX path promises).
bool cuda_tile_attention(const ir::Operation& kernel);
// The part of blocked_attention_covers about the op alone, not its lengths:
// dtypes, dropout and D (what pad-ragged-attention asks before padding).
bool blocked_attention_fits(const ir::Operation& root, std::string* why = nullptr);
// The default blocks: BM query rows against BN keys. 64 x 64 beat 128 x 64
// in every forward and backward case timed on an H100 (docs/design/0015).
inline constexpr std::int64_t kAttentionBlockRows = 64, kAttentionBlockKeys = 64;
std::vector<std::int64_t> attention_tile(const ir::Operation& kernel);
// Keys a block of the forward takes on the CUDA Tile IR target: 128 for D
// 64 and 128, twice the default, which tileiras turns into wider products
// per row block (an H200 at S = 8192, bf16: D 128 473 -> 564 TFLOP/s with
// occupancy 3, D 64 379 -> 416; the backward measured slower at 64 x 128
// and 128 x 64, and keeps 64 x 64; docs/design/0056).
inline constexpr std::int64_t kCudaTileForwardKeys = 128;
// Sets attn_tile [64, kCudaTileForwardKeys] on a blocked bf16/fp16/fp8
// graph.flash_attn kernel of D 64 or 128 whose keys are a known multiple of
// it, where no blocks were asked for (attn_tile unset: the default blocks,
// no TESSERA_ATTENTION_TILE); returns whether it did. set_tile_ir_knobs
// calls it for the blocked attention kernels of the CUDA Tile IR target.
bool take_cuda_tile_forward_keys(ir::Operation& kernel);

}  // namespace tessera::schedule::templates
