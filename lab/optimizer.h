// lab/optimizer.h: AdamW (Loshchilov & Hutter 2019) with linear warm-up and cosine decay, and
// gradient clipping by the global norm, as nanoGPT/llm.c train GPT-2.
#pragma once
#include <cstdint>
#include <vector>

#include "model.h"

namespace posenc::lab {

struct OptimizerConfig {
  double lr = 3e-3;
  double min_lr_ratio = 0.1;  // the cosine ends at lr * min_lr_ratio
  int64_t warmup = 50;        // steps of linear warm-up from lr / warmup
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // decoupled; on the slices marked decay (matrices and tables)
  double clip = 1.0;          // max global gradient norm (0: no clipping)
};
void validate(const OptimizerConfig& config);

// lr at `step` (0-based) of `steps`.
double learning_rate(const OptimizerConfig& config, int64_t step, int64_t steps);

class AdamW {
 public:
  explicit AdamW(const OptimizerConfig& config) : config_(config) { validate(config); }
  // Clips the gradients in place, updates the parameters; returns the gradient norm before clipping.
  double step(Model& model, double lr);

 private:
  OptimizerConfig config_;
  std::vector<float> m_, v_;
  int64_t t_ = 0;
};

}  // namespace posenc::lab
