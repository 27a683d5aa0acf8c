// lab/model.h: a small pre-norm decoder-only transformer (GPT-2 shaped) whose attention takes any
// encoding of positional.h (attention.h: the lab's kernels or posenc's fused attention).
//
//   x = sqrt(C) * wte[tokens] (+ absolute code)          fairseq's embedding scale (Press et al.'s setup)
//   per layer:  x = x + proj(attention(norm1(x)))         attention: causal, encoding inside
//               x = x + fc_proj(gelu(fc(norm2(x))))
//   logits = normf(x) @ wte^T                             tied output embedding
//   loss = mean cross-entropy of the next character
// With the embedding tied and scaled, a token's own logit starts large (initial loss ~8 nats
// against ln 63 = 4.1 for uniform guesses); training recovers within ~30 steps. Kept: it is the
// setup of Vaswani et al. and of fairseq, which Press et al. measured extrapolation with.
//
// Shapes: B windows of T tokens, N = B * T, C = d_model, H heads, D = C / H, F = mlp, V = vocab.
// All parameters live in one flat buffer (layout() names each slice), and so do their gradients,
// which keeps the optimizer, the checkpoint and the gradient check one loop each.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops.h"
#include "positional.h"
#include "posenc/rope.h"
#include "safetensors.h"

namespace posenc::lab {

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t mlp = 256;
  int64_t train_len = 64;  // the training context; rows of a learned table; base of RoPE scaling
  ops::Norm norm = ops::Norm::layer;
  EncodingSpec encoding;
  EncodingOptions options;

  int64_t head_dim() const { return d_model / heads; }
  std::string to_json() const;                       // every field, for checkpoints and results
  static ModelConfig from_json(const std::string&);  // throws posenc::Error naming the field
};
void validate(const ModelConfig& config);  // throws posenc::Error naming the field and value
// The model as the encodings' registry hooks see it, evaluating with `rope` (null: none).
registry::LabModel lab_model(const ModelConfig& config, const Rope* rope = nullptr);

// One named slice of the flat parameter buffer.
struct ParamSlice {
  std::string name;  // "layers.0.attn.qkv.weight", ...
  std::vector<int64_t> shape;
  int64_t offset = 0, size = 0;
  double init_std = 0.0;  // normal(0, init_std); 0 with init_one false: zeros
  bool init_one = false;  // norm weights
  bool decay = false;     // AdamW weight decay (matrices and tables: rank >= 2, as nanoGPT)
};

class Model {
 public:
  // Validates the configuration and initialises the parameters from `seed` (each tensor from a
  // stream of its own, so shared tensors start equal whatever the encoding).
  Model(const ModelConfig& config, uint64_t seed);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelConfig& config() const { return config_; }
  const std::vector<ParamSlice>& layout() const { return layout_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }

  // How RoPE runs in the following forwards (evaluation-time scaling; training uses plain).
  void set_rope_eval(RopeEval mode, int64_t eval_len);

  // tokens, targets (B, T); a target of ops::kIgnoreTarget does not count. Returns the mean loss
  // over the counted targets in nats; per-token losses in token_losses() (0 where ignored).
  // Throws posenc::Error where the encoding is undefined at T (a learned table past its rows,
  // binary codes past 2^bits), with the library's message; nothing is changed then.
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  const std::vector<float>& token_losses() const;  // (N)
  std::vector<int32_t> predictions() const;        // (N): the most probable next token (argmax)
  void zero_grad();
  // Accumulates d mean-loss / d params into grads() for the last forward.
  void backward();

  // Checkpoints: tensors by layout name, the configuration in metadata["config"] (JSON) plus
  // `metadata`. Loading validates the configuration and every tensor's name and shape.
  Checkpoint to_checkpoint(const std::map<std::string, std::string>& metadata = {}) const;
  static Model from_checkpoint(const Checkpoint& checkpoint);

 private:
  struct Impl;
  ModelConfig config_;
  std::vector<ParamSlice> layout_;
  std::vector<float> params_, grads_;
  std::unique_ptr<Impl> impl_;
};

// The parameter layout a configuration implies (names, shapes, offsets, initialisation).
std::vector<ParamSlice> model_layout(const ModelConfig& config);

// The bytes a model of this configuration holds while training on `tokens` tokens per step: the
// parameters with their gradients and AdamW's two moments, and the activations the forward keeps
// for the backward plus the backward's buffers (model_passes.cc), counted in double from the
// configuration alone, so that a size no machine has is refused before anything is allocated.
double estimated_memory_bytes(const ModelConfig& config, double tokens);

}  // namespace posenc::lab
