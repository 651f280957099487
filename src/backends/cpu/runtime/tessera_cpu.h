// Host tile library: the one header a generated CPU kernel includes.
//
// Pulls in the ABI, numerics, memory and tile primitives, and provides
// run_groups(), the body of every kernel's exported entry point: it gives each
// group a zeroed shared arena, runs the groups of its range in increasing
// order and turns a fault (or any exception) into a Fault record, so no
// exception crosses the shared object's C interface.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "tessera_cpu/abi.h"
#include "tessera_cpu/fault.h"
#include "tessera_cpu/memory.h"
#include "tessera_cpu/numerics.h"
#include "tessera_cpu/tile.h"

namespace tessera_cpu {

inline void record_fault(Fault* f, std::int64_t group, int code, const char* message) {
  f->group = group;
  f->code = code;
  std::snprintf(f->message, sizeof f->message, "%s", message);
}

// The calling thread's shared arena of at least `bytes` (a multiple of 128),
// kept between launches: a fresh allocation per launch cost more than a small
// kernel's work (arenas past the allocator's mmap threshold came back as new
// pages, faulted in on every call). It only grows; nullptr when out of memory.
inline unsigned char* thread_arena(std::size_t bytes) noexcept {
  struct Arena {
    unsigned char* data = nullptr;
    std::size_t size = 0;
    ~Arena() { std::free(data); }
  };
  thread_local Arena arena;
  if (arena.size < bytes) {
    std::free(arena.data);
    arena.data = static_cast<unsigned char*>(std::aligned_alloc(128, bytes));
    arena.size = arena.data ? bytes : 0;
  }
  return arena.data;
}

// Runs groups [begin, end) of one launch with `body(args, group, arena)`.
template <class Body>
inline int run_groups(const LaunchArgs* args, std::int64_t begin, std::int64_t end, Fault* fault,
                      std::size_t shared_bytes, Body body) noexcept {
  std::int64_t group = begin;
  const std::size_t arena_bytes = ((shared_bytes + 127) / 128) * 128 + 128;
  unsigned char* arena = thread_arena(arena_bytes);
  if (arena == nullptr) {
    record_fault(fault, begin, kFaultInternal, "out of memory allocating the shared arena");
    return 1;
  }
  int status = 0;
  try {
    for (; group < end; ++group) {
      // Shared memory starts zeroed so a kernel's results never depend on
      // what an earlier group left behind.
      std::memset(arena, 0, arena_bytes);
      body(*args, group, arena);
    }
  } catch (const KernelFault& f) {
    record_fault(fault, group, f.code, f.message);
    status = 1;
  } catch (const std::exception& e) {
    record_fault(fault, group, kFaultInternal, e.what());
    status = 1;
  } catch (...) {
    record_fault(fault, group, kFaultInternal, "unknown exception in generated kernel code");
    status = 1;
  }
  return status;
}

// Runs groups [begin, end) of a batched kernel (groups of one tile without
// group-level ops, no shared memory) with one call `body(args, begin, end,
// current_group)`: the groups are the iterations of one lane loop. The body
// keeps current_group at the group a fault belongs to.
template <class Body>
inline int run_batch(const LaunchArgs* args, std::int64_t begin, std::int64_t end, Fault* fault, Body body) noexcept {
  std::int64_t group = begin;
  try {
    body(*args, begin, end, group);
    return 0;
  } catch (const KernelFault& f) {
    record_fault(fault, group, f.code, f.message);
  } catch (const std::exception& e) {
    record_fault(fault, group, kFaultInternal, e.what());
  } catch (...) {
    record_fault(fault, group, kFaultInternal, "unknown exception in generated kernel code");
  }
  return 1;
}

}  // namespace tessera_cpu

// Short name for generated code.
namespace tsr = tessera_cpu;
