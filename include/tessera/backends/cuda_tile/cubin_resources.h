// What a cubin's kernel takes from a multiprocessor, read from the cubin
// itself (no GPU, no driver), and how many of its thread blocks fit on one.
//
// tileiras chooses a kernel's threads (warp specialization: 128 or 256),
// registers and shared-memory stages itself; the entry's occupancy hint asks
// for a number of blocks per multiprocessor but does not guarantee it. The
// cuda_tile runtime checks the hint against these figures after assembling
// (runtime.cpp, build_cubin), which needs them before any launch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace tessera::cuda_tile {

struct CubinResources {
  std::int64_t threads = 0;       // the block's threads (EIATTR_REQNTID)
  std::int64_t registers = 0;     // per thread (EIATTR_REGCOUNT)
  std::int64_t shared_bytes = 0;  // static shared memory (.nv.shared.<entry>)
};

// The resources of kernel `entry` in an ELF cubin; nothing where the cubin
// does not state them (no REQNTID: the block size is the launch's choice).
// Raises CompileError for bytes that are not a well-formed 64-bit ELF.
std::optional<CubinResources> read_cubin_resources(std::span<const char> cubin, const std::string& entry);

// Blocks of such a kernel that fit on one multiprocessor of `arch`
// ("sm_90"), by the architecture's limits on threads, blocks, registers
// (allocated per warp in units of 256, per quarter of the multiprocessor)
// and shared memory (1 KiB reserved per block); nothing for an architecture
// whose limits are not tabled here. `ignore_shared`: the bound without the
// shared-memory limit.
std::optional<int> blocks_per_multiprocessor(const CubinResources& r, const std::string& arch,
                                             bool ignore_shared = false);

}  // namespace tessera::cuda_tile
