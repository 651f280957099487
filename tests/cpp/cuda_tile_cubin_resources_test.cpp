// A cubin's per-kernel resources read from its ELF sections, and the blocks
// per multiprocessor they allow. The cubins here are built by hand with the
// sections tileiras writes (names, types and attribute encodings as
// cuobjdump -elf prints them for a tileiras 13.5 cubin); the occupancy
// figures are the compute-capability tables' limits worked by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tessera/backends/cuda_tile/cubin_resources.h"
#include "tessera/support/error.h"

namespace ct = tessera::cuda_tile;

namespace {

// A minimal ELF64 cubin: sections are (name, type, content or NOBITS size, link).
class CubinBuilder {
 public:
  void section(const std::string& name, std::uint32_t type, std::vector<char> content, std::uint32_t link = 0,
               std::uint64_t nobits_size = 0) {
    sections_.push_back({name, type, std::move(content), link, nobits_size});
  }
  std::vector<char> build() const {
    std::vector<char> names(1, '\0');
    std::vector<std::uint32_t> name_at;
    for (const auto& s : sections_) {
      name_at.push_back(static_cast<std::uint32_t>(names.size()));
      names.insert(names.end(), s.name.begin(), s.name.end());
      names.push_back('\0');
    }
    const std::uint32_t shstrtab_name = static_cast<std::uint32_t>(names.size());
    for (char c : std::string(".shstrtab")) names.push_back(c);
    names.push_back('\0');
    std::vector<char> out(64, '\0');
    std::vector<std::uint64_t> offsets;
    for (const auto& s : sections_) {
      offsets.push_back(out.size());
      out.insert(out.end(), s.content.begin(), s.content.end());
    }
    const std::uint64_t names_at = out.size();
    out.insert(out.end(), names.begin(), names.end());
    while (out.size() % 8) out.push_back('\0');
    const std::uint64_t shoff = out.size();
    auto header = [&](std::uint32_t name, std::uint32_t type, std::uint64_t offset, std::uint64_t size, std::uint32_t link) {
      char h[64] = {};
      std::memcpy(h, &name, 4);
      std::memcpy(h + 4, &type, 4);
      std::memcpy(h + 0x18, &offset, 8);
      std::memcpy(h + 0x20, &size, 8);
      std::memcpy(h + 0x28, &link, 4);
      out.insert(out.end(), h, h + 64);
    };
    header(0, 0, 0, 0, 0);  // the null section
    for (std::size_t i = 0; i < sections_.size(); ++i) {
      const auto& s = sections_[i];
      header(name_at[i], s.type, offsets[i], s.type == 8 ? s.nobits_size : s.content.size(), s.link);
    }
    header(shstrtab_name, 3, names_at, names.size(), 0);
    std::memcpy(out.data(), "\x7f" "ELF\x02\x01", 6);
    std::memcpy(out.data() + 0x28, &shoff, 8);
    const std::uint16_t entsize = 64, count = static_cast<std::uint16_t>(sections_.size() + 2), strndx = count - 1;
    std::memcpy(out.data() + 0x3a, &entsize, 2);
    std::memcpy(out.data() + 0x3c, &count, 2);
    std::memcpy(out.data() + 0x3e, &strndx, 2);
    return out;
  }

 private:
  struct Section {
    std::string name;
    std::uint32_t type;
    std::vector<char> content;
    std::uint32_t link;
    std::uint64_t nobits_size;
  };
  std::vector<Section> sections_;
};

void put32(std::vector<char>& v, std::uint32_t x) {
  const char* p = reinterpret_cast<const char*>(&x);
  v.insert(v.end(), p, p + 4);
}
// An EIFMT_SVAL attribute: format 4, id, 16-bit size, the 32-bit words.
void sized(std::vector<char>& v, std::uint8_t id, std::vector<std::uint32_t> words) {
  v.push_back(4);
  v.push_back(static_cast<char>(id));
  const std::uint16_t size = static_cast<std::uint16_t>(4 * words.size());
  v.push_back(static_cast<char>(size & 0xff));
  v.push_back(static_cast<char>(size >> 8));
  for (std::uint32_t w : words) put32(v, w);
}
// An EIFMT_HVAL attribute: format 3, id, a 16-bit value.
void half(std::vector<char>& v, std::uint8_t id, std::uint16_t value) {
  v.push_back(3);
  v.push_back(static_cast<char>(id));
  v.push_back(static_cast<char>(value & 0xff));
  v.push_back(static_cast<char>(value >> 8));
}

// A cubin with kernels "other" (symbol 1) and "attn" (symbol 2): 256 threads,
// 128 registers, `shared` bytes of static shared memory for attn.
std::vector<char> cubin(std::uint64_t shared, bool with_reqntid = true) {
  CubinBuilder b;
  const std::string strings = std::string("\0other\0attn\0", 12);
  b.section(".strtab", 3, std::vector<char>(strings.begin(), strings.end()));
  std::vector<char> symtab(24 * 3, '\0');
  const std::uint32_t other = 1, attn = 7;
  std::memcpy(symtab.data() + 24, &other, 4);
  std::memcpy(symtab.data() + 48, &attn, 4);
  b.section(".symtab", 2, symtab, /*link=*/1);  // .strtab is section 1
  std::vector<char> info;
  sized(info, 0x2f, {1, 40});   // REGCOUNT of "other"
  sized(info, 0x11, {2, 0});    // FRAME_SIZE, skipped
  sized(info, 0x2f, {2, 128});  // REGCOUNT of "attn"
  b.section(".nv.info", 0x70000000, info, 3);
  std::vector<char> fn;
  half(fn, 0x1b, 128);          // an HVAL attribute before it
  sized(fn, 0x45, {0, 0, 0});   // KPARAM_INFO, skipped
  if (with_reqntid) sized(fn, 0x10, {256, 1, 1});
  b.section(".nv.info.attn", 0x70000000, fn, 3);
  b.section(".nv.shared.attn", 8, {}, 0, shared);
  return b.build();
}

}  // namespace

