// Streams and events: ordering of device work and its timing.
#include <utility>

#include "backends/cuda/driver_api.h"
#include "tessera/runtime/cuda.h"
#include "tessera/support/error.h"

namespace tessera::cuda {

using namespace detail;

namespace {

// A query's answer: false while the work is not done, true once it is; an
// error raises naming `what`.
bool finished(CUresult rc, const char* what) {
  if (rc == kCudaErrorNotReady) return false;
  check(rc, what);
  return true;
}

// Work queued on `stream` (null: the legacy default stream) of `device`
// after this waits for `event`, which may belong to another device.
void queue_wait(int device, CUstream stream, CUevent event) {
  use_device(device);
  check(driver().cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}

}  // namespace

Stream::Stream(int device) : device_(device) {
  use_device(device);
  CUstream stream = nullptr;
  // Non-blocking: no implicit ordering against the legacy default stream,
  // which synchronous copies use.
  check(driver().cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate");
  handle_ = stream;
}

Stream::~Stream() {
  if (handle_ == nullptr) return;
  // Destroying a stream with queued work is allowed: the driver finishes it.
  // A destructor must not throw; a failure here leaks one handle at most.
  try {
    use_device(device_);
    driver().cuStreamDestroy(static_cast<CUstream>(handle_));
  } catch (...) {
  }
}

Stream::Stream(Stream&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::move(*this));
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const {
  settle_watches(device_);
  use_device(device_);
  check(driver().cuStreamSynchronize(static_cast<CUstream>(handle_)), "cuStreamSynchronize");
}

bool Stream::idle() const {
  use_device(device_);
  return finished(driver().cuStreamQuery(static_cast<CUstream>(handle_)), "cuStreamQuery");
}

Event::Event(int device) : device_(device) {
  use_device(device);
  CUevent event = nullptr;
  check(driver().cuEventCreate(&event, kEventDefault), "cuEventCreate");
  handle_ = event;
}

Event::~Event() {
  if (handle_ == nullptr) return;
  try {
    use_device(device_);
    driver().cuEventDestroy(static_cast<CUevent>(handle_));
  } catch (...) {
  }
}

Event::Event(Event&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  if (stream.device() != device_) {
    raise(ErrorCode::ArgumentInvalid, "an event of cuda:" + std::to_string(device_) +
                                          " cannot record a stream of cuda:" + std::to_string(stream.device()));
  }
  use_device(device_);
  check(driver().cuEventRecord(static_cast<CUevent>(handle_), static_cast<CUstream>(stream.handle())), "cuEventRecord");
}

void Event::record_default_stream() {
  use_device(device_);
  check(driver().cuEventRecord(static_cast<CUevent>(handle_), nullptr), "cuEventRecord");
}

void Event::wait(const Stream* stream) const {
  if (stream != nullptr && stream->device() != device_) {
    raise(ErrorCode::ArgumentInvalid, "a stream of cuda:" + std::to_string(stream->device()) +
                                          " cannot wait for an event of cuda:" + std::to_string(device_));
  }
  queue_wait(device_, stream ? static_cast<CUstream>(stream->handle()) : nullptr, static_cast<CUevent>(handle_));
}

void Event::wait_on(int device) const {
  queue_wait(device, nullptr, static_cast<CUevent>(handle_));
}

bool Event::done() const {
  use_device(device_);
  return finished(driver().cuEventQuery(static_cast<CUevent>(handle_)), "cuEventQuery");
}

void Event::synchronize() const {
  settle_watches(device_);
  use_device(device_);
  check(driver().cuEventSynchronize(static_cast<CUevent>(handle_)), "cuEventSynchronize");
}

float elapsed_ms(const Event& start, const Event& end) {
  end.synchronize();
  float ms = 0.0f;
  check(driver().cuEventElapsedTime(&ms, static_cast<CUevent>(start.handle()), static_cast<CUevent>(end.handle())),
        "cuEventElapsedTime");
  return ms;
}

}  // namespace tessera::cuda
