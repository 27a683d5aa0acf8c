// tests/test_threads.cc: the CPU backend's pool (include/posenc/threads.h, src/cpu/parallel.cc):
// every task exactly once for any thread count, nested and concurrent calls, exceptions, the
// thread-count setting and its bounds, pools built and torn down back to back, and a fork.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "posenc/threads.h"
#include "test_util.h"

namespace posenc::test {
namespace {

// Each index's count after parallel_for(n): exactly one each.
void expect_each_once(int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " i " << i;
}

TEST(Threads, EveryTaskExactlyOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 100000}) expect_each_once(n);
  }
  set_num_threads(0);
}

TEST(Threads, ChunksCoverTheRowsInFixedPieces) {
  for (int threads : {1, 4}) {
    set_num_threads(threads);
    std::vector<std::atomic<int>> hits(100003);
    std::atomic<int64_t> chunks{0};
    parallel_chunks(100003, 7, [&](int64_t begin, int64_t end) {
      ASSERT_LT(begin, end);
      chunks.fetch_add(1);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
    EXPECT_EQ(chunks.load(), (100003 + 9362 - 1) / 9362);  // 65536 / 7 rows a chunk, whatever the threads
  }
  set_num_threads(0);
}

TEST(Threads, NestedCallsRunInline) {
  set_num_threads(4);
  std::atomic<int64_t> sum{0};
  parallel_for(16, [&](int64_t i) { parallel_for(16, [&](int64_t j) { sum.fetch_add(i * 16 + j); }); });
  EXPECT_EQ(sum.load(), 256 * 255 / 2);
  set_num_threads(0);
}

TEST(Threads, ConcurrentCallersEachGetEveryTask) {
  set_num_threads(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        std::atomic<int64_t> count{0};
        parallel_for(50, [&](int64_t) { count.fetch_add(1); });
        if (count.load() != 50) failures.fetch_add(1);
      }
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  set_num_threads(0);
}

TEST(Threads, TheFirstExceptionReachesTheCallerAfterEveryTask) {
  set_num_threads(4);
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(100,
                            [&](int64_t i) {
                              ran.fetch_add(1);
                              if (i % 10 == 3) throw std::runtime_error("task failed");
                            }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
  expect_each_once(1000);  // the pool is usable afterwards
  set_num_threads(0);
}

TEST(Threads, ManyTinyRegionsAndPoolRebuilds) {
  // The lab's pattern (thousands of small regions), and pools torn down right after being built:
  // a worker starting after the destructor's stop must still see it (a hang found while writing).
  for (int k = 0; k < 200; ++k) {
    set_num_threads(1 + k % 4);
    std::atomic<int64_t> count{0};
    for (int r = 0; r < 20; ++r) parallel_for(3, [&](int64_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 60);
  }
  for (int k = 0; k < 100; ++k) set_num_threads(1 + k % 4);  // built lazily: nothing to run
  set_num_threads(0);
}

TEST(Threads, BadThreadCountsAreRefused) {
  expect_error([] { set_num_threads(-1); }, "set_num_threads: n = -1 is invalid: must be in [0, 1024]");
  expect_error([] { set_num_threads(1025); }, "n = 1025 is invalid");
}

TEST(Threads, AForkedChildBuildsItsOwnPool) {
  set_num_threads(3);
  expect_each_once(1000);  // the parent's pool exists
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::atomic<int64_t> count{0};
    parallel_for(1000, [&](int64_t) { count.fetch_add(1); });
    _exit(count.load() == 1000 && num_threads() == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  set_num_threads(0);
}

}  // namespace
}  // namespace posenc::test
