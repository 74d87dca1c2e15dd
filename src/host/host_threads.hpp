// How the host loops (quantize, dequantize, unswizzle) spread one call over threads. The policy, which
// the header documents for callers:
//
//   - MXFP8_HOST_THREADS=N, a positive integer, allows at most N threads per call; 1 runs everything on
//     the caller's thread (for callers that run their own pool). Unset, empty or anything else: no limit
//     beyond the next rule. Read (one getenv) by every call that would split.
//   - Never more threads than the cores the calling thread may run on (sched_getaffinity), and never more
//     than one per kMinBytesPerThread (2 MiB) of memory the call moves, so small calls stay on the
//     caller's thread. MXFP8_HOST_MIN_BYTES_PER_THREAD=B (a non-negative integer) replaces the 2 MiB; 0
//     splits every call of two or more units (the tests use it to run small odd shapes threaded). Read
//     by every call of two or more units.
//   - The caller's thread does one share of the work; the others run on std::threads started for the call
//     and joined before it returns. The work is split statically into contiguous ranges of units (rows,
//     or 32-row blocks where a block's scale spans rows), as equal as the unit count allows.
//
// Threads are started per call rather than kept in a pool: at the sizes that reach the threshold one call
// takes milliseconds, and starting and joining a thread costs tens of microseconds (bench/LOG.md, host).
#pragma once

#include <cstdint>
#include <functional>

namespace mxfp8 {

// Below this many bytes (read + written) per thread a call is not split further: a thread's start and
// join (tens of microseconds) would then be a noticeable share of its work (bench/LOG.md, host).
constexpr int64_t kMinBytesPerThread = int64_t{2} << 20;

// The number of threads the policy gives a call of `units` units moving `bytes` bytes (at least 1).
int host_threads_for(int64_t units, int64_t bytes);

// Runs body(begin, end) over contiguous ranges covering [0, units), one range per thread, with
// host_threads_for(units, bytes) threads. Returns when every range is done. If a range throws, the first
// exception (by range order) is rethrown here, on the caller's thread, after every thread has joined; if a
// thread cannot be started, its range runs on the caller's thread.
void parallel_ranges(int64_t units, int64_t bytes, const std::function<void(int64_t, int64_t)> &body);

// The same for any callable: the std::function holds a reference to `body` (kept in place, never on the
// heap), where a lambda of more than two captures would be copied to a heap allocation at every call,
// once per job when a call runs many small jobs (a grouped export of tiny experts: one per expert).
template <class Body>
void parallel_for(int64_t units, int64_t bytes, const Body &body) {
  parallel_ranges(units, bytes, std::cref(body));
}

}  // namespace mxfp8
