// CPU backend: the disk cache (hits, corrupt entries rebuilt, atomic layout),
// the compiler driver's errors, and what the generated source looks like.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "backends/cpu/compile_cache.h"
#include "cpu_backend_test_util.h"
#include "tessera/support/error.h"

namespace tessera::cputest {
namespace {

namespace fs = std::filesystem;

// A fresh cache directory per test.
class CpuBackendCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    dir_ = fs::temp_directory_path() / ("tessera-cpu-cache-test-" + std::to_string(stamp));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  cpu::CompileOptions options() const {
    cpu::CompileOptions o;
    o.cache_dir = dir_.string();
    return o;
  }

  fs::path dir_;
};

ir::Operation* add_one_kernel(ir::Module& m) {
  ir::Operation* k = tile::build_kernel(m, "add_one", {{"y", gmem({Dim::named("n")}, DType::fp32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* v = op(b, "tile.load_elem", {body.argument(0), i});
  stmt(b, "tile.store_elem", {body.argument(0), i, op(b, "tile.add", {v, real(b, 1.0)})});
  return k;
}

void expect_adds_one(const cpu::CompiledKernel& ck) {
  Tensor y = f32_tensor({1, 2, 3}, {3});
  cpu::launch(ck, -1, {y});
  EXPECT_EQ(y.to_values(), (std::vector<double>{2, 3, 4}));
}

TEST_F(CpuBackendCache, SecondCompileIsAHit) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  cpu::CompiledKernel first = compile(*k, options());
  EXPECT_FALSE(first.cache_hit);
  cpu::CompiledKernel second = compile(*k, options());
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(first.cache_key, second.cache_key);
  EXPECT_EQ(first.library_path, second.library_path);
  EXPECT_TRUE(fs::exists(first.library_path + ".meta"));
  EXPECT_LT(second.compile_seconds, first.compile_seconds);
  std::cout << "[ figures  ] compile_kernel first call " << first.compile_seconds * 1e3 << " ms, cached "
            << second.compile_seconds * 1e3 << " ms\n";
  expect_adds_one(second);
  // No temporary files are left behind.
  for (const auto& entry : fs::directory_iterator(dir_ / "cpu")) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
  // Different flags are a different entry.
  cpu::CompileOptions o = options();
  o.extra_flags = {"-DTESSERA_TEST_FLAG=1"};
  cpu::CompiledKernel third = compile(*k, o);
  EXPECT_FALSE(third.cache_hit);
  EXPECT_NE(third.cache_key, first.cache_key);
}

// The precompiled header library: g++ builds one per compiler, flags and
// headers under cpu/pch-<hash>/ on the first compile (other flags: another
// one); a .gch that g++ cannot use is skipped, so kernels still compile and
// run; TESSERA_CPU_PCH=0 builds none.
TEST_F(CpuBackendCache, HeadersArePrecompiledOncePerFlags) {
  auto gch_files = [&] {
    std::vector<fs::path> found;
    if (!fs::exists(dir_ / "cpu")) return found;
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / "cpu")) {
      if (entry.path().extension() == ".gch") found.push_back(entry.path());
    }
    return found;
  };
  const char* cxx = std::getenv("TESSERA_CXX");
  if (cxx != nullptr && std::string(cxx).find("clang") != std::string::npos) GTEST_SKIP() << "clang++: no .gch";
  {
    setenv("TESSERA_CPU_PCH", "0", 1);
    ir::Module m;
    expect_adds_one(compile(*add_one_kernel(m), options()));
    unsetenv("TESSERA_CPU_PCH");
    EXPECT_TRUE(gch_files().empty());
  }
  ir::Module m;
  cpu::CompileOptions o = options();
  o.extra_flags = {"-DTESSERA_PCH_TEST=1"};  // a new key: the unit above is not reused
  expect_adds_one(compile(*add_one_kernel(m), o));
  const std::vector<fs::path> built = gch_files();
  ASSERT_EQ(built.size(), 1u);
  EXPECT_EQ(built[0].filename(), "tessera_cpu.h.gch");
  EXPECT_EQ(built[0].parent_path().parent_path().filename().string().rfind("pch-", 0), 0u) << built[0];
  // An unusable .gch: the kernel, compiled again (its entry removed),
  // still compiles and runs.
  { std::ofstream(built[0], std::ios::trunc) << "not a precompiled header"; }
  for (const auto& entry : fs::directory_iterator(dir_ / "cpu")) {
    if (entry.path().extension() == ".so") fs::remove(entry.path());
  }
  cpu::CompiledKernel again = compile(*add_one_kernel(m), o);
  EXPECT_FALSE(again.cache_hit);
  expect_adds_one(again);
  // Other flags: their own .gch.
  o.extra_flags = {"-DTESSERA_PCH_TEST=2"};
  expect_adds_one(compile(*add_one_kernel(m), o));
  EXPECT_EQ(gch_files().size(), 2u);
  // A value that is neither 0 nor 1 is refused, not ignored.
  setenv("TESSERA_CPU_PCH", "off", 1);
  o.extra_flags = {"-DTESSERA_PCH_TEST=3"};
  try {
    compile(*add_one_kernel(m), o);
    ADD_FAILURE() << "expected an ArgumentError";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.message()).find("TESSERA_CPU_PCH is 'off'"), std::string::npos) << e.message();
  }
  unsetenv("TESSERA_CPU_PCH");
}

