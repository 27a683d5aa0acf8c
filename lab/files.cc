// lab/files.cc: see files.h.
#include "files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "posenc/error.h"

namespace posenc::lab {

std::string read_regular_file(const std::string& what, const std::string& path, int64_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(what + ": cannot open '" + path + "'");
  if (!S_ISREG(st.st_mode)) throw Error(what + ": '" + path + "' is not a regular file");
  if (st.st_size > max_bytes)
    throw Error(what + ": '" + path + "' has " + std::to_string(st.st_size) +
                " bytes, more than the limit of " + std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + ": cannot open '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(what + ": reading '" + path + "' failed");
  return text.str();
}

namespace {
// Writes and closes; returns "" or the reason (errno's text) it failed.
std::string write_and_close(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return std::strerror(errno);
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written) return std::strerror(write_errno);
  if (!closed) return std::strerror(errno);
  return "";
}
}  // namespace

void write_file(const std::string& what, const std::string& path, const std::string& bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const std::string failed = write_and_close(path, bytes);
    if (!failed.empty()) throw Error(what + ": writing '" + path + "' failed: " + failed);
    return;
  }
  const std::string tmp = path + ".tmp";
  const std::string failed = write_and_close(tmp, bytes);
  if (!failed.empty()) {
    std::remove(tmp.c_str());
    throw Error(what + ": writing '" + path + "' failed: " + failed);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(what + ": cannot rename '" + tmp + "' to '" + path + "': " + reason);
  }
}

}  // namespace posenc::lab
