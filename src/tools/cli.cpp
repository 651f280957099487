// `tessera` subcommands: info, version, dtypes, policy.
#include "tessera/tools/cli.h"

#include <iomanip>
#include <ostream>

#include "tessera/frontend/compile_command.h"
#include "tessera/numerics/dtype.h"
#include "tessera/numerics/policy.h"
#include "tessera/runtime/system_info.h"
#include "tessera/support/error.h"
#include "tools/cli_compile.h"

namespace tessera {
namespace {

constexpr const char* kUsage =
    "usage: tessera <command> [args]\n"
    "commands:\n"
    "  info            version, build options, backends found, compile cache\n"
    "  version         the version number\n"
    "  dtypes          every storage dtype with its bit layout and range\n"
    "  policy TEXT     parse a dtype or numerics policy and print its canonical form\n"
    "  compile FILE.tsr --emit tile|target [--target cpu] [-D NAME=VALUE]... [-o OUT]\n"
    "                  check a kernel file and print its Tile IR or generated CPU code\n";

void print_dtypes(std::ostream& out) {
  out << std::left << std::setw(11) << "dtype" << std::setw(6) << "bits" << std::setw(10) << "layout" << std::setw(6)
      << "bias" << std::setw(12) << "specials"
      << "max\n";
  for (DType dtype : all_dtypes()) {
    const DTypeInfo& entry = info(dtype);
    out << std::setw(11) << entry.name << std::setw(6) << entry.bits;
    if (is_complex(dtype)) {
      const FloatFormat& f = info(complex_part(dtype)).format;
      out << std::setw(10) << ("2x" + std::string(name(complex_part(dtype)))) << std::setw(6) << "-" << std::setw(12)
          << "inf,nan" << std::setprecision(17) << f.max_finite() << "\n";
    } else if (entry.is_float) {
      const FloatFormat& f = entry.format;
      const char* specials = f.specials == SpecialValues::Ieee        ? "inf,nan"
                             : f.specials == SpecialValues::NanOnlyFn ? "nan"
                             : f.specials == SpecialValues::None      ? "none"
                                                                      : "nan,nosign";
      out << std::setw(10) << ("e" + std::to_string(f.exponent_bits) + "m" + std::to_string(f.mantissa_bits))
          << std::setw(6) << f.bias << std::setw(12) << specials << std::setprecision(17) << f.max_finite() << "\n";
    } else {
      out << std::setw(10) << (entry.is_signed ? "signed" : "unsigned") << std::setw(6) << "-" << std::setw(12) << "-"
          << "-\n";
    }
  }
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string& command = args[0];
  if (command == "compile") return run_kernel_compile_command(args, out, err);
  try {
    if (command == "info") {
      out << info_report();
    } else if (command == "version" || command == "--version") {
      out << "tessera " << version() << "\n";
    } else if (command == "dtypes") {
      print_dtypes(out);
    } else if (command == "policy") {
      if (args.size() != 2) {
        err << "tessera policy: expected one argument, the policy text\n" << kUsage;
        return 2;
      }
      out << print_policy(parse_policy(args[1], "<command line>")) << "\n";
    } else {
      err << "tessera: unknown command '" << command << "'\n" << kUsage;
      return 2;
    }
  } catch (const Error& error) {
    err << error.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tessera
