// tools/memory.cc: see memory.h.
#include "memory.h"

#include <unistd.h>

#include <cstdio>

#include "posenc/error.h"

namespace posenc::tools {

void require_size(const std::string& flag, int64_t value, int64_t min, int64_t max,
                  const std::string& meaning) {
  if (value >= min && value <= max) return;
  auto bound = [](int64_t b) { return b == kMaxSize ? std::string("2^53") : std::to_string(b); };
  throw Error(flag + " = " + std::to_string(value) + " is invalid: must be in [" + bound(min) + ", " +
              bound(max) + "]" + (meaning.empty() ? "" : " (" + meaning + ")"));
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

void require_memory(const std::string& what, double bytes) {
  const double have = physical_memory_bytes();
  if (have <= 0 || bytes <= have) return;
  char line[160];
  std::snprintf(line, sizeof line, " needs %.3g GiB, more than this machine's %.1f GiB of memory",
                bytes / (1 << 30), have / (1 << 30));
  throw Error(what + line);
}

}  // namespace posenc::tools
