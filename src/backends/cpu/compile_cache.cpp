// The CPU backend's on-disk compile cache (see compile_cache.h).
#include "backends/cpu/compile_cache.h"

#include "backends/cpu/compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "backends/cpu/embedded_headers.h"
#include "tessera/support/error.h"

namespace tessera::cpu::detail {
namespace {

// SHA-256 (FIPS 180-4): the cache key and the sidecar's integrity hash.
class Sha256 {
 public:
  void update(std::string_view data) {
    for (unsigned char c : data) {
      block_[fill_++] = c;
      ++length_;
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
  }
  std::string hex() {
    const std::uint64_t bits = length_ * 8;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < 64) block_[fill_++] = 0;
      compress();
      fill_ = 0;
    }
    while (fill_ < 56) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<unsigned char>(bits >> (8 * i));
    compress();
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : h_)
      for (int i = 7; i >= 0; --i) out += digits[(w >> (4 * i)) & 0xF];
    return out;
  }

 private:
  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void compress() {
    static constexpr std::uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{block_[4 * i]} << 24) | (std::uint32_t{block_[4 * i + 1]} << 16) |
             (std::uint32_t{block_[4 * i + 2]} << 8) | std::uint32_t{block_[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }

  std::array<std::uint32_t, 8> h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t length_ = 0;
};

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

std::string unique_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  return std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

std::string sidecar_text(std::size_t size, const std::string& hash) {
  return "tessera-cpu-cache 1\nsize " + std::to_string(size) + "\nsha256 " + hash + "\n";
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

std::string resolve_cache_root(const std::string& requested) {
  if (!requested.empty()) return requested;
  if (const char* env = std::getenv("TESSERA_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/tessera";
  }
  raise(ErrorCode::Compile, "cannot place the kernel cache: set TESSERA_CACHE_DIR (HOME is not set)");
}

void make_directories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      raise(ErrorCode::Compile, "cannot create cache directory '" + partial + "': " + std::strerror(errno) +
                                    " (set TESSERA_CACHE_DIR to a writable directory)");
    }
    partial += "/";
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp." + unique_suffix();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      raise(ErrorCode::Compile,
            "cannot write cache file '" + tmp + "' (set TESSERA_CACHE_DIR to a writable directory)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    raise(ErrorCode::Compile, "cannot move '" + tmp + "' to '" + path + "': " + why);
  }
}

std::optional<std::string> read_checked_blob(const std::string& path) {
  std::string bin, sum;
  if (!read_file(path, bin) || !read_file(path + ".sha256", sum) || bin.empty() || sum != sha256_hex(bin)) {
    return std::nullopt;
  }
  return bin;
}

void write_checked_blob(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, bytes);
  write_file_atomic(path + ".sha256", sha256_hex(bytes));
}

CompileCache::CompileCache(const std::string& root, bool create) : dir_(root + "/cpu") {
  if (create) make_directories(dir_);
}

std::string prebuilt_root() {
  if (const char* env = std::getenv("TESSERA_PREBUILT_DIR"); env != nullptr && *env != '\0') return env;
  const std::string lib = libtessera_path();
  return lib.substr(0, lib.find_last_of('/') + 1) + "prebuilt";
}

std::string CompileCache::temp_object_path(const std::string& key) const {
  return dir_ + "/" + key + ".so.tmp." + unique_suffix();
}

bool CompileCache::valid(const std::string& key) const {
  std::string meta, object;
  if (!read_file(object_path(key) + ".meta", meta) || !read_file(object_path(key), object)) return false;
  return meta == sidecar_text(object.size(), sha256_hex(object));
}

void CompileCache::publish(const std::string& key, const std::string& temp_object) const {
  std::string object;
  if (!read_file(temp_object, object) || object.empty()) {
    raise(ErrorCode::Compile, "the host compiler produced no object at '" + temp_object + "'");
  }
  // Object first, sidecar second: a crash in between leaves an entry without
  // a matching sidecar, which valid() rejects.
  if (std::rename(temp_object.c_str(), object_path(key).c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp_object.c_str());
    raise(ErrorCode::Compile, "cannot move '" + temp_object + "' into the cache: " + why);
  }
  write_file_atomic(object_path(key) + ".meta", sidecar_text(object.size(), sha256_hex(object)));
}

const std::string& CompileCache::header_hash() {
  static const std::string hash = [] {
    Sha256 h;
    for (const EmbeddedHeader& e : embedded_headers()) {
      h.update(e.path);
      h.update(std::string_view("\0", 1));
      h.update(e.text);
      h.update(std::string_view("\0", 1));
    }
    return h.hex();
  }();
  return hash;
}

std::string CompileCache::header_dir() const {
  const std::string include = dir_ + "/include-" + header_hash().substr(0, 16);
  static std::mutex m;
  static std::set<std::string> written;
  std::lock_guard<std::mutex> lock(m);
  if (written.count(include) != 0) return include;
  for (const EmbeddedHeader& e : embedded_headers()) {
    const std::string path = include + "/" + std::string(e.path);
    std::string existing;
    if (read_file(path, existing) && existing == e.text) continue;
    make_directories(path.substr(0, path.rfind('/')));
    write_file_atomic(path, e.text);
  }
  written.insert(include);
  return include;
}

}  // namespace tessera::cpu::detail
