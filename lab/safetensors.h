// lab/safetensors.h: checkpoints in the safetensors format (huggingface/safetensors), so a model
// trained by the lab can be opened from Python with `safetensors.numpy.load_file`.
//
//   [u64 little-endian N][N bytes of JSON header, space-padded][data buffer]
//   header: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "value", ...}}   offsets relative to the data buffer
//
// Loading validates everything and names the problem: the header length against the file size, the
// JSON, every entry's dtype, shape and offsets (inside the buffer, of the size the shape needs,
// covering the buffer with no hole or overlap). Saving writes a temporary file and renames it, so a
// failed save leaves no partial checkpoint. Tensors are float32 (the lab's storage type).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace posenc::lab {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, product(shape) elements
};

struct Checkpoint {
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;  // in file order (by offset)
  // The tensor called `name` with this shape; throws naming what differs.
  const NamedTensor& get(const std::string& name, const std::vector<int64_t>& shape) const;
};

void save_safetensors(const std::string& path, const Checkpoint& checkpoint);
// Reads a regular file of at most kMaxSafetensorsBytes (the lab's checkpoints are below 100 MB).
Checkpoint load_safetensors(const std::string& path);
inline constexpr int64_t kMaxSafetensorsBytes = int64_t{4} << 30;
// The same on bytes in memory (what the file functions use; handy for tests).
std::string encode_safetensors(const Checkpoint& checkpoint);
Checkpoint decode_safetensors(const std::string& bytes, const std::string& origin = "safetensors");

}  // namespace posenc::lab
