// tools/memory.h: the CLI's checks of its size arguments, made before anything is allocated:
// each size lies in its range, and what the sizes ask for together fits in this machine's memory.
// Linux overcommits, so an allocation larger than the memory may succeed and the process be killed
// later, or fail as std::bad_alloc with no word of which argument did it.
#pragma once
#include <cstdint>
#include <string>

namespace posenc::tools {

// The largest size any argument may take: 2^53, the largest integer counted exactly in double, in
// which require_memory multiplies sizes (2^53 floats are 32 PiB: memory refuses far less).
constexpr int64_t kMaxSize = int64_t{1} << 53;

// Throws posenc::Error "FLAG = VALUE is invalid: must be in [MIN, MAX] (MEANING)" unless
// min <= value <= max; `meaning` says what a special value means, e.g. "0 = --seq".
void require_size(const std::string& flag, int64_t value, int64_t min = 1, int64_t max = kMaxSize,
                  const std::string& meaning = "");

double physical_memory_bytes();  // sysconf: pages x page size
// Throws posenc::Error "WHAT needs X GiB, more than this machine's Y GiB of memory" when bytes
// (counted in double, so no product of arguments overflows) exceed the physical memory.
void require_memory(const std::string& what, double bytes);

}  // namespace posenc::tools
