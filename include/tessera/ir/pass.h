// Passes and the pass manager.
//
// A pass has a name, a one-line summary and a run function over a module.
// Passes register by name so tools (tessera-opt --pass NAME) and pipelines
// can name them. The pass manager verifies after every pass, can print the IR
// after each one (print_ir_after_all), and times each pass.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ir/ir.h"

namespace tessera::ir {

struct PassInfo {
  std::string name;
  std::string summary;
  std::function<void(Module&)> run;
};

// Registers a pass (the graph dialect's passes register on first lookup).
void register_pass(PassInfo pass);
const PassInfo& lookup_pass(std::string_view name);  // ArgumentError with "did you mean"
std::vector<const PassInfo*> registered_passes();

struct PassTiming {
  std::string name;
  double milliseconds;
};

class PassManager {
 public:
  void add(std::string_view name);
  void add(PassInfo pass);
  // When set, IR is written to `*stream` after each pass, headed
  // "// -----// IR after <name> //----- //".
  void print_ir_after_all(std::ostream* stream) { dump_ = stream; }
  void set_verify_each(bool verify) { verify_each_ = verify; }

  void run(Module& module);
  const std::vector<PassTiming>& timings() const { return timings_; }
  std::string timing_report() const;

 private:
  std::vector<PassInfo> passes_;
  std::ostream* dump_ = nullptr;
  bool verify_each_ = true;
  std::vector<PassTiming> timings_;
};

}  // namespace tessera::ir
