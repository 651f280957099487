// `tessera compile`: reads a .tsr file, checks and lowers every kernel for
// the given specialization, and prints the requested IR level.
#include "tessera/frontend/compile_command.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <ostream>
#include <sstream>

#include "tessera/frontend/kernel_language.h"
#include "tessera/ir/ir.h"
#include "tessera/ir/text.h"

namespace tessera::frontend {

namespace {
constexpr const char* kUsage =
    "usage: tessera compile FILE.tsr --emit tile [--target cpu|cuda] [-D NAME=VALUE]... [-o OUT]\n";
}

int run_compile_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string file, emit, target = "cpu", output;
  Constants constants;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* what) -> const std::string* {
      if (i + 1 >= args.size()) {
        err << "tessera compile: " << a << " needs " << what << "\n" << kUsage;
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--emit") {
      const std::string* v = value("a level");
      if (!v) return 2;
      emit = *v;
    } else if (a == "--target") {
      const std::string* v = value("cpu or cuda");
      if (!v) return 2;
      target = *v;
    } else if (a == "-o") {
      const std::string* v = value("a file name");
      if (!v) return 2;
      output = *v;
    } else if (a == "-D") {
      const std::string* v = value("NAME=VALUE");
      if (!v) return 2;
      std::size_t eq = v->find('=');
      std::int64_t n = 0;
      const char* end = v->data() + v->size();
      if (eq == std::string::npos || eq == 0 || std::from_chars(v->data() + eq + 1, end, n).ptr != end ||
          eq + 1 == v->size()) {
        err << "tessera compile: -D takes NAME=INTEGER, got '" << *v << "'\n";
        return 2;
      }
      constants[v->substr(0, eq)] = n;
    } else if (!a.empty() && a[0] == '-') {
      err << "tessera compile: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      err << "tessera compile: one input file, got '" << file << "' and '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if (file.empty() || emit.empty()) {
    err << "tessera compile: expected a file and --emit\n" << kUsage;
    return 2;
  }
  if (target != "cpu" && target != "cuda") {
    err << "tessera compile: --target is cpu or cuda, got '" << target << "'\n";
    return 2;
  }
  if (emit != "tile") {
    err << "tessera compile: --emit " << emit << " is not available for kernel files; this command emits 'tile' "
        << "(the Tile IR)\n";
    return 2;
  }
  try {
    std::ifstream in(file);
    if (!in) raise(ErrorCode::ArgumentInvalid, "cannot read '" + file + "'");
    std::stringstream text;
    text << in.rdbuf();
    std::vector<KernelDecl> kernels = parse_kernels(text.str(), file);
    ir::Module module;
    for (const KernelDecl& k : kernels) {
      // Each kernel takes only the constants it knows.
      Constants own;
      for (const auto& [name, v] : constants) {
        bool known = std::find(k.shape_symbols.begin(), k.shape_symbols.end(), name) != k.shape_symbols.end();
        for (const auto& [n, values] : k.autotune_space) known = known || n == name;
        if (known || kernels.size() == 1) own[name] = v;
      }
      lower_kernel(module, k, own);
    }
    std::string printed = ir::print_module(module);
    if (output.empty()) {
      out << printed;
    } else {
      std::ofstream o(output);
      if (!(o << printed)) raise(ErrorCode::ArgumentInvalid, "cannot write '" + output + "'");
    }
  } catch (const Error& error) {
    err << error.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tessera::frontend
