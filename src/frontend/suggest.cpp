// "Did you mean" suggestions for kernel-language diagnostics (suggest.h).
#include "frontend/suggest.h"

#include "tessera/support/error.h"

namespace tessera::frontend {

std::string suggest(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string best = closest_match(name, candidates);
  if (!best.empty()) return best;
  for (std::string_view c : candidates) {
    if (c.size() != name.size() || c == name) continue;
    std::size_t i = 0;
    while (i < c.size() && c[i] == name[i]) ++i;
    if (i + 1 < c.size() && c[i] == name[i + 1] && c[i + 1] == name[i] && c.substr(i + 2) == name.substr(i + 2))
      return std::string(c);
  }
  return {};
}

std::string did_you_mean(const std::string& hint) {
  return hint.empty() ? "" : "; did you mean '" + hint + "'?";
}

}  // namespace tessera::frontend
