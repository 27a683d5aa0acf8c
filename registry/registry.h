// registry/registry.h: one entry per encoding, read by every tool. An entry is the library's
// catalogue line (posenc/encodings.h: name, alias, family, role, description, variants) plus what
// each tool computes with the encoding:
//   tabulate   `posenc encode`: the encoding's values for given positions (or query/key pairs)
//   analyze    `posenc analyze`: the four conditions of a good positional encoding judged on the
//              codes the library computes (uniqueness, distinguishable neighbours, composable
//              offsets, generalization past the training length)
//   lab        `posenc lab` and lab/: the tensors the encoding adds to a model and how it enters
//              the embeddings or the attention
// Adding an encoding means its op files, one catalogue line and one entry here (an `entries/*.cc`
// file and a line in registry.cc); no tool switches over encodings.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention.h"
#include "posenc/encodings.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

namespace posenc::registry {
struct Table;
}
namespace posenc::analyze {
struct Options;
struct Report;
}  // namespace posenc::analyze

namespace posenc::registry {

// The flags of `posenc encode`, for every encoding (each reads the ones it has).
struct TableOptions {
  int64_t dim = 8, heads = 2, max_len = 512, bits = 0, num_buckets = 32, max_distance = 0, head_dim = 8;
  int64_t rotary_dim = 0, offset = 0, max_position_embeddings = 0, original_max = 0;
  double base = 10000, factor = 1, alibi_bias_max = 8;
  std::string layout, frequencies = "model_dim", scaling = "default", slopes = "bloom", config, show;
  bool causal = false, unsigned_bits = false, symmetric = false;
  uint32_t seed = 0;  // of the random tables shown for learned encodings
};
struct TableRequest {
  const TableOptions& options;
  const std::vector<int64_t>& positions;  // positions, or query positions of pair encodings
  const std::vector<int64_t>& keys;       // key positions of pair encodings
  // Called by tabulate once the sizes are valid and before anything is allocated, with the flags that
  // size the table and the bytes it takes with its text; throws to refuse (the CLI passes
  // tools::require_memory). Null: no check.
  void (*require_memory)(const std::string& what, double bytes) = nullptr;
};

// The lab's parameters of the encodings (flags of `posenc lab`; each encoding reads its own).
struct EncodingOptions {
  int64_t t5_buckets = 16;  // causal T5: 8 exact buckets, 8 log-spaced up to max distance
  int64_t t5_max_distance = 32;
  int64_t max_distance = 32;  // clipping window of `relative` and `shaw`
  double rope_base = 10000.0;
  double sinusoidal_base = 10000.0;
  int64_t binary_bits = 10;  // binary codes: positions below 2^bits (the lab sizes it for
                             // its longest evaluation length so that extrapolation is measured)
};

// What a lab hook sees of the model: its widths, the encodings' parameters, and the rotation the
// model currently evaluates with (null without RoPE).
struct LabModel {
  int64_t d_model = 0, heads = 0, head_dim = 0, train_len = 0;
  const EncodingOptions* options = nullptr;
  const Rope* rope = nullptr;
};
// A tensor an encoding adds to the model, initialised from N(0, init_std).
struct LabTensor {
  std::string name;  // "wpe.weight" (model_tensors) or "attn.relative_bias" (layer_tensors)
  std::vector<int64_t> shape;
  double init_std = 0.02;
};
// The model's (or one layer's) tensor of that name, in the parameters or in the gradients.
using TensorLookup = std::function<float*(const std::string& name)>;

// Each hook may be null: the encoding has nothing to do at that point.
struct LabHooks {
  void (*validate)(const LabModel&) = nullptr;  // throws posenc::Error naming the field
  std::vector<LabTensor> (*model_tensors)(const LabModel&) = nullptr;  // once per model
  std::vector<LabTensor> (*layer_tensors)(const LabModel&) = nullptr;  // once per layer
  // x: (B, T, C) embeddings, positions: (T). Throws where the encoding is undefined at a position.
  void (*add_to_embeddings)(const LabModel&, const TensorLookup& params, ConstTensorView positions,
                            TensorView x) = nullptr;
  // dx: (B, T, C), the gradient of the embeddings; accumulates into the encoding's tables.
  void (*embeddings_backward)(const LabModel&, const TensorLookup& grads, ConstTensorView positions,
                              ConstTensorView dx) = nullptr;
  void (*configure_attention)(const LabModel&, const TensorLookup& params, AttentionConfig& config) = nullptr;
  // Points `grads` at the gradients of the tables configure_attention gave `config`.
  void (*attention_grads)(const LabModel&, const AttentionConfig& config, const TensorLookup& grads,
                          AttentionGrads& out) = nullptr;
};

struct Entry {
  const EncodingInfo* info = nullptr;
  Table (*tabulate)(const TableRequest&) = nullptr;
  void (*analyze)(const analyze::Options&, analyze::Report&) = nullptr;
  LabHooks lab;

  std::string_view name() const { return info->name; }
  EncodingKind kind() const { return info->kind; }
  EncodingRole role() const { return info->role; }
};

// Every entry, in the catalogue's order (all_encodings()).
std::span<const Entry> entries();
// By canonical name or alias; throws posenc::Error listing the known names (encoding_info's).
const Entry& find(std::string_view name);
const Entry& entry(EncodingKind kind);

}  // namespace posenc::registry
