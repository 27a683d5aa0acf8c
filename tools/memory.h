// tools/memory.h: the CLI's check that what the arguments ask for fits in this machine's memory,
// made before allocating: Linux overcommits, so an allocation larger than the memory may succeed
// and the process be killed later, or fail as std::bad_alloc with no word of which argument did it.
#pragma once
#include <string>

namespace posenc::tools {

double physical_memory_bytes();  // sysconf: pages x page size
// Throws posenc::Error "WHAT needs X GiB, more than this machine's Y GiB of memory" when bytes
// (counted in double, so no product of arguments overflows) exceed the physical memory.
void require_memory(const std::string& what, double bytes);

}  // namespace posenc::tools
