// Philox4x32-10: the counter-based random generator behind every random bit
// Tessera draws (stochastic rounding, rand/randn, dropout).
//
// Counter-based means the bits for element i depend only on (seed, i), so
// results are reproducible however the work is split across threads, groups
// or devices.
#pragma once

#include <array>
#include <cstdint>

namespace tessera {

// Ten rounds of Philox4x32 on counter `counter` with key `key`.
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kMul0} * counter[0];
    const std::uint64_t p1 = std::uint64_t{kMul1} * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// 32 random bits for element `index` of stream `seed`.
inline std::uint32_t random_bits32(std::uint64_t seed, std::uint64_t index) {
  return philox4x32({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u},
                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)})[0];
}

}  // namespace tessera
