// TESSERA_CRASH_TRACE (set, not 0): a fatal signal in the process (a segmentation fault
// in native code) prints the native call stack to standard error before the
// process dies, for the GPU machines, which have no debugger.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "bindings.h"

namespace tessera::python {
namespace {

void print_stack(int sig) {
  const char header[] = "\n== tessera: fatal signal, native stack:\n";
  (void)!write(2, header, sizeof(header) - 1);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_crash_trace() {
  const char* v = std::getenv("TESSERA_CRASH_TRACE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT}) signal(sig, print_stack);
}

}  // namespace tessera::python
