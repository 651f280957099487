// The host C++ compiler driver of the CPU backend (see compiler.h).
//
// The compiler runs as a child process (posix_spawn, no shell, so paths with
// spaces or quotes need no escaping) with its output captured in a log file
// next to the object being built; a failure quotes the log's tail.
#include "backends/cpu/compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "backends/cpu/compile_cache.h"
#include "tessera/support/error.h"

extern char** environ;

namespace tessera::cpu::detail {
namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `name` itself when it holds a slash, else the first match on PATH.
std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return {};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv with stdout and stderr going to `log`; returns the exit status
// (or -1 when the process could not start).
int run_process(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string temp_log_path() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  static std::mutex m;
  static int counter = 0;
  std::lock_guard<std::mutex> lock(m);
  return dir + "/tessera-cxx-version-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log";
}

std::string version_of(const std::string& path) {
  static std::mutex m;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(m);
  if (auto it = versions.find(path); it != versions.end()) return it->second;
  const std::string log = temp_log_path();
  const int rc = run_process({path, "--version"}, log);
  std::string text = read_text(log);
  std::remove(log.c_str());
  if (rc != 0) {
    raise(ErrorCode::Compile, "host C++ compiler '" + path + "' failed to report its version ('" + path +
                                  " --version' exited with " + std::to_string(rc) + "): " + text);
  }
  std::string first = text.substr(0, text.find('\n'));
  versions[path] = first;
  return first;
}

}  // namespace

HostCompiler find_host_compiler(const std::string& requested) {
  std::string choice = requested;
  std::string origin = "CompileOptions::cxx";
  if (choice.empty()) {
    if (const char* env = std::getenv("TESSERA_CXX"); env != nullptr && *env != '\0') {
      choice = env;
      origin = "TESSERA_CXX";
    }
  }
  if (!choice.empty()) {
    std::string path = which(choice);
    if (path.empty()) {
      raise(ErrorCode::Compile, "host C++ compiler '" + choice + "' (from " + origin +
                                    ") was not found or is not executable; the CPU backend compiles kernels with a "
                                    "C++20 compiler: set TESSERA_CXX to one (g++ or clang++)");
    }
    return HostCompiler{path, version_of(path)};
  }
  for (const char* name : {"c++", "g++", "clang++"}) {
    std::string path = which(name);
    if (!path.empty()) return HostCompiler{path, version_of(path)};
  }
  raise(ErrorCode::Compile,
        "no host C++ compiler found: the CPU backend compiles kernels with a C++20 compiler and looked for c++, g++ "
        "and clang++ on PATH; install one (e.g. g++) or set TESSERA_CXX to its path");
}

std::vector<std::string> default_compile_flags() {
  // -ffp-contract=off: the compiler must not fuse a*b+c where the IR rounds
  // twice; tile.mma's fused steps are written as std::fma explicitly.
  // -fno-trapping-math changes no value (Tessera never reads the floating-
  // point exception flags); it lets g++ if-convert the selects of the
  // elementary functions and vectorize lane loops that call them.
  // -fno-tree-slp-vectorize: g++ 12's straight-line vectorizer turns
  // (a*b - c*d, e*f + g*h) pairs (a complex product, as in every FFT
  // butterfly) into vfmaddsub despite -ffp-contract=off, rounding once where
  // the IR rounds twice (seen in fp64 FFT kernels). Loop vectorization stays;
  // the CPU MLP step measured the same with and without it (0.51x/0.52x numpy).
  return {"-std=c++20",       "-O3",          "-march=native",       "-fPIC",   "-shared",
          "-ffp-contract=off", "-fno-tree-slp-vectorize", "-fno-math-errno", "-fno-trapping-math", "-DNDEBUG"};
}

namespace {

// The compiler's log, trimmed, and the command, as a CompileError.
[[noreturn]] void raise_compile_failure(const std::vector<std::string>& argv, int rc, std::string text,
                                        const std::string& what) {
  if (text.size() > 4000) text = "...\n" + text.substr(text.size() - 4000);
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
  raise(ErrorCode::Compile, "the host C++ compiler failed (exit status " + std::to_string(rc) + ") on " + what +
                                "\ncommand: " + command + "\n" + text);
}

// Runs `argv` with its output in `log`: the exit status and the log's text.
std::pair<int, std::string> run_logged(const std::vector<std::string>& argv, const std::string& log) {
  const int rc = run_process(argv, log);
  std::string text = read_text(log);
  std::remove(log.c_str());
  return {rc, text};
}

}  // namespace