TEST_F(CpuBackendCache, TruncatedEntryIsDetectedAndRebuilt) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  std::string path;
  std::uintmax_t size = 0;
  {
    cpu::CompiledKernel first = compile(*k, options());
    path = first.library_path;
    size = fs::file_size(path);
  }  // unloaded here, before the file is damaged
  fs::resize_file(path, size / 2);
  {
    cpu::CompiledKernel rebuilt = compile(*k, options());
    EXPECT_FALSE(rebuilt.cache_hit);
    EXPECT_EQ(fs::file_size(path), size);
    expect_adds_one(rebuilt);
  }
  {
    cpu::CompiledKernel again = compile(*k, options());
    EXPECT_TRUE(again.cache_hit);
  }
  // A flipped byte of the same size is caught by the hash. (Every kernel
  // loaded from the file is gone: damaging a mapped library would crash.)
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 3));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(size / 3));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  EXPECT_FALSE(compile(*k, options()).cache_hit);
  // A missing sidecar (a crash between the two renames) is rebuilt too.
  fs::remove(path + ".meta");
  cpu::CompiledKernel last = compile(*k, options());
  EXPECT_FALSE(last.cache_hit);
  expect_adds_one(last);
}

// An entry whose object matches its sidecar but does not load (one written by
// another build of Tessera whose library this process cannot resolve, say)
// is rebuilt instead of failing the compile.
TEST_F(CpuBackendCache, ValidEntryThatDoesNotLoadIsRebuilt) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  std::string key;
  {
    cpu::CompiledKernel first = compile(*k, options());
    key = first.cache_key;
  }  // unloaded before the entry is replaced
  // A well-formed shared object without the kernel's entry point, published
  // under the same key so that its size and hash match the sidecar.
  const fs::path stub_source = dir_ / "no_entry_point.cpp";
  std::ofstream(stub_source) << "extern \"C\" int tessera_test_unrelated_symbol() { return 7; }\n";
  const fs::path stub = dir_ / "no_entry_point.so";
  const std::string command = "c++ -shared -fPIC -o " + stub.string() + " " + stub_source.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  cpu::detail::CompileCache(dir_.string()).publish(key, stub.string());
  cpu::CompiledKernel second = compile(*k, options());
  EXPECT_FALSE(second.cache_hit);
  EXPECT_EQ(second.cache_key, key);
  expect_adds_one(second);
}

TEST_F(CpuBackendCache, MissingCompilerIsAClearError) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  cpu::CompileOptions o = options();
  o.cxx = "/nonexistent/tessera-no-such-c++";
  try {
    compile(*k, o);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    const std::string msg = e.message();
    EXPECT_NE(msg.find("/nonexistent/tessera-no-such-c++"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TESSERA_CXX"), std::string::npos) << msg;
  }
}

TEST_F(CpuBackendCache, GeneratedSourceIsReadableCpp) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  tile::finish_kernel(*k);
  const std::string src = cpu::emit_kernel_source(*k);
  EXPECT_NE(src.find("#include \"tessera_cpu/tessera_cpu.h\""), std::string::npos) << src;
  EXPECT_NE(src.find("kernel 'add_one'"), std::string::npos) << src;
  EXPECT_NE(src.find("tsr::load(p_y"), std::string::npos) << src;
  EXPECT_NE(src.find("extern \"C\" int tessera_cpu_run_groups"), std::string::npos) << src;
}

