// "Did you mean" suggestions for the kernel language's diagnostics (private
// to src/frontend/): the parser's decorator keywords and the checker's names,
// keywords and built-ins share one wording.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::frontend {

// closest_match, plus one swap of adjacent letters ("alpah" -> "alpha",
// "stpe" -> "step"), the most common typo in short names. Empty when nothing
// is close.
std::string suggest(std::string_view name, const std::vector<std::string_view>& candidates);

// "; did you mean 'HINT'?", or nothing when `hint` is empty.
std::string did_you_mean(const std::string& hint);

}  // namespace tessera::frontend