std::string precompiled_header_dir(const HostCompiler& cxx, const std::vector<std::string>& flags,
                                   const std::string& prebuilt_dir, const std::string& cache_dir,
                                   const std::string& include_dir) {
  if (const char* v = std::getenv("TESSERA_CPU_PCH"); v != nullptr && *v != '\0') {
    const std::string value = v;
    if (value != "0" && value != "1") {
      raise(ErrorCode::ArgumentInvalid,
            "TESSERA_CPU_PCH is '" + value + "'; expected 0 (no precompiled headers) or 1 (the default)");
    }
    if (value == "0") return {};
  }
  if (cxx.version.find("clang") != std::string::npos) return {};
  // Keyed like a kernel: compiler, version, flags and the headers' hash
  // (not their directory: a .gch serves any copy of the same headers).
  std::string key_text = "tessera-cpu pch\ncompiler " + cxx.path + "\n" + cxx.version + "\nheaders " +
                         CompileCache::header_hash() + "\nflags";
  for (const std::string& f : flags) key_text += " " + f;
  const std::string name = "/pch-" + sha256_hex(key_text).substr(0, 16);
  const std::string gch_in_dir = "/tessera_cpu/tessera_cpu.h.gch";
  auto present = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
  };
  // The one tessera-prebuild made when Tessera was built, when it matches.
  if (!prebuilt_dir.empty() && present(prebuilt_dir + name + gch_in_dir)) return prebuilt_dir + name;
  const std::string dir = cache_dir + name;
  const std::string gch = dir + gch_in_dir;

  static std::mutex m;
  static std::set<std::string> ready;
  std::lock_guard<std::mutex> lock(m);
  if (ready.count(gch) != 0) return dir;
  if (!present(gch)) {
    make_directories(dir + "/tessera_cpu");
    // Built under a temporary name and renamed: another process sees a
    // whole .gch or none (two may build it at once; either result is good).
    static std::atomic<unsigned> counter{0};
    const std::string tmp = gch + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    std::vector<std::string> argv{cxx.path};
    for (const std::string& f : flags)
      if (f != "-shared") argv.push_back(f);
    argv.insert(argv.end(), {"-I" + include_dir, "-x", "c++-header", include_dir + "/tessera_cpu/tessera_cpu.h", "-o",
                             tmp});
    const auto [rc, text] = run_logged(argv, tmp + ".log");
    if (rc != 0) {
      std::remove(tmp.c_str());
      raise_compile_failure(argv, rc, text, "the host tile headers (precompiled header)");
    }
    if (std::rename(tmp.c_str(), gch.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      std::remove(tmp.c_str());
      raise(ErrorCode::Compile, "cannot move '" + tmp + "' to '" + gch + "': " + why);
    }
  }
  ready.insert(gch);
  return dir;
}

void compile_shared_object(const HostCompiler& cxx, const std::vector<std::string>& flags,
                           const std::vector<std::string>& include_dirs, const std::string& source,
                           const std::string& output) {
  std::vector<std::string> argv{cxx.path};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& d : include_dirs) argv.push_back("-I" + d);
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(output);
  argv.push_back(libtessera_path());
  const auto [rc, text] = run_logged(argv, output + ".log");
  if (rc != 0) raise_compile_failure(argv, rc, text, source);
}

void compile_shared_object_from_parts(const HostCompiler& cxx, const std::vector<std::string>& flags,
                                      const std::vector<std::string>& include_dirs,
                                      const std::vector<std::string>& sources,
                                      const std::string& output, int jobs) {
  // The objects: the same flags without -shared, compiled only (-c).
  std::vector<std::string> objects;
  std::vector<std::vector<std::string>> commands;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    objects.push_back(output + ".part" + std::to_string(i) + ".o");
    std::vector<std::string> argv{cxx.path};
    for (const std::string& f : flags)
      if (f != "-shared") argv.push_back(f);
    for (const std::string& d : include_dirs) argv.push_back("-I" + d);
    argv.insert(argv.end(), {"-c", sources[i], "-o", objects.back()});
    commands.push_back(std::move(argv));
  }
  auto remove_objects = [&] {
    for (const std::string& o : objects) std::remove(o.c_str());
  };
  std::vector<std::pair<int, std::string>> results(sources.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < commands.size(); i = next++) results[i] = run_logged(commands[i], objects[i] + ".log");
  };
  {
    std::vector<std::thread> threads;
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), sources.size());
    for (std::size_t t = 1; t < n; ++t) threads.emplace_back(worker);
    worker();
    for (std::thread& t : threads) t.join();
  }
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (results[i].first != 0) {
      remove_objects();
      raise_compile_failure(commands[i], results[i].first, results[i].second, sources[i]);
    }
  }
  std::vector<std::string> link{cxx.path, "-shared", "-fPIC", "-o", output};
  link.insert(link.end(), objects.begin(), objects.end());
  link.push_back(libtessera_path());
  const auto [rc, text] = run_logged(link, output + ".log");
  remove_objects();
  if (rc != 0) raise_compile_failure(link, rc, text, "the link of " + output);
}

int compile_jobs() {
  if (const char* v = std::getenv("TESSERA_CPU_COMPILE_JOBS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > 64) {
      raise(ErrorCode::ArgumentInvalid,
            std::string("TESSERA_CPU_COMPILE_JOBS is '") + v + "'; expected a number of compiler processes from 1 to 64");
    }
    return static_cast<int>(n);
  }
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
}

std::string libtessera_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&libtessera_path), &info) == 0 || info.dli_fname == nullptr) {
    raise(ErrorCode::Internal, "cannot locate libtessera's file to link generated kernels against");
  }
  char* real = ::realpath(info.dli_fname, nullptr);
  std::string path = real != nullptr ? real : info.dli_fname;
  std::free(real);
  return path;
}

}  // namespace tessera::cpu::detail
