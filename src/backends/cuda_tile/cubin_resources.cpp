// Reading a cubin's per-kernel resources from its ELF sections, and the
// occupancy they allow (see the header).
//
// Where the figures live in a cubin (the layout cuobjdump -elf prints):
// - `.nv.info`, the module's attribute list: EIATTR_REGCOUNT entries, each
//   a symbol index and that function's registers per thread;
// - `.nv.info.<entry>`, the function's attributes: EIATTR_REQNTID, the
//   block shape it was compiled for (x, y, z);
// - `.nv.shared.<entry>`, a NOBITS section whose size is the function's
//   static shared memory.
// An attribute is a format byte, an id byte, then either a 16-bit value
// (4 bytes in all) or, for EIFMT_SVAL, a 16-bit size and that many bytes.
#include "tessera/backends/cuda_tile/cubin_resources.h"

#include <cstring>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::cuda_tile {
namespace {

constexpr std::uint8_t kFormatSized = 0x04;  // EIFMT_SVAL
constexpr std::uint8_t kRegCount = 0x2f;     // EIATTR_REGCOUNT
constexpr std::uint8_t kReqNtid = 0x10;      // EIATTR_REQNTID
constexpr std::uint32_t kSymtab = 2;         // SHT_SYMTAB

[[noreturn]] void malformed(const std::string& what) {
  raise(ErrorCode::Compile, "cuda_tile: the cubin is not a well-formed 64-bit ELF file: " + what);
}

class Elf {
 public:
  explicit Elf(std::span<const char> bytes) : bytes_(bytes) {
    if (bytes.size() < 64 || std::memcmp(bytes.data(), "\x7f" "ELF", 4) != 0 || bytes[4] != 2 || bytes[5] != 1) {
      malformed("no little-endian ELF64 header");
    }
    const auto shoff = read<std::uint64_t>(0x28);
    const auto entsize = read<std::uint16_t>(0x3a);
    const auto count = read<std::uint16_t>(0x3c);
    const auto names = read<std::uint16_t>(0x3e);
    if (entsize < 64 || names >= count) malformed("section header table");
    for (std::uint16_t i = 0; i < count; ++i) {
      const std::uint64_t at = shoff + std::uint64_t{i} * entsize;
      sections_.push_back(Section{read<std::uint32_t>(at), read<std::uint32_t>(at + 4), read<std::uint64_t>(at + 0x18),
                                  read<std::uint64_t>(at + 0x20), read<std::uint32_t>(at + 0x28), {}});
    }
    for (Section& s : sections_) s.name = string_at(sections_[names], s.name_offset);
  }

