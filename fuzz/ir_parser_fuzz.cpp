// libFuzzer target: the IR text parser and verifier, every level at once
// (Graph, Schedule and Tile IR ops share one parser and one registry).
//
// Each input is parsed as a module. Parsing and verifying either succeed or
// raise a tessera::Error of a user-facing kind; anything else (a crash, a
// sanitizer report, a hang, an internal error) is a bug. A module that
// verifies must round-trip: its printed text parses again, verifies, and
// prints to the same text, in the custom and in the generic form.
// Build and run: scripts/fuzz.sh SECONDS ir.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s\n%s\n", what, detail.c_str());
  std::abort();
}

void check_round_trip(const std::string& printed, bool generic) {
  try {
    tessera::ir::Module again = tessera::ir::parse_module(printed, "printed.tir");
    tessera::ir::verify(again);
    const std::string twice = tessera::ir::print_module(again, tessera::ir::PrintOptions{.generic = generic});
    if (twice != printed) fail("printing is not stable across a round trip", printed + "\n---- became ----\n" + twice);
  } catch (const tessera::Error& e) {
    fail("the printed form of a verified module does not parse or verify", printed + "\n" + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tessera::ir::Module module;
  try {
    module = tessera::ir::parse_module(text, "fuzz.tir");
    tessera::ir::verify(module);
  } catch (const tessera::Error& e) {
    if (e.kind() == tessera::ErrorKind::Internal) fail("internal error", e.what());
    if (e.where().valid() && e.where().line > static_cast<int>(size) + 2) fail("error location out of range", e.what());
    return 0;
  }
  for (bool generic : {false, true}) {
    check_round_trip(tessera::ir::print_module(module, tessera::ir::PrintOptions{.generic = generic}), generic);
  }
  return 0;
}
