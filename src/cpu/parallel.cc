// src/cpu/parallel.cc: the thread pool behind parallel.h and include/posenc/threads.h.
//
// Why not OpenMP: a parallel region ends at a barrier every thread of the team must reach, so
// when one thread waits for a core (another session's process took it) every region waits a
// scheduler time slice for it; the lab, which opens thousands of small regions per step, ran 23x
// slower at 2 threads beside one busy process than alone, 13x slower than at 1 thread (BENCHMARKS.md).
// Here a region is a counter of tasks that any thread claims: the caller claims too, and returns
// when every task is done. A worker that wakes late finds the counter exhausted (or the region
// gone) and goes back to sleep: it delays nothing it has not claimed. Workers spin briefly before
// sleeping so back-to-back regions do not pay a futex wake each.
#include "src/cpu/parallel.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <thread>
#include <vector>

#include "posenc/error.h"
#include "posenc/threads.h"

namespace posenc {
namespace cpu {
namespace {

constexpr int kMaxThreads = 1024;
// ~20-40 us of `pause` on current x86: longer than the gap between a kernel's regions, far
// shorter than a scheduler slice, so an idle pool costs a sharing process almost nothing.
constexpr int kSpins = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct Region {
  void (*call)(void*, int64_t) = nullptr;
  void* context = nullptr;
  int64_t n = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mutex;  // guards error; with finished, wakes a caller asleep in wait_done
  std::condition_variable finished;
  std::exception_ptr error;
};

// True on a pool worker, and on a caller while its region runs: nested calls run serially.
thread_local bool t_inside_region = false;

// Claims and runs tasks of r until none is left. Safe for a thread that arrives after the end:
// it claims an index >= n and touches nothing else.
void work_on(Region& r) {
  for (;;) {
    const int64_t i = r.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= r.n) return;
    try {
      r.call(r.context, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(r.mutex);
      if (!r.error) r.error = std::current_exception();
    }
    if (r.done.fetch_add(1, std::memory_order_acq_rel) + 1 == r.n) {
      { std::lock_guard<std::mutex> lock(r.mutex); }  // the caller is either before its check or asleep
      r.finished.notify_all();
    }
  }
}

class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this] { worker_loop(); });
  }
  ~Pool() {
    stop_.store(true, std::memory_order_release);
    publish();
    for (std::thread& w : workers_) w.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // False when another thread's region is running: the caller then runs its tasks alone.
  bool try_run(int64_t n, void (*call)(void*, int64_t), void* context) {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    auto region = std::make_shared<Region>();
    region->call = call, region->context = context, region->n = n;
    {
      std::lock_guard<std::mutex> lock(current_mutex_);
      current_ = region;
    }
    publish();
    t_inside_region = true;
    work_on(*region);
    wait_done(*region);
    t_inside_region = false;
    {
      std::lock_guard<std::mutex> lock(current_mutex_);
      current_.reset();
    }
    busy_.store(false, std::memory_order_release);
    if (region->error) std::rethrow_exception(region->error);
    return true;
  }

 private:
  // A new generation for the workers: those spinning see it; sleepers are woken (a condition
  // variable, whose lost-wake-up rule is easy to state). seq_cst on generation_ and sleepers_: a
  // worker that counted itself a sleeper after this read of sleepers_ re-checks generation_ and
  // sees the new value.
  void publish() {
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lock(sleep_mutex_); }
      wake_.notify_all();
    }
  }

  static void wait_done(Region& r) {
    for (int s = 0; s < kSpins; ++s) {
      if (r.done.load(std::memory_order_acquire) == r.n) return;
      cpu_relax();
    }
    std::unique_lock<std::mutex> lock(r.mutex);
    r.finished.wait(lock, [&] { return r.done.load(std::memory_order_acquire) == r.n; });
  }

  void worker_loop() {
    t_inside_region = true;
    // 0, the generation at construction, not a load: a worker that starts after the pool has
    // already published (a region, or the destructor's stop) must see that as new.
    uint32_t seen = 0;
    for (;;) {
      uint32_t now = generation_.load(std::memory_order_acquire);
      for (int s = 0; s < kSpins && now == seen; ++s) {
        cpu_relax();
        now = generation_.load(std::memory_order_acquire);
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
        now = generation_.load();
      }
      seen = now;
      if (stop_.load(std::memory_order_acquire)) return;
      std::shared_ptr<Region> region;
      {
        std::lock_guard<std::mutex> lock(current_mutex_);
        region = current_;
      }
      if (region) work_on(*region);
    }
  }

  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false}, busy_{false};
  std::mutex current_mutex_;
  std::shared_ptr<Region> current_;
};

int default_threads() {
  for (const char* name : {"POSENC_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);  // OMP_NUM_THREADS may be a list: "4,2"
    if (end != value && n >= 1) return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::mutex g_pool_mutex;
int g_requested = 0;  // 0: default_threads()
Pool* g_pool = nullptr;

// A forked child has none of the parent's threads: it forgets the pool (leaking it, since its
// workers cannot be joined) and builds a new one on first use.
void forget_pool_in_child() {
  new (&g_pool_mutex) std::mutex;
  g_pool = nullptr;
}

Pool* pool() {
  static const bool registered = [] { return pthread_atfork(nullptr, nullptr, forget_pool_in_child) == 0; }();
  (void)registered;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_pool == nullptr) g_pool = new Pool(g_requested > 0 ? g_requested : default_threads());
  return g_pool;
}

}  // namespace

void run_tasks(int64_t n, void (*call)(void*, int64_t), void* context) {
  if (n <= 0) return;
  if (n > 1 && !t_inside_region) {
    Pool* p = pool();
    if (p->threads() > 1 && p->try_run(n, call, context)) return;
  }
  for (int64_t i = 0; i < n; ++i) call(context, i);
}

}  // namespace cpu

void set_num_threads(int n) {
  if (n < 0 || n > cpu::kMaxThreads)
    throw Error("set_num_threads: n = " + std::to_string(n) +
                " is invalid: must be in [0, 1024] (0: the default)");
  std::lock_guard<std::mutex> lock(cpu::g_pool_mutex);
  cpu::g_requested = n;
  delete cpu::g_pool;
  cpu::g_pool = nullptr;
}

int num_threads() {
  std::lock_guard<std::mutex> lock(cpu::g_pool_mutex);
  if (cpu::g_pool != nullptr) return cpu::g_pool->threads();
  return cpu::g_requested > 0 ? cpu::g_requested : cpu::default_threads();
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) { cpu::parallel_for(n, fn); }

void parallel_chunks(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  cpu::parallel_chunks(rows, work_per_row, fn);
}

}  // namespace posenc
