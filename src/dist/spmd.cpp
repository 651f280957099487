// SPMD workers (tessera/dist/spmd.h).
#include "tessera/dist/spmd.h"

#include <exception>
#include <thread>
#include <vector>

#include "tessera/support/error.h"

namespace tessera::dist {

void run_spmd(std::size_t n, const std::function<void(std::size_t)>& body,
              const std::function<void(std::size_t, const std::string&)>& on_failure) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<bool> collective(n, false);
  auto work = [&](std::size_t rank) {
    try {
      body(rank);
    } catch (const Error& e) {
      errors[rank] = std::current_exception();
      collective[rank] = e.code() == ErrorCode::Collective;
      on_failure(rank, e.what());
    } catch (const std::exception& e) {
      errors[rank] = std::current_exception();
      on_failure(rank, e.what());
    } catch (...) {
      errors[rank] = std::current_exception();
      on_failure(rank, "an unknown exception");
    }
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (std::size_t r = 0; r < n; ++r) threads.emplace_back(work, r);
    for (std::thread& t : threads) t.join();
  }
  for (std::size_t r = 0; r < n; ++r)
    if (errors[r] && !collective[r]) std::rethrow_exception(errors[r]);
  for (std::size_t r = 0; r < n; ++r)
    if (errors[r]) std::rethrow_exception(errors[r]);
}

}  // namespace tessera::dist
