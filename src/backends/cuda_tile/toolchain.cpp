// Finding and running tileiras (see the header for the search order).
#include "tessera/backends/cuda_tile/toolchain.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "backends/cpu/compile_cache.h"
#include "tessera/support/error.h"

namespace tessera::cuda_tile {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command with CUDA_HOME and PATH pointing at `home`; returns
// the exit status and the combined output.
int run(const std::string& home, const std::string& command, std::string& output) {
  std::string cmd = "env CUDA_HOME=" + quote(home) + " PATH=" + quote(home + "/bin:" + env("PATH")) + " " + command +
                    " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// site-packages directories where the pip wheel may have put nvidia/cu13.
std::vector<fs::path> site_packages() {
  std::vector<fs::path> out;
  std::error_code ec;
  if (std::string venv = env("VIRTUAL_ENV"); !venv.empty()) {
    for (const auto& e : fs::directory_iterator(fs::path(venv) / "lib", ec)) {
      out.push_back(e.path() / "site-packages");
    }
  }
  // libtessera lives in site-packages/tessera/ in an installed wheel and in
  // build-dev/pydev/tessera/ in a development build; try its parents.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&site_packages), &info) != 0 && info.dli_fname != nullptr) {
    fs::path dir = fs::absolute(info.dli_fname, ec).parent_path();
    for (int up = 0; up < 2 && !dir.empty(); ++up, dir = dir.parent_path()) out.push_back(dir);
  }
  return out;
}

void describe(Toolchain& t) {
  t.home = fs::path(t.tileiras).parent_path().parent_path().string();
  std::error_code ec;
  t.has_nvvm = fs::exists(fs::path(t.home) / "lib/libnvvm.so.4", ec) ||
               fs::exists(fs::path(t.home) / "nvvm/lib64/libnvvm.so", ec);
  t.has_ptxas = executable(fs::path(t.home) / "bin/ptxas");
  std::string out;
  if (run(t.home, quote(t.tileiras) + " --version", out) == 0) {
    std::smatch m;
    if (std::regex_search(out, m, std::regex(R"(V(\d+\.\d+\.\d+))"))) t.version = m[1];
  }
  std::string help;
  run(t.home, quote(t.tileiras) + " --help", help);
  std::regex arch(R"(=(sm_\d+[a-z]?)\s)");
  for (auto it = std::sregex_iterator(help.begin(), help.end(), arch); it != std::sregex_iterator(); ++it) {
    t.archs.push_back((*it)[1]);
  }
  if (!t.has_nvvm || !t.has_ptxas) {
    t.reason = std::string("tileiras needs ") + (!t.has_nvvm ? "libnvvm" : "") + (!t.has_nvvm && !t.has_ptxas ? " and " : "") +
               (!t.has_ptxas ? "ptxas" : "") + " of release " + (t.version.empty() ? "?" : t.version) + " under " + t.home +
               " (pip install nvidia-nvvm nvidia-cuda-nvcc of that version)";
  }
}

}  // namespace

Toolchain find_toolchain() {
  Toolchain t;
  std::vector<std::pair<fs::path, std::string>> candidates;
  if (std::string p = env("TESSERA_TILEIRAS"); !p.empty()) {
    // Named by the user: that file or nothing (no quiet fall back to another tileiras).
    if (!executable(p)) {
      t.reason = "TESSERA_TILEIRAS=" + p + " is not an executable file";
      return t;
    }
    candidates.emplace_back(p, "TESSERA_TILEIRAS");
  }
  for (const fs::path& sp : site_packages()) candidates.emplace_back(sp / "nvidia/cu13/bin/tileiras", "pip (" + sp.string() + ")");
  if (std::string h = env("CUDA_HOME"); !h.empty()) candidates.emplace_back(fs::path(h) / "bin/tileiras", "CUDA_HOME");
  std::stringstream path(env("PATH"));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty()) candidates.emplace_back(fs::path(dir) / "tileiras", "PATH");
  }
  for (const auto& [p, source] : candidates) {
    if (!executable(p)) continue;
    t.found = true;
    t.tileiras = fs::absolute(p).string();
    t.source = source;
    describe(t);
    return t;
  }
  t.reason = "tileiras not found ($TESSERA_TILEIRAS, the nvidia-cuda-tileiras pip package, $CUDA_HOME/bin, PATH)";
  return t;
}

const Toolchain& toolchain() {
  static const Toolchain t = find_toolchain();
  return t;
}

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "tessera-tileiras-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) raise(ErrorCode::Compile, "cuda_tile: cannot create a temporary directory");
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, const std::vector<std::uint8_t>& data) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) raise(ErrorCode::Compile, "cuda_tile: cannot write " + p.string());
}

}  // namespace

std::vector<std::uint8_t> run_tileiras(const std::vector<std::uint8_t>& bytecode, const std::string& arch) {
  const Toolchain& t = toolchain();
  if (!t.found) raise(ErrorCode::Compile, "cuda_tile: " + t.reason);
  TempDir dir;
  write_file(dir.path / "kernel.tileirbc", bytecode);
  std::string out;
  const int rc = run(t.home, quote(t.tileiras) + " --gpu-name=" + quote(arch) + " -o " +
                                 quote((dir.path / "kernel.cubin").string()) + " " +
                                 quote((dir.path / "kernel.tileirbc").string()),
                     out);
  if (rc != 0) {
    // Keep the input for a bug report or a rerun by hand: the temporary
    // folder goes away with this call.
    std::error_code ec;
    const fs::path kept = fs::temp_directory_path(ec) / ("tessera-cuda-tile-failed-" + cpu::detail::sha256_hex(std::string_view(reinterpret_cast<const char*>(bytecode.data()), bytecode.size())).substr(0, 16) + ".tileirbc");
    if (!ec) write_file(kept, bytecode);
    raise(ErrorCode::Compile, "cuda_tile: tileiras " + t.version + " failed for " + arch + " (exit " + std::to_string(rc) +
                                  "): " + out + (t.reason.empty() ? "" : " [" + t.reason + "]") +
                                  (ec ? std::string() : " (its input is kept at " + kept.string() + ")"));
  }
  std::ifstream in(dir.path / "kernel.cubin", std::ios::binary);
  std::vector<std::uint8_t> cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cubin.empty()) raise(ErrorCode::Compile, "cuda_tile: tileiras wrote no cubin: " + out);
  return cubin;
}

std::string disassemble(const std::vector<std::uint8_t>& bytecode) {
  const Toolchain& t = toolchain();
  if (!t.found) return "";
  const fs::path disasm = fs::path(t.tileiras).parent_path() / "tileirdisasm";
  if (!executable(disasm)) return "";
  TempDir dir;
  write_file(dir.path / "kernel.tileirbc", bytecode);
  std::string out;
  const int rc = run(t.home, quote(disasm.string()) + " " + quote((dir.path / "kernel.tileirbc").string()), out);
  if (rc != 0) raise(ErrorCode::Compile, "cuda_tile: tileirdisasm rejected the bytecode: " + out);
  return out;
}

}  // namespace tessera::cuda_tile