TEST_F(CpuBackendCache, CompilerErrorsQuoteTheCompilerOutput) {
  ir::Module m;
  ir::Operation* k = add_one_kernel(m);
  cpu::CompileOptions o = options();
  o.extra_flags = {"-DTESSERA_BROKEN=1", "-include", "/nonexistent/tessera-missing-header.h"};
  try {
    compile(*k, o);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.message()).find("tessera-missing-header.h"), std::string::npos) << e.message();
  }
}

// A kernel adding `amount` to every element of y, named for it.
ir::Operation* add_kernel(ir::Module& m, double amount) {
  ir::Operation* k = tile::build_kernel(m, "add_" + std::to_string(static_cast<int>(amount)),
                                        {{"y", gmem({Dim::named("n")}, DType::fp32, true)}});
  ir::Block& body = ir::function_body(*k);
  OpBuilder b(body);
  Value* i = op(b, "tile.linear_id", {});
  Value* v = op(b, "tile.load_elem", {body.argument(0), i});
  stmt(b, "tile.store_elem", {body.argument(0), i, op(b, "tile.add", {v, real(b, amount)})});
  tile::finish_kernel(*k);
  return k;
}

// Several kernels of one unit compile in parts, one compiler process each
// (TESSERA_CPU_COMPILE_JOBS), linked into one shared object: every kernel
// loads from it and runs, as from a one-process build, the part files are
// gone afterwards, and a second compile of the unit is a hit. A bad value of
// the knob is an error naming it.
TEST_F(CpuBackendCache, KernelsOfOneUnitCompileInParallelParts) {
  ir::Module m;
  std::vector<const ir::Operation*> kernels;
  for (int k = 1; k <= 5; ++k) kernels.push_back(add_kernel(m, k));
  for (const char* jobs : {"1", "3"}) {
    SCOPED_TRACE(std::string("jobs ") + jobs);
    cpu::CompileOptions o = options();
    o.cache_dir = (dir_ / jobs).string();  // an empty cache for each
    setenv("TESSERA_CPU_COMPILE_JOBS", jobs, 1);
    std::vector<cpu::CompiledKernel> compiled = cpu::compile_kernels(kernels, o);
    unsetenv("TESSERA_CPU_COMPILE_JOBS");
    ASSERT_EQ(compiled.size(), 5u);
    for (std::size_t k = 0; k < compiled.size(); ++k) {
      EXPECT_FALSE(compiled[k].cache_hit);
      Tensor y = f32_tensor({1, 2, 3}, {3});
      cpu::launch(compiled[k], -1, {y});
      const double a = static_cast<double>(k + 1);
      EXPECT_EQ(y.to_values(), (std::vector<double>{1 + a, 2 + a, 3 + a})) << "kernel " << k;
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      EXPECT_EQ(entry.path().string().find(".part"), std::string::npos) << entry.path();
    }
    EXPECT_TRUE(cpu::compile_kernels(kernels, o).front().cache_hit);
  }
  setenv("TESSERA_CPU_COMPILE_JOBS", "0", 1);
  try {
    cpu::CompileOptions o = options();
    o.cache_dir = (dir_ / "bad").string();
    cpu::compile_kernels(kernels, o);
    ADD_FAILURE() << "expected an ArgumentError";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_CPU_COMPILE_JOBS is '0'"), std::string::npos) << e.what();
  }
  unsetenv("TESSERA_CPU_COMPILE_JOBS");
}

// A compiler error in one part of a parallel build is raised, quoting the
// compiler's output, and leaves no part files behind.
TEST_F(CpuBackendCache, ErrorsOfAPartQuoteTheCompilerOutput) {
  ir::Module m;
  std::vector<const ir::Operation*> kernels{add_kernel(m, 1), add_kernel(m, 2)};
  cpu::CompileOptions o = options();
  o.extra_flags = {"-include", "/nonexistent/tessera-missing-header.h"};
  setenv("TESSERA_CPU_COMPILE_JOBS", "2", 1);
  try {
    cpu::compile_kernels(kernels, o);
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.message()).find("tessera-missing-header.h"), std::string::npos) << e.message();
  }
  unsetenv("TESSERA_CPU_COMPILE_JOBS");
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().string().find(".part"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace tessera::cputest
