// Helpers shared by the kernel-language front-end tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tessera/frontend/kernel_language.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/text.h"

namespace tessera::frontend::testing {

inline std::string conformance_path(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/conformance/" + name;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses the source expecting a tessera::Error; fails the test otherwise.
inline Error parse_error(const std::string& source, SourceDialect dialect = SourceDialect::tsr) {
  try {
    parse_kernels(source, "k.tsr", 1, dialect);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error for:\n" << source;
  return Error(ErrorCode::Internal, "no error");
}

// The IR text without accumulation suffixes, so that expectations do not
// depend on whether the printer spells out a dtype's default accumulation.
inline std::string without_accum(const std::string& ir) {
  return std::regex_replace(ir, std::regex(" @accum\\([a-z0-9_]+\\)"), "");
}

inline std::string lower_to_text(const std::string& source, const Constants& constants = {},
                                 SourceDialect dialect = SourceDialect::tsr) {
  std::vector<KernelDecl> kernels = parse_kernels(source, "k.tsr", 1, dialect);
  ir::Module module;
  for (const KernelDecl& k : kernels) lower_kernel(module, k, constants);
  return without_accum(ir::print_module(module));
}

}  // namespace tessera::frontend::testing
