// tests/test_lab_files.cc: lab/files.h, the readers and writers behind the corpus, the checkpoints,
// `posenc encode --output` and `posenc lab --out`: special files refused, caps before reading,
// write errors reported, nothing half-written.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "corpus.h"
#include "files.h"
#include "test_util.h"

namespace posenc::lab {
namespace {
using test::expect_error;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/posenc_files_" + name; }

TEST(LabFiles, ReadsRegularFilesWithinTheCap) {
  const std::string path = temp_path("ten");
  write_file("test", path, "0123456789");
  EXPECT_EQ(read_regular_file("test", path, 10), "0123456789");
  expect_error([&] { read_regular_file("test", path, 9); },
               "test: '" + path + "' has 10 bytes, more than the limit of 9");
  std::remove(path.c_str());
  expect_error([&] { read_regular_file("test", path, 9); }, "test: cannot open '" + path + "'");
}

TEST(LabFiles, RefusesSpecialFiles) {
  expect_error([] { read_regular_file("corpus", "/dev/zero", 1 << 20); },
               "'/dev/zero' is not a regular file");
  expect_error([] { read_regular_file("corpus", ::testing::TempDir(), 1 << 20); }, "is not a regular file");
  // A FIFO: opening it to read would block until a writer came.
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { read_regular_file("corpus", fifo, 1 << 20); }, "is not a regular file");
  expect_error([&] { load_corpus(fifo, 0.1); }, "corpus: '" + fifo + "' is not a regular file");
  std::remove(fifo.c_str());
  expect_error([] { load_corpus("/dev/zero", 0.1); }, "corpus: '/dev/zero' is not a regular file");
}

TEST(LabFiles, WriteErrorsAreReportedAndLeaveNothing) {
  // /dev/full accepts the open and fails the write (ENOSPC) at the flush.
  expect_error([] { write_file("--output", "/dev/full", std::string(100, 'x')); },
               "--output: writing '/dev/full' failed: No space left on device");
  const std::string missing_dir = temp_path("no_such_dir") + "/out.json";
  expect_error([&] { write_file("--out", missing_dir, "{}"); },
               "--out: writing '" + missing_dir + "' failed");
  EXPECT_FALSE(std::ifstream(missing_dir + ".tmp").good());
}

TEST(LabFiles, ReplacesAnExistingFileWhole) {
  const std::string path = temp_path("replace");
  write_file("test", path, std::string(1000, 'a'));
  write_file("test", path, "short");
  EXPECT_EQ(read_regular_file("test", path, 1 << 20), "short");
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace posenc::lab