  struct Section {
    std::uint32_t name_offset, type;
    std::uint64_t offset, size;
    std::uint32_t link;
    std::string name;
  };
  const Section* find(const std::string& name) const {
    for (const Section& s : sections_) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
  // The index of symbol `name` in the symbol table, if any.
  std::optional<std::uint32_t> symbol(const std::string& name) const {
    for (const Section& s : sections_) {
      if (s.type != kSymtab) continue;
      if (s.link >= sections_.size()) malformed("symbol table's string table");
      for (std::uint64_t k = 0; k * 24 + 24 <= s.size; ++k) {
        if (string_at(sections_[s.link], read<std::uint32_t>(s.offset + k * 24)) == name) {
          return static_cast<std::uint32_t>(k);
        }
      }
    }
    return std::nullopt;
  }
  // Calls f(id, value bytes) for each attribute of an .nv.info section.
  template <class F>
  void attributes(const Section& s, F&& f) const {
    std::uint64_t at = s.offset;
    const std::uint64_t end = s.offset + s.size;
    while (at + 4 <= end) {
      const auto format = read<std::uint8_t>(at);
      const auto id = read<std::uint8_t>(at + 1);
      std::uint64_t size = 2;
      std::uint64_t value = at + 2;
      if (format == kFormatSized) {
        size = read<std::uint16_t>(at + 2);
        value = at + 4;
      }
      if (value + size > end) malformed("attribute list of " + s.name);
      f(id, bytes_.subspan(value, size));
      at = value + size;
      if (format != kFormatSized) at = (at + 3) / 4 * 4;
    }
  }
  template <class T>
  T read(std::uint64_t at) const {
    if (at + sizeof(T) > bytes_.size()) malformed("a read past its end at byte " + std::to_string(at));
    T v;
    std::memcpy(&v, bytes_.data() + at, sizeof(T));
    return v;
  }

 private:
  std::string string_at(const Section& table, std::uint64_t offset) const {
    std::string out;
    for (std::uint64_t at = table.offset + offset;; ++at) {
      const auto c = read<char>(at);
      if (c == '\0') return out;
      out.push_back(c);
    }
  }

  std::span<const char> bytes_;
  std::vector<Section> sections_;
};

template <class T>
T value_at(std::span<const char> v, std::size_t at) {
  T out{};
  if (at + sizeof(T) <= v.size()) std::memcpy(&out, v.data() + at, sizeof(T));
  return out;
}

struct ArchLimits {
  const char* arch;
  int threads, blocks;
  std::int64_t shared;  // per multiprocessor
};
// The compute-capability tables' per-multiprocessor limits. Every one of
// these has 64 K registers and reserves 1 KiB of shared memory per block.
constexpr ArchLimits kLimits[] = {
    {"sm_80", 2048, 32, 164 * 1024}, {"sm_86", 1536, 16, 100 * 1024},  {"sm_89", 1536, 24, 100 * 1024},
    {"sm_90", 2048, 32, 228 * 1024}, {"sm_100", 2048, 32, 228 * 1024},
};
constexpr std::int64_t kRegisters = 64 * 1024, kQuarters = 4, kRegisterUnit = 256, kReservedShared = 1024;
constexpr std::int64_t kSharedUnit = 128;

}  // namespace

std::optional<CubinResources> read_cubin_resources(std::span<const char> cubin, const std::string& entry) {
  const Elf elf(cubin);
  CubinResources r;
  const auto* info = elf.find(".nv.info." + entry);
  if (info == nullptr) return std::nullopt;
  elf.attributes(*info, [&](std::uint8_t id, std::span<const char> v) {
    if (id == kReqNtid && v.size() >= 12) {
      r.threads = std::int64_t{value_at<std::uint32_t>(v, 0)} * value_at<std::uint32_t>(v, 4) * value_at<std::uint32_t>(v, 8);
    }
  });
  const std::optional<std::uint32_t> sym = elf.symbol(entry);
  if (const auto* module = elf.find(".nv.info"); module && sym) {
    elf.attributes(*module, [&](std::uint8_t id, std::span<const char> v) {
      if (id == kRegCount && v.size() >= 8 && value_at<std::uint32_t>(v, 0) == *sym) r.registers = value_at<std::uint32_t>(v, 4);
    });
  }
  if (const auto* shared = elf.find(".nv.shared." + entry)) r.shared_bytes = static_cast<std::int64_t>(shared->size);
  if (r.threads <= 0 || r.registers <= 0) return std::nullopt;
  return r;
}

std::optional<int> blocks_per_multiprocessor(const CubinResources& r, const std::string& arch, bool ignore_shared) {
  const ArchLimits* limits = nullptr;
  for (const ArchLimits& l : kLimits) {
    if (arch == l.arch) limits = &l;
  }
  if (limits == nullptr || r.threads <= 0) return std::nullopt;
  const std::int64_t warps = (r.threads + 31) / 32;
  std::int64_t blocks = std::min<std::int64_t>(limits->blocks, limits->threads / (warps * 32));
  const std::int64_t per_warp = (r.registers * 32 + kRegisterUnit - 1) / kRegisterUnit * kRegisterUnit;
  if (per_warp > 0) blocks = std::min(blocks, (kRegisters / kQuarters / per_warp) * kQuarters / warps);
  if (!ignore_shared) {
    const std::int64_t shared = (r.shared_bytes + kSharedUnit - 1) / kSharedUnit * kSharedUnit + kReservedShared;
    blocks = std::min(blocks, limits->shared / shared);
  }
  return static_cast<int>(blocks);
}

}  // namespace tessera::cuda_tile
