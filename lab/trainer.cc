// lab/trainer.cc: see trainer.h.
#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

#include "posenc/error.h"
#include "rng.h"

namespace posenc::lab {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

void validate(const TrainConfig& c) {
  if (c.steps < 1) throw Error("lab train: steps = " + std::to_string(c.steps) + " is invalid: must be >= 1");
  if (c.batch < 1) throw Error("lab train: batch = " + std::to_string(c.batch) + " is invalid: must be >= 1");
  validate(c.optimizer);
}

TrainResult train(Model& model, const std::vector<int32_t>& data, const TrainConfig& config,
                  const std::function<void(const StepReport&)>& on_step) {
  const int64_t T = model.config().train_len, B = config.batch;
  const auto n = static_cast<int64_t>(data.size());
  if (n < T + 1)
    throw Error("lab train: the training text has " + std::to_string(n) +
                " tokens, fewer than train_len + 1 = " + std::to_string(T + 1));
  Rng rng(config.seed, "data order");
  const BatchSource windows = [&](int32_t* inputs, int32_t* targets) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = rng.below(n - T);
      std::copy_n(data.begin() + start, T, inputs + b * T);
      std::copy_n(data.begin() + start + 1, T, targets + b * T);
    }
  };
  return train(model, windows, config, on_step);
}

TrainResult train(Model& model, const BatchSource& next_batch, const TrainConfig& config,
                  const std::function<void(const StepReport&)>& on_step) {
  validate(config);
  const int64_t T = model.config().train_len, B = config.batch;
  AdamW optimizer(config.optimizer);
  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  TrainResult result;
  const auto t0 = Clock::now();
  for (int64_t step = 0; step < config.steps; ++step) {
    next_batch(inputs.data(), targets.data());
    const double loss = model.forward(inputs.data(), targets.data(), B, T);
    model.zero_grad();
    model.backward();
    const double lr = learning_rate(config.optimizer, step, config.steps);
    const double grad_norm = optimizer.step(model, lr);
    result.losses.push_back(loss);
    if (on_step) {
      StepReport r;
      r.step = step + 1, r.steps = config.steps, r.loss = loss, r.lr = lr, r.grad_norm = grad_norm;
      r.seconds = seconds_since(t0);
      r.tokens_per_second = static_cast<double>((step + 1) * B * T) / std::max(r.seconds, 1e-9);
      on_step(r);
    }
  }
  result.seconds = seconds_since(t0);
  result.tokens_per_second = static_cast<double>(config.steps * B * T) / std::max(result.seconds, 1e-9);
  result.ms_per_step = 1e3 * result.seconds / static_cast<double>(config.steps);
  const int64_t tail = std::max<int64_t>(1, config.steps / 10);
  for (int64_t i = config.steps - tail; i < config.steps; ++i)
    result.final_loss += result.losses[static_cast<size_t>(i)];
  result.final_loss /= static_cast<double>(tail);
  return result;
}

std::vector<EvalResult> evaluate(Model& model, const std::vector<int32_t>& data, const EvalConfig& config) {
  if (config.lengths.empty()) throw Error("lab eval: lengths is empty");
  for (int64_t L : config.lengths)
    if (L < 1) throw Error("lab eval: length " + std::to_string(L) + " is invalid: must be >= 1");
  const int64_t longest = *std::max_element(config.lengths.begin(), config.lengths.end());
  const int64_t usable = std::min<int64_t>(config.max_tokens, static_cast<int64_t>(data.size()) - 1);
  const int64_t total = usable / longest * longest;
  if (total < longest)
    throw Error("lab eval: the test text has " + std::to_string(data.size()) +
                " tokens, fewer than the longest length + 1 = " + std::to_string(longest + 1));
  const int64_t L0 = model.config().train_len;
  std::vector<EvalResult> results;
  for (int64_t L : config.lengths) {
    EvalResult r;
    r.length = L;
    for (int64_t b = 0; b < L; b = b < L0 ? L0 : 2 * b)
      r.buckets.push_back({b, std::min(L, b < L0 ? L0 : 2 * b), 0, 0});
    const int64_t windows = total / L;
    const int64_t per_batch = std::max<int64_t>(1, std::min(windows, config.batch_tokens / L));
    std::vector<double> bucket_nats(r.buckets.size(), 0.0);
    double nats = 0.0;
    const auto t0 = Clock::now();
    try {
      for (int64_t w = 0; w < windows; w += per_batch) {
        const int64_t B = std::min(per_batch, windows - w);
        const double mean = model.forward(data.data() + w * L, data.data() + w * L + 1, B, L);
        // Windows are contiguous, so inputs are data[w L ..] and targets the same shifted by one;
        // the last window's last target is the token after it (total < data.size()).
        nats += mean * static_cast<double>(B * L);
        const std::vector<float>& losses = model.token_losses();
        for (int64_t i = 0; i < B * L; ++i)
          for (size_t k = 0; k < r.buckets.size(); ++k)
            if (i % L >= r.buckets[k].begin && i % L < r.buckets[k].end)
              bucket_nats[k] += losses[static_cast<size_t>(i)];
      }
      r.ok = true;
    } catch (const Error& e) {
      r.error = e.what();
    }
    r.seconds = seconds_since(t0);
    r.windows = windows;
    r.tokens = windows * L;
    if (r.ok) {
      r.bits_per_char = nats / static_cast<double>(r.tokens) / std::numbers::ln2;
      for (size_t k = 0; k < r.buckets.size(); ++k) {
        r.buckets[k].tokens = windows * (r.buckets[k].end - r.buckets[k].begin);
        r.buckets[k].bits_per_char =
            bucket_nats[k] / static_cast<double>(r.buckets[k].tokens) / std::numbers::ln2;
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace posenc::lab
