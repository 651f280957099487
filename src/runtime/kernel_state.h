// The state a Kernel and the kernels jit() derives from it share
// (kernel.cpp, autotune.cpp): the declaration, its source, and the caches of
// specializations and autotune results.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tessera/runtime/kernel.h"

namespace tessera::detail {

struct KernelState {
  frontend::KernelDecl decl;
  std::string source;
  std::string source_hash;  // sha256 of `source` (hex)
  int column_offset = 0;

  std::mutex mutex;  // guards everything below
  // Specializations by constants_text() of their complete constants.
  std::map<std::string, std::shared_ptr<KernelSpecialization>> specializations;
  // Autotune winners by autotune_key().
  std::map<std::string, KernelConstants> autotune_results;
  // The specialization last launched, by constants_text() of the launching
  // kernel's fixed constants (what inspect_ir shows).
  std::map<std::string, std::shared_ptr<KernelSpecialization>> last_launched;
};

// "BM=64 BN=32" (names in order).
std::string constants_text(const KernelConstants& constants);

// The number of groups `grid` asks for with `spec`'s constants.
std::int64_t resolve_grid(const Grid& grid, const KernelSpecialization& spec, const std::string& kernel);

// Re-raises `error` with its column moved right by `column_offset` when it
// points into `file` (the indentation Python removed before parsing).
// Call only from inside the handler that caught `error`.
[[noreturn]] void rethrow_located(const Error& error, const std::string& file, int column_offset);

}  // namespace tessera::detail
