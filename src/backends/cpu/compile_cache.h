// The CPU backend's on-disk compile cache (ARCHITECTURE.md decision 7).
//
// Layout under the cache root ($TESSERA_CACHE_DIR, default ~/.cache/tessera):
//   cpu/<key>.so        a compiled kernel
//   cpu/<key>.so.meta   its sidecar: "tessera-cpu-cache 1", size, sha256
//   cpu/<key>.cpp       the source it was compiled from (for inspection)
//   cpu/include-<hash>/ the host tile headers generated code includes
// The key is the sha256 of everything that determines the object: source,
// flags, compiler path and version, header library and ABI version. Files
// are written to a temporary name and renamed into place, so a reader sees
// a whole file or none; an entry whose object does not match its sidecar's
// size and hash (a truncated or corrupted file, a crash between the two
// renames) is treated as absent and rebuilt.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::cpu::detail {

std::string sha256_hex(std::string_view data);

// The cache root: `requested`, else $TESSERA_CACHE_DIR, else ~/.cache/tessera.
std::string resolve_cache_root(const std::string& requested);

// Creates `dir` and its parents; raises CompileError when that fails.
void make_directories(const std::string& dir);

// Writes `content` to `path` through a temporary file and rename.
void write_file_atomic(const std::string& path, std::string_view content);

// A cached binary beside its "<path>.sha256" sidecar (the GPU backends'
// cubins): the bytes when both files exist, the binary is not empty and the
// digest matches; nullopt otherwise (absent, torn or corrupt: recompile).
std::optional<std::string> read_checked_blob(const std::string& path);
// Writes the binary and its sidecar, each atomically.
void write_checked_blob(const std::string& path, std::string_view bytes);

// The read-only directory of kernels compiled when Tessera was built
// (tessera-prebuild): $TESSERA_PREBUILT_DIR, else prebuilt/ beside
// libtessera. Same layout and keys as the cache.
std::string prebuilt_root();

class CompileCache {
 public:
  // `create`: make the directory (the writable cache); a read-only one
  // (the prebuilt kernels) may be absent, and then has no valid entry.
  explicit CompileCache(const std::string& root, bool create = true);
  const std::string& dir() const { return dir_; }
  std::string object_path(const std::string& key) const { return dir_ + "/" + key + ".so"; }
  std::string source_path(const std::string& key) const { return dir_ + "/" + key + ".cpp"; }
  // A unique temporary path in the cache directory for building `key`.
  std::string temp_object_path(const std::string& key) const;
  // True when the entry exists and the object matches its sidecar.
  bool valid(const std::string& key) const;
  // Moves the finished object at `temp_object` into place and writes its sidecar.
  void publish(const std::string& key, const std::string& temp_object) const;
  // Writes the header library under include-<hash>/ (once per process and
  // directory) and returns that include directory.
  std::string header_dir() const;
  // sha256 over the embedded header library (part of every key).
  static const std::string& header_hash();

 private:
  std::string dir_;
};

}  // namespace tessera::cpu::detail
