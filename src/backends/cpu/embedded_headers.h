// The host tile header library, embedded in libtessera at build time
// (cpu.cmake generates the definition from src/backends/cpu/runtime/*.h).
#pragma once

#include <string_view>
#include <vector>

namespace tessera::cpu::detail {

struct EmbeddedHeader {
  std::string_view path;  // relative include path, e.g. "tessera_cpu/tile.h"
  std::string_view text;
};

const std::vector<EmbeddedHeader>& embedded_headers();

}  // namespace tessera::cpu::detail
