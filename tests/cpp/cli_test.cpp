// The `tessera` command line, run in-process through run_cli.
#include "tessera/tools/cli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/numerics/dtype.h"
#include "tessera/runtime/system_info.h"

namespace tessera {
namespace {

struct CliResult {
  int status;
  std::string out;
  std::string err;
};

CliResult run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_cli(args, out, err);
  return {status, out.str(), err.str()};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The line of `text` that starts with `start`, or "" if none does.
std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(start, 0) == 0) return line;
  }
  return "";
}

// Whitespace-separated fields of a line (the tables pad with spaces).
std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string field; in >> field;) out.push_back(field);
  return out;
}

// MAJOR.MINOR.PATCH, digits only. (No std::regex: GCC 12 warns inside it
// under the sanitizer build, and warnings are errors.)
bool is_version_number(const std::string& text) {
  int dots = 0;
  bool digit_before = false;
  for (char c : text) {
    if (c == '.' && digit_before) {
      ++dots;
      digit_before = false;
    } else if (c >= '0' && c <= '9') {
      digit_before = true;
    } else {
      return false;
    }
  }
  return dots == 2 && digit_before;
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Cli, InfoReportsBuildBackendsAndCache) {
  const CliResult r = run({"info"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(contains(r.out, "Tessera " + version() + "\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "build:")) << r.out;
  EXPECT_TRUE(contains(r.out, "cpu:")) << r.out;
  EXPECT_TRUE(contains(r.out, "(" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads)"))
      << r.out;
  // CUDA is either found or reported unavailable with a reason; never silent.
  const std::vector<std::string> cuda = fields(line_starting(r.out, "  cuda:"));
  ASSERT_GE(cuda.size(), 3u) << r.out;
  EXPECT_TRUE((cuda[1] == "available" && cuda[2] == "(driver") || cuda[1] == "unavailable:") << r.out;
  EXPECT_TRUE(contains(r.out, "nvrtc:")) << r.out;
  EXPECT_TRUE(contains(r.out, "compile cache:")) << r.out;
}

TEST(Cli, CompileCacheLocationFollowsTheEnvironment) {
  {
    ScopedEnv cache("TESSERA_CACHE_DIR", "/tmp/tessera-cli-test-cache");
    EXPECT_TRUE(contains(run({"info"}).out, "compile cache: /tmp/tessera-cli-test-cache\n"));
    EXPECT_EQ(compile_cache_dir(), "/tmp/tessera-cli-test-cache");
  }
  {
    ScopedEnv cache("TESSERA_CACHE_DIR", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg-cache");
    EXPECT_TRUE(contains(run({"info"}).out, "compile cache: /tmp/xdg-cache/tessera\n"));
  }
  {
    ScopedEnv cache("TESSERA_CACHE_DIR", "");  // empty counts as unset
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv home("HOME", "/home/somebody");
    EXPECT_EQ(compile_cache_dir(), "/home/somebody/.cache/tessera");
  }
}

TEST(Cli, Version) {
  const CliResult r = run({"version"});
  EXPECT_EQ(r.status, 0);
  ASSERT_EQ(r.out.rfind("tessera ", 0), 0u) << r.out;
  ASSERT_EQ(r.out.back(), '\n');
  EXPECT_TRUE(is_version_number(r.out.substr(8, r.out.size() - 9))) << r.out;
  EXPECT_EQ(r.out, "tessera " + version() + "\n");
  EXPECT_EQ(run({"--version"}).out, r.out);
}

TEST(Cli, PolicyPrintsTheCanonicalForm) {
  CliResult r = run({"policy", "bfloat16 @saturate @accum(f32)"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "bf16 @accum(fp32) @saturate\n");
  EXPECT_EQ(r.err, "");
  r = run({"policy", "int8"});
  EXPECT_EQ(r.out, "int8 @accum(int32)\n");
}

TEST(Cli, BadPolicyPrintsTheErrorWithCaret) {
  const CliResult r = run({"policy", "fp16 @bogus"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(contains(r.err, "<command line>:1:7: error[TE3002]: unknown policy modifier '@bogus'")) << r.err;
  EXPECT_TRUE(contains(r.err, "\n  fp16 @bogus\n        ^~~~~\n")) << r.err;
  const CliResult dtype = run({"policy", "fp33"});
  EXPECT_EQ(dtype.status, 1);
  EXPECT_TRUE(contains(dtype.err, "<command line>:1:1: error[TE1001]")) << dtype.err;
}

TEST(Cli, UsageErrors) {
  CliResult r = run({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "unknown command 'frobnicate'")) << r.err;
  EXPECT_TRUE(contains(r.err, "usage: tessera")) << r.err;
  EXPECT_EQ(r.out, "");
  r = run({});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "usage: tessera"));
  r = run({"policy"});
  EXPECT_EQ(r.status, 2);
  r = run({"policy", "fp16", "fp32"});
  EXPECT_EQ(r.status, 2);
  r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "usage: tessera"));
}

TEST(Cli, DtypesTableListsEveryDtype) {
  const CliResult r = run({"dtypes"});
  EXPECT_EQ(r.status, 0);
  for (DType d : all_dtypes()) {
    EXPECT_TRUE(contains(r.out, "\n" + std::string(name(d)) + " ")) << name(d) << "\n" << r.out;
  }
  using Row = std::vector<std::string>;
  EXPECT_EQ(fields(line_starting(r.out, "dtype ")), (Row{"dtype", "bits", "layout", "bias", "specials", "max"}));
  EXPECT_EQ(fields(line_starting(r.out, "fp8_e4m3 ")), (Row{"fp8_e4m3", "8", "e4m3", "7", "nan", "448"}));
  EXPECT_EQ(fields(line_starting(r.out, "fp8_e5m2 ")), (Row{"fp8_e5m2", "8", "e5m2", "15", "inf,nan", "57344"}));
  EXPECT_EQ(fields(line_starting(r.out, "fp4_e2m1 ")), (Row{"fp4_e2m1", "4", "e2m1", "1", "none", "6"}));
  EXPECT_EQ(fields(line_starting(r.out, "e8m0 ")),
            (Row{"e8m0", "8", "e8m0", "127", "nan,nosign", "1.7014118346046923e+38"}));
  EXPECT_EQ(fields(line_starting(r.out, "uint8 ")), (Row{"uint8", "8", "unsigned", "-", "-", "-"}));
}

}  // namespace
}  // namespace tessera
