// Facts of the CUDA Tile IR bytecode format (version 13.3) that the writer
// needs: section ids, type tags, attribute tags, opcodes and enum values.
// They are numbers fixed by the published format; the field order of each
// op is in bytecode.cpp next to the op.
#pragma once

#include <cstdint>

namespace tessera::cuda_tile::format {

inline constexpr std::uint8_t kMagic[8] = {0x7F, 'T', 'i', 'l', 'e', 'I', 'R', 0x00};
// The version written: 13.3 is read by every tileiras from CUDA 13.3 on
// (tileiras --list-versions), the first release with sm_90 support.
inline constexpr std::uint8_t kVersionMajor = 13;
inline constexpr std::uint8_t kVersionMinor = 3;
inline constexpr std::uint16_t kVersionTag = 0;
inline constexpr std::uint8_t kAlignmentByte = 0xCB;

namespace section {
inline constexpr std::uint8_t end = 0x00, string = 0x01, func = 0x02, constant = 0x04, type = 0x05;
// The high bit of a section id says an alignment follows the length.
inline constexpr std::uint8_t aligned = 0x80;
}  // namespace section

namespace type_tag {
inline constexpr std::uint8_t pointer = 0x0c, tile = 0x0d, tensor_view = 0x0e, partition_view = 0x0f,
                              function = 0x10, token = 0x11;
}

namespace attr_tag {
inline constexpr std::uint8_t integer = 0x01, float_ = 0x02, bool_ = 0x03, div_by = 0x08, dictionary = 0x0a,
                              optimization_hints = 0x0b, bounded = 0x0c;
}

// Function flags of a function-section record.
inline constexpr std::uint8_t kFunctionKernel = 0x02, kFunctionHints = 0x04;

namespace op {
inline constexpr std::uint32_t join_tokens = 0x3C, make_token = 0x44, absf = 0, absi = 1, addf = 2, addi = 3, andi = 4, assume = 6, bitcast = 9, broadcast = 11,
                               cmpf = 14, cmpi = 15, constant = 16, continue_ = 17, divf = 20, divi = 21, exp = 23, exp2 = 24,
                               exti = 37, fma = 40, for_ = 41, ftof = 42, ftoi = 43, get_num_tile_blocks = 46,
                               get_tile_block_id = 48, if_ = 50, iota = 58, itof = 59, load_ptr_tko = 61,
                               load_view_tko = 62, log = 63, make_partition_view = 66, make_tensor_view = 67, maxf = 69,
                               maxi = 70, minf = 71, mini = 72, mmaf = 73, mmai = 74, mulf = 76, muli = 78, negf = 79,
                               negi = 80, offset = 81, ori = 82, permute = 83, reduce = 88, remi = 90, reshape = 91, return_ = 92,
                               select = 95, shli = 96, shri = 97, sqrt = 100, store_ptr_tko = 101, store_view_tko = 102,
                               subf = 103, subi = 104, tanh = 106, trunci = 107, xori = 108, yield = 109;
}

namespace rounding {
inline constexpr std::uint8_t nearest_even = 0, zero = 1, approx = 4, full = 5, nearest_int_to_zero = 6;
}
namespace signedness {
inline constexpr std::uint8_t unsigned_ = 0, signed_ = 1;
}
namespace overflow {
inline constexpr std::uint8_t none = 0;
}
namespace ordering {
// Unordered comparisons are true when either operand is NaN; ordered ones are false.
inline constexpr std::uint8_t unordered = 0, ordered = 1;
}
namespace memory {
inline constexpr std::uint8_t weak = 0;
}
// The flags varint of load_ptr_tko and store_ptr_tko: one bit per optional
// field, the optional attributes first (memory scope: bit 0, optimization
// hints: bit 1), then the optional operands in declaration order.
namespace load_ptr_flag {
inline constexpr std::uint64_t mask = 1u << 2, padding = 1u << 3, token = 1u << 4;
}
// load_view_tko and store_view_tko: memory scope bit 0, hints bit 1, token bit 2.
namespace view_flag {
inline constexpr std::uint64_t hints = 1u << 1, token = 1u << 2;
}
namespace store_ptr_flag {
inline constexpr std::uint64_t mask = 1u << 2, token = 1u << 3;
}

}  // namespace tessera::cuda_tile::format