TEST(CubinResources, ReadsThreadsRegistersAndSharedMemoryOfTheEntry) {
  const std::vector<char> bin = cubin(115816);
  const auto r = ct::read_cubin_resources(bin, "attn");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->threads, 256);
  EXPECT_EQ(r->registers, 128);  // its own REGCOUNT, not the other kernel's 40
  EXPECT_EQ(r->shared_bytes, 115816);
}

TEST(CubinResources, UnstatedBlockOrEntryGivesNothing) {
  EXPECT_FALSE(ct::read_cubin_resources(cubin(0, /*with_reqntid=*/false), "attn").has_value());
  EXPECT_FALSE(ct::read_cubin_resources(cubin(0), "missing").has_value());
}

TEST(CubinResources, MalformedBytesAreACompileError) {
  std::vector<char> bin = cubin(1024);
  const std::vector<char> truncated(bin.begin(), bin.begin() + static_cast<std::ptrdiff_t>(bin.size() - 40));
  EXPECT_THROW(ct::read_cubin_resources(truncated, "attn"), tessera::Error);
  const std::vector<char> text = {'n', 'o', 't', ' ', 'e', 'l', 'f'};
  try {
    ct::read_cubin_resources(text, "attn");
    FAIL() << "expected a CompileError";
  } catch (const tessera::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a well-formed 64-bit ELF"), std::string::npos) << e.what();
  }
}

TEST(CubinResources, BlocksPerMultiprocessorFollowTheArchitectureLimits) {
  // sm_90: 228 KiB of shared memory per SM, 1 KiB reserved per block.
  // 115816 bytes (rounded to 115840) + 1024, twice, is 233728 > 233472.
  EXPECT_EQ(ct::blocks_per_multiprocessor({256, 128, 115816}, "sm_90"), 1);
  EXPECT_EQ(ct::blocks_per_multiprocessor({256, 128, 115816}, "sm_90", /*ignore_shared=*/true), 2);
  EXPECT_EQ(ct::blocks_per_multiprocessor({256, 128, 99408}, "sm_90"), 2);
  // Registers: 214 per thread is 6912 per warp, 2 warps per quarter of the
  // SM's 64 K, 8 warps: two blocks of 4.
  EXPECT_EQ(ct::blocks_per_multiprocessor({128, 214, 83056}, "sm_90"), 2);
  EXPECT_EQ(ct::blocks_per_multiprocessor({128, 255, 0}, "sm_90"), 2);
  // Threads: 2048 per SM on sm_90 and sm_80, 1536 on sm_86.
  EXPECT_EQ(ct::blocks_per_multiprocessor({128, 32, 0}, "sm_90"), 16);
  EXPECT_EQ(ct::blocks_per_multiprocessor({256, 32, 0}, "sm_86"), 6);
  // Blocks: at most 16 on sm_86.
  EXPECT_EQ(ct::blocks_per_multiprocessor({32, 16, 0}, "sm_86"), 16);
  // sm_80: 164 KiB per SM.
  EXPECT_EQ(ct::blocks_per_multiprocessor({128, 64, 80 * 1024}, "sm_80"), 2);
  EXPECT_EQ(ct::blocks_per_multiprocessor({128, 64, 82 * 1024}, "sm_80"), 1);
  EXPECT_FALSE(ct::blocks_per_multiprocessor({128, 64, 0}, "sm_75").has_value());
}
