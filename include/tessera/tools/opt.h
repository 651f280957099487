// The `tessera-opt` command line: parse IR text, run named passes, print the
// result. It lives in the library so tests can run it in-process.
//
//   tessera-opt FILE|- [--pass NAME]... [--print-ir-after-all] [--timing]
//               [--generic] [--split-input-file] [-o OUT] [--list-passes] [--help]
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera {

// Runs `tessera-opt <args...>` (args excludes the program name); `in` is read
// when the input is "-". Returns the exit status: 0 success, 1 a Tessera
// error in the input (printed to err with file:line:col and a caret), 2 a
// usage error (unknown flag or pass).
int run_opt(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace tessera
