// `tessera compile` for every level: --emit tile goes to the front end's
// command (frontend/compile_command.cpp, the Tile IR as lowered); --emit
// target prints the C++ the CPU backend generates for each kernel of the
// file, specialized the way a launch without arguments would be (autotune
// names at their first candidate) plus the -D constants naming one of its
// shape symbols or autotune names, after the Tile IR passes (nothing is
// compiled); with --target cuda, the CUDA C++ the CUDA backend generates
// (no GPU needed); with --target cuda_tile, the CUDA Tile IR text form of
// the module the cuda_tile target writes (no GPU or tileiras needed).
// Kernels have no graph or schedule level: that says so.
//
// A Graph IR file (.tir, the IR text form) takes the Schedule IR path of
// @jit functions instead: --emit schedule prints each function's Schedule
// IR (partitioned, variants chosen, tiled, buffers planned), --emit tile the
// Tile IR kernel each template makes of it, and --emit target those kernels'
// CPU (or CUDA) C++. Nothing is compiled. A Schedule IR file (what --emit
// schedule prints) goes on from its kernels as written, knobs included, so
// a knob can be edited in the text and its kernels printed.
#include "tools/cli_compile.h"

#include <algorithm>
#include <fstream>
#include <ostream>
#include <sstream>

#include "tessera/backends/cpu/cpu_backend.h"
#include "tessera/backends/cuda/cuda_backend.h"
#include "tessera/backends/cuda_tile/lower.h"
#include "tessera/backends/cuda_tile/runtime.h"
#include "tessera/frontend/compile_command.h"
#include "tessera/ir/text.h"
#include "tessera/schedule/passes.h"
#include "tessera/ir/verifier.h"
#include "tessera/runtime/kernel.h"
#include "tessera/schedule/executable.h"
#include "tessera/schedule/lower_to_tile.h"
#include "tessera/support/error.h"

