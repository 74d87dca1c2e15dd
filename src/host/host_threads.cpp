// The thread policy of the host loops; see host_threads.hpp.
#include "host/host_threads.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace mxfp8 {
namespace {

// The cores the calling thread may run on; threads it starts inherit the same mask.
int available_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

// The environment variable `name` as an integer >= `least`, or -1 when unset or not one.
long integer_from_environment(const char *name, long least) {
  const char *text = std::getenv(name);
  if (!text || !*text) return -1;
  errno = 0;
  char *end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || n < least) return -1;
  return n;
}

}  // namespace

int host_threads_for(int64_t units, int64_t bytes) {
  if (units < 2) return 1;
  const long min_bytes = integer_from_environment("MXFP8_HOST_MIN_BYTES_PER_THREAD", 0);
  const int64_t by_size = min_bytes == 0 ? units : bytes / (min_bytes > 0 ? min_bytes : kMinBytesPerThread);
  if (by_size < 2) return 1;  // small calls pay for neither the syscall nor the threads
  int64_t threads = std::min<int64_t>({available_cores(), units, by_size});
  const long limit = integer_from_environment("MXFP8_HOST_THREADS", 1);
  if (limit > 0) threads = std::min<int64_t>(threads, limit);
  return static_cast<int>(std::max<int64_t>(1, threads));
}

void parallel_ranges(int64_t units, int64_t bytes, const std::function<void(int64_t, int64_t)> &body) {
  const int threads = host_threads_for(units, bytes);
  if (threads == 1) return body(0, units);
  auto begin_of = [&](int t) { return units * t / threads; };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run_range = [&](int t) {
    try {
      body(begin_of(t), begin_of(t + 1));
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  std::vector<int> not_started;
  workers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(run_range, t);
    } catch (...) {  // out of threads (or memory for one): this range runs here instead
      not_started.push_back(t);
    }
  }
  run_range(0);
  for (int t : not_started) run_range(t);
  for (std::thread &w : workers) w.join();
  for (const std::exception_ptr &e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mxfp8
