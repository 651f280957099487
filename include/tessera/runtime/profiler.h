// The profiler behind `with tessera.profile("trace.json"):`.
//
// While active, every compiled executable records, for each kernel launch,
// its name, the function and Graph IR ops it came from, the device, its time
// (wall time on the CPU, whose launches are synchronous; CUDA events on a
// GPU, read when the profiler stops), the bytes its operands and results
// occupy, and an estimate of its floating-point work; and every executable
// compile records its duration. stop() returns the records; the Python side
// writes the Chrome/Perfetto trace, the summary table and the roofline plot.
//
// Bytes are the sizes of a kernel's inputs and outputs (each read or written
// once: the least traffic the kernel can make). FLOPs are 2*M*N*K for a GEMM
// and, for other kernels, the element count of their largest operand times
// the number of Graph IR ops fused into them (an estimate; docs/guide/profiler.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::profiler {

struct Record {
  std::string kind;      // "kernel", "graph" (a CUDA graph replay) or "compile"
  std::string name;      // kernel name (k0, ...), or the function for graph replays and compiles
  std::string function;  // the executable's function
  std::string ops;       // the Graph IR ops of the kernel, joined by '+'
  std::string family;    // elementwise, gemm, ...
  std::string device;    // "cpu" or "cuda:N"
  double start_us = 0.0;  // from the profiler's start
  double duration_us = 0.0;
  double bytes = 0.0;
  double flops = 0.0;
  bool cache_hit = false;  // compiles: every kernel came from a cache
};

bool active();
// Starts recording (a second start while active is an ArgumentError).
void start();
// Stops, waits for the GPU work it timed, and returns the records in start order.
std::vector<Record> stop();

// One timed span, opened before a launch and closed after it (the executable
// calls these only while active()).
class Span {
 public:
  Span(Record record);  // record.kind, names, bytes, flops; device set
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // Closes the span: the CPU's wall time, or an end event on the GPU.
  void end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A compile that took `seconds`, ending now.
void record_compile(const std::string& function, const std::string& device, std::size_t kernels, bool cache_hit,
                    double seconds);

// Peak memory bandwidth of a device in GB/s (from its memory clock and bus
// width on a GPU); 0 when unknown (the CPU).
double peak_bandwidth_gbs(const std::string& device);

}  // namespace tessera::profiler