namespace tessera {

namespace {

constexpr const char* kCompileUsage =
    "usage: tessera compile FILE.tsr --emit tile|target [--target cpu|cuda|cuda_tile] [-D NAME=VALUE]... [-o OUT]\n"
    "       tessera compile FILE.tir --emit schedule|tile|target [--target cpu|cuda|cuda_tile] [-o OUT]\n"
    "       --arch sm_XY: with --target cuda, the architecture the CUDA C++ is written for (sm_90a: wgmma);\n"
    "                     with --target cuda_tile, also assemble each kernel with tileiras (no GPU needed)\n";

struct CompileArgs {
  std::string file;
  std::string emit;
  std::string target = "cpu";
  std::string output;
  std::string arch;  // cuda: the architecture to write for; cuda_tile: assemble with tileiras for it
  KernelConstants defines;
};

cuda::KernelCompileOptions cuda_options(const CompileArgs& a) {
  cuda::KernelCompileOptions options;
  options.arch = a.arch;
  return options;
}

// A kernel's CUDA Tile IR text; with --arch, tileiras assembles it too (a
// CompileError with its output if it rejects the module).
std::string cuda_tile_text(const ir::Operation& kernel, const CompileArgs& a) {
  if (a.arch.empty()) return cuda_tile::lower_kernel(kernel).text;
  // As a launch compiles it first: assuming 16-byte aligned buffers and rows.
  const cuda_tile::Cubin c = cuda_tile::build_cubin(kernel, a.arch, {}, /*use_cache=*/false, /*assume_aligned=*/true);
  return c.text + "// tileiras " + c.tileiras_version + " " + a.arch + ": assembled, " + std::to_string(c.bytes.size()) +
         " bytes of cubin\n";
}

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
    } else if (a == "--arch") {
      problem = value(out.arch);
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
      text += a.target == "cuda"        ? cuda::emit_kernel_source(spec->func(), cuda_options(a))
              : a.target == "cuda_tile" ? cuda_tile_text(spec->tile_target_func(), a)
                                        : spec->target_source();
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

void write_output(const CompileArgs& a, const std::string& text, std::ostream& out) {
  if (a.output.empty()) {
    out << text;
    return;
  }
  std::ofstream file(a.output, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) raise(ErrorCode::ArgumentInvalid, "cannot write '" + a.output + "'");
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A Graph IR file through the Schedule IR path (see the top of this file).
int emit_graph_file(const CompileArgs& a, std::ostream& out, std::ostream& err) {
  if (a.emit != "schedule" && a.emit != "tile" && a.emit != "target") {
    err << "tessera compile: unknown level '" << a.emit << "' for --emit on a Graph IR file; expected schedule, tile "
        << "or target\n";
    return 2;
  }
  if (!a.defines.empty()) {
    err << "tessera compile: -D applies to .tsr kernels; a Graph IR file's shapes are in its types\n";
    return 2;
  }
  try {
    std::ifstream stream(a.file, std::ios::binary);
    if (!stream) raise(ErrorCode::ArgumentInvalid, "cannot open input file '" + a.file + "'");
    std::ostringstream text;
    text << stream.rdbuf();
    const ir::Module module = ir::parse_module(text.str(), a.file);
    ir::verify(module);
    std::string result;
    for (const auto& f : module.functions()) {
      const std::string& name = ir::function_name(*f);
      // Schedule IR (what --emit schedule prints, its knobs perhaps edited)
      // compiles as written.
      bool schedule_input = false;
      for (const auto& op : ir::function_body(*f).ops()) schedule_input = schedule_input || op->name() == "schedule.kernel";
      // As a GPU run schedules it (CUDA executables split fp32 products).
      ir::Module scheduled =
          schedule_input ? ir::parse_module(text.str(), a.file) : schedule::schedule_module(module, name, a.target != "cpu");
      // The knobs @jit sets for the target (GEMM tiles, lanes per row), so
      // the printed kernels are the ones a GPU run compiles.
      if (!schedule_input) schedule::set_target_knobs(*scheduled.lookup(name), a.target != "cpu");
      if (a.target == "cuda_tile") {
        // Every kernel as the "tile_ir" variant compiles it, with that
        // target's knobs (tensor-core GEMMs: 128x128x64 tiles, one K loop).
        schedule::use_tile_ir(*scheduled.lookup(name));
      }
      if (a.emit == "schedule") {
        result += ir::print_module(scheduled);
        continue;
      }
      ir::Module tile;
      std::vector<ir::Operation*> kernels;
      for (const auto& op : ir::function_body(*scheduled.lookup(name)).ops()) {
        if (op->name() != "schedule.kernel") continue;
        // A kernel no template covers is an error naming its op (as for
        // @jit), not a kernel left out of the output.
        if (op->attrs().get_string("variant") == "none") schedule::lower_kernel(*op, tile, name);
        const std::string variant = op->attrs().get_string("variant");
        if (variant != "tile" && variant != "tile_ir") continue;
        kernels.push_back(schedule::lower_kernel(*op, tile, name + "_" + op->attrs().get_string("name")).func);
      }
      if (a.emit == "tile") {
        result += ir::print_module(tile);
        continue;
      }
      // The kernels as an executable compiles them: its operands are
      // contiguous.
      cuda::KernelCompileOptions cuda_executable = cuda_options(a);
      cuda_executable.contiguous_buffers = true;
      cpu::CompileOptions cpu_executable;
      cpu_executable.contiguous_buffers = true;
      for (const ir::Operation* k : kernels) {
        result += "// ===== kernel " + ir::function_name(*k) + " =====\n";
        result += a.target == "cuda"        ? cuda::emit_kernel_source(*k, cuda_executable)
                  : a.target == "cuda_tile" ? cuda_tile_text(*k, a)
                                            : cpu::emit_kernel_source(*k, cpu_executable);
      }
    }
    write_output(a, result, out);
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
  if (a.target != "cpu" && a.target != "cuda" && a.target != "cuda_tile") {
    err << "tessera compile: --target is cpu, cuda or cuda_tile, got '" << a.target << "'\n";
    return 2;
  }
  if (!a.arch.empty() && a.target == "cpu") {
    err << "tessera compile: --arch applies to --target cuda and cuda_tile\n";
    return 2;
  }
  if (ends_with(a.file, ".tir")) return emit_graph_file(a, out, err);
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
