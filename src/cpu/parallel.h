// src/cpu/parallel.h: the one threading primitive of the CPU backend (the pool of
// include/posenc/threads.h, src/cpu/parallel.cc). Work is split into fixed chunks that do not
// depend on the thread count, so any reduction done per chunk and combined in chunk order gives
// the same bits with 1 or 64 threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace posenc::cpu {

// Runs call(context, i) for i in [0, n) on the pool; returns when all are done (threads.h).
void run_tasks(int64_t n, void (*call)(void* context, int64_t i), void* context);

// Rows per chunk so that a chunk carries ~64k units of work (amortises scheduling, keeps balance).
inline int64_t chunk_rows(int64_t rows, int64_t work_per_row) {
  const int64_t target = 1 << 16;
  return std::clamp<int64_t>(target / std::max<int64_t>(work_per_row, 1), 1, std::max<int64_t>(rows, 1));
}

// fn(i) for i in [0, n), one task each (for work already coarse, like one head).
template <typename Fn>
void parallel_for(int64_t n, Fn&& fn) {
  if (n <= 0) return;
  if (n == 1) {
    fn(int64_t{0});
    return;
  }
  using F = std::remove_reference_t<Fn>;
  run_tasks(
      n, [](void* f, int64_t i) { (*static_cast<F*>(f))(i); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

// fn(begin, end) over [0, rows) in chunks, in parallel. Small jobs run on the calling thread.
template <typename Fn>
void parallel_chunks(int64_t rows, int64_t work_per_row, Fn&& fn) {
  if (rows <= 0) return;
  const int64_t step = chunk_rows(rows, work_per_row);
  const int64_t chunks = (rows + step - 1) / step;
  parallel_for(chunks, [&](int64_t c) { fn(c * step, std::min(rows, (c + 1) * step)); });
}

}  // namespace posenc::cpu
