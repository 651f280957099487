// `tessera compile` for every level: --emit tile goes to the front end's
// command (frontend/compile_command.cpp, the Tile IR as lowered); --emit
// target prints the C++ the CPU backend generates for each kernel of the
// file, specialized the way a launch without arguments would be (autotune
// names at their first candidate) plus the -D constants naming one of its
// shape symbols or autotune names, after the Tile IR passes (nothing is
// compiled); with --target cuda, the CUDA C++ the CUDA backend generates
// (no GPU needed). Kernels have no graph or schedule level: that says so.
#include "tools/cli_compile.h"

#include <algorithm>
#include <fstream>
#include <ostream>

#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/frontend/compile_command.h"
#include "tessera/runtime/kernel.h"
#include "tessera/support/error.h"

namespace tessera {

namespace {

constexpr const char* kCompileUsage =
    "usage: tessera compile FILE.tsr --emit tile|target [--target cpu|cuda] [-D NAME=VALUE]... [-o OUT]\n";

struct CompileArgs {
  std::string file;
  std::string emit;
  std::string target = "cpu";
  std::string output;
  KernelConstants defines;
};

// args[0] is "compile". Returns an empty string on success, else the usage error.
std::string parse_args(const std::vector<std::string>& args, CompileArgs& out) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& into) -> std::string {
      if (i + 1 >= args.size()) return a + " needs a value";
      into = args[++i];
      return {};
    };
    std::string problem;
    if (a == "--emit") {
      problem = value(out.emit);
    } else if (a == "--target") {
      problem = value(out.target);
    } else if (a == "-o") {
      problem = value(out.output);
    } else if (a == "-D") {
      std::string def;
      problem = value(def);
      const std::size_t eq = def.find('=');
      if (problem.empty() && (eq == std::string::npos || eq == 0)) return "-D takes NAME=INTEGER, got '" + def + "'";
      if (problem.empty()) {
        try {
          std::size_t used = 0;
          const std::string text = def.substr(eq + 1);
          const long long v = std::stoll(text, &used);
          if (used != text.size()) throw std::invalid_argument(text);
          out.defines[def.substr(0, eq)] = v;
        } catch (const std::exception&) {
          return "-D takes NAME=INTEGER, got '" + def + "'";
        }
      }
    } else if (!a.empty() && a[0] == '-') {
      return "unknown option '" + a + "'";
    } else if (out.file.empty()) {
      out.file = a;
    } else {
      return "one input file, got '" + out.file + "' and '" + a + "'";
    }
    if (!problem.empty()) return problem;
  }
  if (out.file.empty() || out.emit.empty()) return "expected a file and --emit";
  return {};
}

// --emit target: the CPU (or CUDA) backend's C++ for every kernel of the file.
int emit_target(const CompileArgs& a, std::ostream& out, std::ostream& err) {
  try {
    std::vector<Kernel> kernels = load_kernels(a.file);
    KernelConstants unused = a.defines;
    std::string text;
    for (const Kernel& k : kernels) {
      // Each kernel takes the constants it knows (a lone kernel takes all, so
      // a misspelt name is reported by the front end with a suggestion).
      KernelConstants mine;
      for (const auto& [name, value] : a.defines) {
        bool has = std::find(k.decl().shape_symbols.begin(), k.decl().shape_symbols.end(), name) !=
                   k.decl().shape_symbols.end();
        for (const auto& [n, values] : k.decl().autotune_space) has = has || n == name;
        if (has || kernels.size() == 1) {
          mine[name] = value;
          unused.erase(name);
        }
      }
      std::shared_ptr<KernelSpecialization> spec = k.jit(mine).specialize();
      if (kernels.size() > 1) text += "// ===== kernel " + k.name() + " =====\n";
      text += a.target == "cuda" ? cuda::emit_kernel_source(spec->func()) : spec->target_source();
    }
    if (!unused.empty()) {
      raise(ErrorCode::ArgumentInvalid, "-D " + unused.begin()->first + ": no kernel in '" + a.file +
                                            "' has a shape symbol or autotune name called that");
    }
    if (a.output.empty()) {
      out << text;
    } else {
      std::ofstream file(a.output, std::ios::binary | std::ios::trunc);
      file << text;
      file.close();
      if (!file) raise(ErrorCode::ArgumentInvalid, "cannot write '" + a.output + "'");
    }
  } catch (const Error& error) {
    err << error.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_kernel_compile_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CompileArgs a;
  if (std::string problem = parse_args(args, a); !problem.empty()) {
    err << "tessera compile: " << problem << "\n" << kCompileUsage;
    return 2;
  }
  if (a.target != "cpu" && a.target != "cuda") {
    err << "tessera compile: --target is cpu or cuda, got '" << a.target << "'\n";
    return 2;
  }
  if (a.emit == "graph" || a.emit == "schedule") {
    err << "tessera compile: --emit " << a.emit << ": a .tsr file holds tile-level kernels, which have no " << a.emit
        << " IR (that level is built for @tessera.jit functions); use --emit tile or --emit target\n";
    return 2;
  }
  if (a.emit == "tile") return frontend::run_compile_command(args, out, err);
  if (a.emit != "target") {
    err << "tessera compile: unknown level '" << a.emit << "' for --emit; expected tile or target\n";
    return 2;
  }
  return emit_target(a, out, err);
}

}  // namespace tessera
