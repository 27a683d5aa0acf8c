// lab/trainer.h: training a lab model on a token stream, and evaluating it at several lengths.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model.h"
#include "optimizer.h"

namespace posenc::lab {

struct TrainConfig {
  int64_t steps = 500;
  int64_t batch = 32;  // windows per step, each train_len + 1 tokens at a random offset
  uint64_t seed = 1;   // data order; the model's initialisation has its own seed
  OptimizerConfig optimizer;
};
void validate(const TrainConfig& config);

struct StepReport {
  int64_t step = 0, steps = 0;  // step is 1-based
  double loss = 0, lr = 0, grad_norm = 0;
  double seconds = 0;  // since training started
  double tokens_per_second = 0;
};

struct TrainResult {
  std::vector<double> losses;  // per step (nats)
  double seconds = 0;          // wall time of all steps
  double tokens_per_second = 0;
  double ms_per_step = 0;
  double final_loss = 0;  // mean of the last 10% of the steps
};

// Trains `model` on windows of `data` (model.config().train_len tokens and their next tokens),
// drawn by an Rng of config.seed: every model trained with one seed sees the same windows.
TrainResult train(Model& model, const std::vector<int32_t>& data, const TrainConfig& config,
                  const std::function<void(const StepReport&)>& on_step = {});

// The same loop on batches from `next_batch`, which fills inputs and targets of shape
// (config.batch, train_len) for each step (targets may be ops::kIgnoreTarget).
using BatchSource = std::function<void(int32_t* inputs, int32_t* targets)>;
TrainResult train(Model& model, const BatchSource& next_batch, const TrainConfig& config,
                  const std::function<void(const StepReport&)>& on_step = {});

struct EvalConfig {
  std::vector<int64_t> lengths{64, 128, 256, 512, 1024};
  int64_t max_tokens = 1 << 17;  // characters evaluated per length (the same text for every length)
  int64_t batch_tokens = 8192;   // tokens per forward
};

struct BucketResult {
  int64_t begin = 0, end = 0;  // positions [begin, end) inside a window
  double bits_per_char = 0;
  int64_t tokens = 0;
};

struct EvalResult {
  int64_t length = 0;
  bool ok = false;
  std::string error;                  // why the encoding cannot run at this length (library error)
  double bits_per_char = 0;           // over every position of every window
  std::vector<BucketResult> buckets;  // [0, L0), [L0, 2 L0), [2 L0, 4 L0), ... with L0 = train_len
  int64_t windows = 0, tokens = 0;
  double seconds = 0;  // 0 where the figures are another evaluation's (a RoPE scaling where it is plain)
};

// Non-overlapping windows of each length over the first tokens of `data` (a multiple of the
// longest length, at most max_tokens, so every length scores the same characters), each window
// starting at position 0. Returns one result per length, in order.
std::vector<EvalResult> evaluate(Model& model, const std::vector<int32_t>& data, const EvalConfig& config);

}  // namespace posenc::lab
