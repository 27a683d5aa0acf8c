// lab/optimizer.cc: see optimizer.h.
#include "optimizer.h"

#include <cmath>
#include <numbers>

#include "kernels.h"
#include "posenc/error.h"

namespace posenc::lab {

void validate(const OptimizerConfig& c) {
  auto bad = [](const char* field, double value, const char* why) {
    throw Error(std::string("lab optimizer: ") + field + " = " + std::to_string(value) +
                " is invalid: " + why);
  };
  if (!(c.lr > 0 && std::isfinite(c.lr))) bad("lr", c.lr, "must be finite and > 0");
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1))
    bad("min_lr_ratio", c.min_lr_ratio, "must lie in [0, 1]");
  if (c.warmup < 0) bad("warmup", static_cast<double>(c.warmup), "must be >= 0");
  if (!(c.beta1 >= 0 && c.beta1 < 1)) bad("beta1", c.beta1, "must lie in [0, 1)");
  if (!(c.beta2 >= 0 && c.beta2 < 1)) bad("beta2", c.beta2, "must lie in [0, 1)");
  if (!(c.eps > 0 && std::isfinite(c.eps))) bad("eps", c.eps, "must be finite and > 0");
  if (!(c.weight_decay >= 0 && std::isfinite(c.weight_decay)))
    bad("weight_decay", c.weight_decay, "must be finite and >= 0");
  if (!(c.clip >= 0 && std::isfinite(c.clip))) bad("clip", c.clip, "must be finite and >= 0");
}

double learning_rate(const OptimizerConfig& c, int64_t step, int64_t steps) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  const double span = static_cast<double>(std::max<int64_t>(steps - c.warmup, 1));
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup) / span);
  const double min_lr = c.lr * c.min_lr_ratio;
  return min_lr + 0.5 * (c.lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

double AdamW::step(Model& model, double lr) {
  std::vector<float>& p = model.params();
  std::vector<float>& g = model.grads();
  if (m_.empty()) {
    m_.assign(p.size(), 0.0f);
    v_.assign(p.size(), 0.0f);
  }
  const double norm = std::sqrt(kernels::sum_of_squares(g.data(), static_cast<int64_t>(g.size())));
  if (!std::isfinite(norm))
    throw Error("lab optimizer: the gradient norm is not finite (training diverged; lower --lr)");
  const float clip_scale =
      config_.clip > 0 && norm > config_.clip ? static_cast<float>(config_.clip / norm) : 1.0f;
  ++t_;
  const auto b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const auto c1 = static_cast<float>(1.0 - std::pow(config_.beta1, static_cast<double>(t_)));
  const auto c2 = static_cast<float>(1.0 - std::pow(config_.beta2, static_cast<double>(t_)));
  const auto lr_f = static_cast<float>(lr), eps = static_cast<float>(config_.eps);
  // Per parameter: g = grad * clip_scale, m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g g,
  // p -= lr (m / c1 / (sqrt(v / c2) + eps) + decay p), in SIMD vectors (kernels.h).
  for (const ParamSlice& s : model.layout()) {
    const float decay = s.decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    const auto at = static_cast<size_t>(s.offset);
    kernels::adamw({b1, b2, c1, c2, lr_f, eps, decay, clip_scale}, p.data() + at, g.data() + at,
                   m_.data() + at, v_.data() + at, s.size);
  }
  return norm;
}

}  // namespace posenc::lab
