// posenc/threads.h: the CPU backend's threads.
//
// Every kernel splits its work into chunks fixed by the problem (never by the thread count, so
// results are bitwise the same on 1 thread or 64), and the threads claim chunks as they run: the
// calling thread works too, and a call returns once every chunk is done, without waiting for a
// thread that never got a core to start. On a machine shared with other processes (a second
// session's busy loop takes a core whatever the nice level: Linux autogroup scheduling), a
// descheduled thread therefore delays only a chunk it has already claimed (BENCHMARKS.md, "A
// shared machine").
#pragma once
#include <cstdint>
#include <functional>

namespace posenc {

// The threads a parallel call uses, the caller included. Default: POSENC_NUM_THREADS, else
// OMP_NUM_THREADS (the first number of a list), else the CPUs this process may run on
// (sched_getaffinity). set_num_threads(0) restores the default; n must be in [0, 1024]. Call it
// between parallel calls, not during one.
void set_num_threads(int n);
int num_threads();

// fn(i) for every i in [0, n), on the pool. Calls made from inside fn, or from a second thread
// while the pool is busy, run on the calling thread alone. The first exception thrown by fn is
// rethrown to the caller once every started task has finished.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);
// fn(begin, end) over [0, rows) in chunks of about 64k units of work (rows x work_per_row),
// fixed by the sizes alone; one chunk runs on the calling thread without waking the pool.
void parallel_chunks(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace posenc
