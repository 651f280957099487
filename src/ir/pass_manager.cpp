// The pass registry and pass manager (tessera/ir/pass.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>

#include "graph/passes/graph_passes.h"
#include "tessera/ir/pass.h"
#include "tessera/ir/text.h"
#include "tessera/ir/verifier.h"
#include "tessera/schedule/passes.h"
#include "tessera/tile/passes.h"

namespace tessera::ir {
namespace {

using PassTable = std::map<std::string, PassInfo, std::less<>>;

// The table itself. register_pass writes here directly, so dialects can
// register while the builtin passes are being set up below.
PassTable& pass_table() {
  static PassTable table;
  return table;
}

void add_to_table(PassInfo pass) {
  if (pass.name.empty()) raise(ErrorCode::Internal, "a pass needs a name");
  if (!pass.run) raise(ErrorCode::Internal, "pass '" + pass.name + "' has no run function");
  if (pass_table().count(pass.name)) raise(ErrorCode::Internal, "pass '" + pass.name + "' is registered twice");
  std::string key = pass.name;
  pass_table().emplace(std::move(key), std::move(pass));
}

// The table with the builtin and dialect passes registered (once).
PassTable& passes() {
  static const bool initialized = [] {
    add_to_table(PassInfo{"verify", "Checks the IR against every op's rules (the verifier).",
                          [](Module& module) { verify(module); }});
    graph::register_graph_passes();
    tile::register_tile_passes();
    schedule::register_schedule_passes();
    return true;
  }();
  (void)initialized;
  return pass_table();
}

}  // namespace

void register_pass(PassInfo pass) {
  add_to_table(std::move(pass));
}

const PassInfo& lookup_pass(std::string_view name) {
  const PassTable& table = passes();
  if (auto it = table.find(name); it != table.end()) return it->second;
  std::vector<std::string_view> names;
  for (const auto& [n, p] : table) names.push_back(n);
  std::string hint = closest_match(name, names);
  raise(ErrorCode::ArgumentInvalid,
        "unknown pass '" + std::string(name) + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
}

std::vector<const PassInfo*> registered_passes() {
  std::vector<const PassInfo*> out;
  for (const auto& [n, p] : passes()) out.push_back(&p);
  return out;
}

void PassManager::add(std::string_view name) {
  passes_.push_back(lookup_pass(name));
}

void PassManager::add(PassInfo pass) {
  passes_.push_back(std::move(pass));
}

void PassManager::run(Module& module) {
  timings_.clear();
  for (const PassInfo& pass : passes_) {
    auto start = std::chrono::steady_clock::now();
    pass.run(module);
    auto stop = std::chrono::steady_clock::now();
    timings_.push_back({pass.name, std::chrono::duration<double, std::milli>(stop - start).count()});
    if (verify_each_) {
      try {
        verify(module);
      } catch (const Error& e) {
        raise(e.code(), "after pass '" + pass.name + "': " + e.message(), e.where());
      }
    }
    if (dump_) *dump_ << "// -----// IR after " << pass.name << " //----- //\n" << print_module(module);
  }
}

std::string PassManager::timing_report() const {
  double total = 0;
  std::size_t width = std::string_view("total").size();
  for (const auto& t : timings_) {
    total += t.milliseconds;
    width = std::max(width, t.name.size());
  }
  auto row = [&](std::string_view name, const std::string& ms, const std::string& percent) {
    std::string line(name);
    line.resize(width + 2, ' ');
    char cells[64];
    std::snprintf(cells, sizeof cells, "%12s  %7s\n", ms.c_str(), percent.c_str());
    return line + cells;
  };
  auto number = [](double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return std::string(buf);
  };
  std::string out = row("pass", "ms", "%");
  for (const auto& t : timings_) {
    out += row(t.name, number(t.milliseconds, 3), number(total > 0 ? 100.0 * t.milliseconds / total : 0.0, 1));
  }
  out += row("total", number(total, 3), number(total > 0 ? 100.0 : 0.0, 1));
  return out;
}

}  // namespace tessera::ir
