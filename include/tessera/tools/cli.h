// The `tessera` command line. It lives in the library so that the installed
// C++ executable and the Python console script run the same code.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera {

// Runs `tessera <args...>` (args excludes the program name). Returns the exit
// status: 0 success, 1 a Tessera error (printed to err), 2 a usage error.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera
