// lab/files.h: reading and writing whole files, so that every reader and writer of the lab and the
// CLI fails the same clear way.
//
// Reading: only regular files (a FIFO would block, /dev/zero never ends), refused before anything
// is allocated when over a size cap. Writing: into PATH.tmp, checked through the final flush and
// close, then renamed over PATH, so a full disk or a failed write leaves no partial file; an
// existing non-regular PATH (/dev/stdout, /dev/full) is written directly, and checked the same.
#pragma once
#include <cstdint>
#include <string>

namespace posenc::lab {

// what: the caller's name in errors ("corpus", "--out"); max_bytes: the cap.
std::string read_regular_file(const std::string& what, const std::string& path, int64_t max_bytes);
void write_file(const std::string& what, const std::string& path, const std::string& bytes);

}  // namespace posenc::lab
