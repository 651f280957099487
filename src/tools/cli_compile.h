// `tessera compile FILE.tsr --emit tile|target [--target cpu|cuda] [-D NAME=VALUE]... [-o OUT]`:
// the kernel compile command for every level (tile via the front end's command).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera {

// args = {"compile", FILE, options...}. Returns 0, 1 (a Tessera error,
// printed to err) or 2 (a usage error).
int run_kernel_compile_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera
