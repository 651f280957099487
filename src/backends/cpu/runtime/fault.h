// Host tile library: faults raised by generated code (bounds, division by zero).
//
// Generated code reports a fault by throwing KernelFault inside the shared
// object; the group driver (tessera_cpu.h) catches it and copies the message
// into the launch's Fault record, and libtessera's launcher raises it as a
// tessera error in the caller. Exceptions never cross the C entry points.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace tessera_cpu {

inline constexpr int kFaultIndex = 1;
inline constexpr int kFaultArgument = 2;
inline constexpr int kFaultInternal = 3;

struct KernelFault {
  int code;
  char message[1024];
};

[[noreturn]] __attribute__((format(printf, 2, 3), noinline, cold)) inline void fail(int code, const char* format, ...) {
  KernelFault f;
  f.code = code;
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(f.message, sizeof f.message, format, ap);
  va_end(ap);
  throw f;
}

}  // namespace tessera_cpu
