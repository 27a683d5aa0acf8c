// tests/test_safetensors.cc: the lab's checkpoint format: round trips, the exact bytes the
// safetensors spec prescribes, and a clear error (never a crash) for each kind of corrupt file.
#include <cstdio>
#include <cstring>
#include <fstream>

#include "safetensors.h"
#include "test_util.h"

namespace posenc::lab {
namespace {
using test::expect_error;

Checkpoint sample() {
  Checkpoint c;
  c.metadata = {{"encoding", "rope"}, {"step", "100"}};
  c.tensors.push_back({"wte", {3, 2}, {1, 2, 3, 4, 5, 6}});
  c.tensors.push_back({"ln.bias", {2}, {-0.5f, 0.25f}});
  c.tensors.push_back({"empty", {0, 4}, {}});
  return c;
}

// A file built by hand: header length, JSON, data, exactly as the format defines them.
std::string by_hand(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}
std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(Safetensors, RoundTripThroughAFile) {
  const std::string path = ::testing::TempDir() + "/posenc_roundtrip.safetensors";
  save_safetensors(path, sample());
  const Checkpoint c = load_safetensors(path);
  EXPECT_EQ(c.metadata, sample().metadata);
  ASSERT_EQ(c.tensors.size(), 3u);
  EXPECT_EQ(c.get("wte", {3, 2}).data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c.get("ln.bias", {2}).data, (std::vector<float>{-0.5f, 0.25f}));
  EXPECT_TRUE(c.get("empty", {0, 4}).data.empty());
  expect_error([&] { c.get("wte", {2, 3}); }, "tensor 'wte' has shape [3, 2], expected [2, 3]");
  expect_error([&] { c.get("wpe", {1}); }, "no tensor named 'wpe'");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // data 8-byte aligned, header padded with spaces
  EXPECT_EQ(bytes.size(), 8 + n + 8 * 4);
  std::remove(path.c_str());
}

TEST(Safetensors, ReadsAHandBuiltFile) {
  const std::string json =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})";
  const Checkpoint c = decode_safetensors(by_hand(json + "  ", floats({1.5f, -2, 7})));
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].name, "a");  // file order, by offset
  EXPECT_EQ(c.tensors[0].data, (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(c.tensors[1].data, (std::vector<float>{7}));
  EXPECT_EQ(c.metadata.at("format"), "pt");
}

TEST(Safetensors, CorruptFilesGiveClearErrors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = floats({1, 2});
  expect_error([&] { decode_safetensors("abc"); }, "too short");
  std::string huge = by_hand(ok, data);
  huge[5] = 1;  // header length ~2^40
  expect_error([&] { decode_safetensors(huge); }, "exceeds the 100 MiB limit");
  std::string past = by_hand(ok, data);
  past[0] = static_cast<char>(200);
  expect_error([&] { decode_safetensors(past); }, "runs past the end of the file");
  expect_error([&] { decode_safetensors(by_hand("[1, 2]  ", data)); }, "does not start with '{'");
  expect_error([&] { decode_safetensors(by_hand(R"({"a": )", data)); }, "not valid JSON");
  expect_error(
      [&] { decode_safetensors(by_hand(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", data)); },
      "dtype F16 is not supported");
  expect_error(
      [&] { decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data)); },
      "shape [3] needs 12 bytes, data_offsets give 8");
  expect_error(
      [&] {
        decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data));
      },
      "outside the 8-byte data buffer");
  expect_error(
      [&] {
        decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", data));
      },
      "shape [-1] is invalid");
  expect_error(
      [&] { decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data)); },
      "bytes [0, 4) before tensor 'a' belong to no tensor");
  expect_error(
      [&] { decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data)); },
      "bytes [4, 8) at the end belong to no tensor");
  expect_error(
      [&] {
        decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                   data));
      },
      "overlaps");
  expect_error([&] { decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[2]}})", data)); },
               "has no 'data_offsets'");
  expect_error(
      [&] {
        decode_safetensors(by_hand(
            R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
      },
      "__metadata__['k'] is not a string");
  expect_error([] { load_safetensors("/nonexistent/x.safetensors"); },
               "cannot open '/nonexistent/x.safetensors'");
}

// Hostile headers found by fuzzing (fuzz/fuzz_safetensors.cc; the inputs are in fuzz/corpus/safetensors):
// each is an Error, not another exception type, a stack overflow or a wrapped size.
TEST(Safetensors, HostileHeadersAreErrors) {
  const std::string data = floats({1, 2});
  // nlohmann reports 1e400 as out_of_range, which escaped the catch of parse_error.
  expect_error(
      [&] {
        decode_safetensors(by_hand(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", data));
      },
      "header is not valid JSON");
  // 100,000 nested lists: dump() in the error message recursed once per level.
  const std::string deep = R"({"a":{"dtype":"F32","shape":)" + std::string(100000, '[') +
                           std::string(100000, ']') + R"(,"data_offsets":[0,8]}})";
  expect_error([&] { decode_safetensors(by_hand(deep, data)); },
               "nests objects and arrays more than 16 levels");
  // [2^62] with empty offsets: elements * 4 wrapped to 0 bytes, passed, then resize threw length_error.
  expect_error(
      [&] {
        decode_safetensors(
            by_hand(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", ""));
      },
      "tensor 'a': shape [4611686018427387904] has more than 2^60 elements");
  expect_error(
      [&] {
        decode_safetensors(
            by_hand(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648,4],"data_offsets":[0,0]}})", ""));
      },
      "has more than 2^60 elements");
  expect_error(
      [&] {
        decode_safetensors(
            by_hand(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", data));
      },
      "shape [18446744073709551615] is invalid");
  // A tensor named "" loaded but could not be saved again.
  expect_error(
      [&] { decode_safetensors(by_hand(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data)); },
      "a tensor has the empty name ''");
  // Long values are quoted as an excerpt.
  expect_error(
      [&] {
        decode_safetensors(by_hand(
            R"({"a":{"dtype":"F32","shape":")" + std::string(5000, 'x') + R"(","data_offsets":[0,8]}})",
            data));
      },
      "characters) is not an array");
  // A directory (or a FIFO, or /dev/zero) is not read: only regular files.
  expect_error([] { load_safetensors(::testing::TempDir()); }, "is not a regular file");
}

TEST(Safetensors, BadCheckpointsAreNotWritten) {
  const std::string path = ::testing::TempDir() + "/posenc_bad.safetensors";
  std::remove(path.c_str());
  Checkpoint c = sample();
  c.tensors[0].data.pop_back();  // 5 values for shape [3, 2]
  expect_error([&] { save_safetensors(path, c); }, "tensor 'wte' has shape [3, 2] but 5 values");
  EXPECT_FALSE(std::ifstream(path).good());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  c = sample();
  c.tensors.push_back(c.tensors[0]);
  expect_error([&] { save_safetensors(path, c); }, "appears twice");
  // 2^32 x 2^32 elements wrapped to 0 = data.size(): the header was written, and refused on loading.
  c = sample();
  c.tensors.push_back({"huge", {int64_t{1} << 32, int64_t{1} << 32}, {}});
  expect_error([&] { save_safetensors(path, c); },
               "tensor 'huge' has shape [4294967296, 4294967296], more than 2^60");
  EXPECT_FALSE(std::ifstream(path).good());
}

}  // namespace
}  // namespace posenc::lab
