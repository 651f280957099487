// `tessera compile FILE.tsr --emit tile`: the command-line front of the
// kernel language (the `tessera` CLI dispatches to it).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::frontend {

// args = {"compile", FILE, options...}. Options: --emit LEVEL (tile), --target
// cpu|cuda, -D NAME=VALUE (specialize a shape symbol or compile-time name;
// repeatable), -o FILE. Returns 0, 1 on a Tessera error (printed to err) or 2
// on a usage error.
int run_compile_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::frontend
