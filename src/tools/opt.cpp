// `tessera-opt`: parse IR text, run passes, print the result (tessera/tools/opt.h).
#include "tessera/tools/opt.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/support/error.h"

namespace tessera {
namespace {

constexpr const char* kUsage =
    "usage: tessera-opt FILE|- [options]\n"
    "Parses Tessera IR, runs the named passes in order (verifying after each) and prints the result.\n"
    "options:\n"
    "  --pass NAME           run pass NAME (repeatable; see --list-passes)\n"
    "  --print-ir-after-all  print the IR to stderr after every pass\n"
    "  --timing              print each pass's wall-clock time to stderr\n"
    "  --generic             print ops in the generic form\n"
    "  --split-input-file    treat '// -----' lines as separators of independent inputs\n"
    "  -o OUT                write the output to OUT instead of stdout\n"
    "  --list-passes         list the registered passes\n"
    "  --help                this text\n";

struct Options {
  std::string input;
  std::vector<std::string> passes;
  bool print_after_all = false;
  bool timing = false;
  bool generic = false;
  bool split = false;
  std::string output;
  bool list_passes = false;
  bool help = false;
};

struct UsageError {
  std::string message;
};

Options parse_args(const std::vector<std::string>& args) {
  static const std::vector<std::string_view> kFlags = {
      "--pass", "--print-ir-after-all", "--timing", "--generic", "--split-input-file", "-o", "--list-passes", "--help"};
  Options o;
  bool have_input = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string_view flag) {
      if (i + 1 >= args.size()) throw UsageError{"option '" + std::string(flag) + "' needs a value"};
      return args[++i];
    };
    if (a == "--pass") {
      o.passes.push_back(value(a));
    } else if (a.rfind("--pass=", 0) == 0) {
      o.passes.push_back(a.substr(7));
    } else if (a == "--print-ir-after-all") {
      o.print_after_all = true;
    } else if (a == "--timing") {
      o.timing = true;
    } else if (a == "--generic") {
      o.generic = true;
    } else if (a == "--split-input-file") {
      o.split = true;
    } else if (a == "-o") {
      o.output = value(a);
    } else if (a == "--list-passes") {
      o.list_passes = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a != "-" && !a.empty() && a[0] == '-') {
      std::string hint = closest_match(a.substr(0, a.find('=')), kFlags);
      throw UsageError{"unknown option '" + a + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?")};
    } else {
      if (have_input) throw UsageError{"more than one input file ('" + o.input + "' and '" + a + "')"};
      o.input = a;
      have_input = true;
    }
  }
  if (!have_input && !o.help && !o.list_passes) throw UsageError{"no input file (use '-' for stdin)"};
  return o;
}

// Splits on lines that read `// -----`. Each chunk is padded with the
// newlines before it so diagnostics keep their line numbers in the file.
std::vector<std::string> split_input(const std::string& text) {
  std::vector<std::string> chunks;
  std::string current;
  int line = 0, chunk_start_line = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    bool last = end == std::string::npos;
    std::string_view l = std::string_view(text).substr(pos, (last ? text.size() : end) - pos);
    std::string_view trimmed = l;
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t' || trimmed.back() == '\r')) {
      trimmed.remove_suffix(1);
    }
    if (trimmed == "// -----") {
      chunks.push_back(std::string(static_cast<std::size_t>(chunk_start_line), '\n') + current);
      current.clear();
      chunk_start_line = line + 1;
    } else {
      current.append(l);
      if (!last) current += '\n';
    }
    ++line;
    if (last) break;
    pos = end + 1;
  }
  chunks.push_back(std::string(static_cast<std::size_t>(chunk_start_line), '\n') + current);
  return chunks;
}

void report(const Error& error, std::ostream& err) {
  err << error.what() << "\n";
}

// Parses, runs the passes and prints one input; returns false after an error.
bool process(const std::string& text, const std::string& file, const Options& o, std::ostream& out, std::ostream& err) {
  try {
    ir::Module module = ir::parse_module(text, file);
    ir::verify(module);
    ir::PassManager pm;
    for (const auto& name : o.passes) pm.add(name);
    if (o.print_after_all) pm.print_ir_after_all(&err);
    pm.run(module);
    if (o.timing) err << pm.timing_report();
    out << ir::print_module(module, ir::PrintOptions{.generic = o.generic});
    return true;
  } catch (const Error& error) {
    report(error, err);
    return false;
  }
}

}  // namespace

int run_opt(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  Options o;
  try {
    o = parse_args(args);
    if (o.help) {
      out << kUsage;
      return 0;
    }
    // Check pass names before reading any input.
    for (const auto& name : o.passes) ir::lookup_pass(name);
  } catch (const UsageError& e) {
    err << "tessera-opt: " << e.message << "\n" << kUsage;
    return 2;
  } catch (const Error& e) {
    err << "tessera-opt: " << e.message() << " (--list-passes shows them all)\n";
    return 2;
  }
  if (o.list_passes) {
    std::size_t width = 0;
    for (const auto* p : ir::registered_passes()) width = std::max(width, p->name.size());
    for (const auto* p : ir::registered_passes()) {
      std::string name = p->name;
      name.resize(width + 2, ' ');
      out << name << p->summary << "\n";
    }
    if (o.input.empty()) return 0;
  }

  std::string text;
  std::string file = o.input;
  if (o.input == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    file = "<stdin>";
  } else {
    std::ifstream stream(o.input, std::ios::binary);
    if (!stream) {
      err << "tessera-opt: cannot open input file '" << o.input << "'\n";
      return 1;
    }
    text.assign(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
  }

  std::ostringstream result;
  bool ok = true;
  if (o.split) {
    auto chunks = split_input(text);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      if (i) result << "// -----\n";
      ok &= process(chunks[i], file, o, result, err);
    }
  } else {
    ok = process(text, file, o, result, err);
  }

  if (o.output.empty()) {
    out << result.str();
  } else {
    std::ofstream stream(o.output, std::ios::binary);
    if (!(stream << result.str()) || !stream.flush()) {
      err << "tessera-opt: cannot write output file '" << o.output << "'\n";
      return 1;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace tessera
