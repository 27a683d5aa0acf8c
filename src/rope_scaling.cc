// src/rope_scaling.cc: the RoPE frequency table on the host, in double: validation of a RopeConfig
// and every HuggingFace rope_scaling type (transformers/modeling_rope_utils.py). Kernels receive the
// table and stay branch-free.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string_view>
#include <utility>

#include "posenc/rope.h"
#include "src/check.h"
#include "src/rope_plan.h"

namespace posenc {
using detail::fail;
using detail::fail_arg;

const char* rope_layout_name(RopeLayout layout) {
  return layout == RopeLayout::half ? "half" : "interleaved";
}
const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::none:
      return "default";
    case RopeScalingType::linear:
      return "linear";
    case RopeScalingType::dynamic:
      return "dynamic";
    case RopeScalingType::yarn:
      return "yarn";
    case RopeScalingType::longrope:
      return "longrope";
    case RopeScalingType::llama3:
      return "llama3";
    case RopeScalingType::proportional:
      return "proportional";
    case RopeScalingType::qwen_dynamic:
      return "qwen_dynamic";
  }
  return "?";
}
const char* rope_multimodal_name(RopeMultimodal mode) {
  switch (mode) {
    case RopeMultimodal::none:
      return "none";
    case RopeMultimodal::mrope:
      return "mrope";
    case RopeMultimodal::mrope_interleaved:
      return "mrope_interleaved";
    case RopeMultimodal::axial_2d:
      return "axial_2d";
    case RopeMultimodal::mrope_alternating_hw:
      return "mrope_alternating_hw";
  }
  return "?";
}

int64_t RopeConfig::num_position_streams() const {
  switch (multimodal) {
    case RopeMultimodal::none:
      return 1;
    case RopeMultimodal::axial_2d:
      return 2;
    default:
      return 3;
  }
}

namespace {
// A multiplicative scale parameter within [2^-16, 2^16] (kMinRopeScale, kMaxRopeScale): with the
// base bounds, every frequency stays within 2^-142 .. 2^48 and every angle finite.
void check_scale(const char* op, std::string_view name, double v) {
  if (!(v >= kMinRopeScale && v <= kMaxRopeScale)) fail_arg(op, name, v, "must be in [2^-16, 2^16]");
}

void validate_factor_list(const char* name, const std::vector<double>& v, int64_t pairs) {
  if (static_cast<int64_t>(v.size()) != pairs)
    fail("rope", "rope_scaling.", name, " has ", v.size(), " values, expected rotary_dim/2 = ", pairs);
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] >= kMinRopeScale && v[i] <= kMaxRopeScale))
      fail("rope", "rope_scaling.", name, "[", i, "] = ", v[i], " is invalid: must be in [2^-16, 2^16]");
}

void check_context(const char* op, const char* name, int64_t v) {
  if (v < 0 || v > kMaxRopeContext) fail_arg(op, name, v, "must be in [0, 2^53] (0 = not given)");
}

// The multiplier on cos and sin (HF attention_factor / attention_scaling): given, or derived by
// yarn (from factor and mscale) and longrope (from the context lengths).
double attention_factor_of(const RopeConfig& c) {
  const RopeScaling& s = c.scaling;
  if (s.type == RopeScalingType::yarn) {
    if (s.attention_factor) return *s.attention_factor;
    if (s.mscale && s.mscale_all_dim && *s.mscale != 0 && *s.mscale_all_dim != 0) {
      const double den =
          detail::yarn_mscale(s.factor, *s.mscale_all_dim);  // 0 for mscale_all_dim = -10 / ln(factor)
      return den != 0 ? detail::yarn_mscale(s.factor, *s.mscale) / den
                      : std::numeric_limits<double>::quiet_NaN();
    }
    return detail::yarn_mscale(s.factor, 1.0);
  }
  if (s.type == RopeScalingType::longrope) {
    // HF _compute_longrope_parameters: Phi-3 style configs give original_max_position_embeddings
    // and the factor is max_position_embeddings / original.
    if (s.attention_factor) return *s.attention_factor;
    const int64_t original = c.original_context();
    const double factor = s.original_max_position_embeddings > 0
                              ? static_cast<double>(c.max_position_embeddings) / static_cast<double>(original)
                              : s.factor;
    return factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(original)));
  }
  return 1.0;
}
}  // namespace

void validate(const RopeConfig& c) {
  const char* op = "rope";
  if (c.head_dim <= 0 || c.head_dim > kMaxRopeHeadDim)
    fail_arg(op, "head_dim", c.head_dim, "must be in [1, " + std::to_string(kMaxRopeHeadDim) + "]");
  if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim)
    fail_arg(op, "rotary_dim", c.rotary_dim,
             "must be in [0, head_dim = " + std::to_string(c.head_dim) + "] (0 = head_dim)");
  const int64_t r = c.effective_rotary_dim();
  if (r % 2 != 0)
    fail_arg(op, c.rotary_dim == 0 ? "head_dim (used as rotary_dim)" : "rotary_dim", r, "must be even");
  const int64_t pairs = r / 2;
  // As sinusoidal's base: 1 / base must not overflow (1e-310 gave inf frequencies, NaN cos/sin).
  if (!(c.base >= kMinRopeBase && c.base <= kMaxRopeBase))
    fail_arg(op, "base", c.base, "must be in [2^-16, 2^126]");
  check_context(op, "max_position_embeddings", c.max_position_embeddings);
  const RopeScaling& s = c.scaling;
  check_context(op, "rope_scaling.original_max_position_embeddings", s.original_max_position_embeddings);
  if (s.type != RopeScalingType::none) check_scale(op, "rope_scaling.factor", s.factor);
  if (s.attention_factor) check_scale(op, "rope_scaling.attention_factor", *s.attention_factor);
  switch (s.type) {
    case RopeScalingType::none:
    case RopeScalingType::linear:
    case RopeScalingType::proportional:
      break;
    case RopeScalingType::dynamic:
      if (c.max_position_embeddings <= 0)
        fail_arg(op, "max_position_embeddings", c.max_position_embeddings,
                 "must be > 0 for rope_scaling 'dynamic'");
      if (r <= 2)
        fail_arg(op, "rotary_dim", r, "must be > 2 for rope_scaling 'dynamic' (exponent dim/(dim-2))");
      break;
    case RopeScalingType::yarn:
      if (c.original_context() <= 0)
        fail(op, "rope_scaling 'yarn' needs original_max_position_embeddings or max_position_embeddings > 0");
      if (!(c.base > 1))
        fail_arg(op, "base", c.base, "must be > 1 for rope_scaling 'yarn' (it takes log(base))");
      check_scale(op, "rope_scaling.beta_fast", s.beta_fast);
      check_scale(op, "rope_scaling.beta_slow", s.beta_slow);
      for (const auto& [name, m] : {std::pair{"rope_scaling.mscale", s.mscale},
                                    std::pair{"rope_scaling.mscale_all_dim", s.mscale_all_dim}})
        if (m && !(std::abs(*m) <= kMaxRopeScale)) fail_arg(op, name, *m, "must be in [-2^16, 2^16]");
      break;
    case RopeScalingType::longrope:
      validate_factor_list("short_factor", s.short_factor, pairs);
      validate_factor_list("long_factor", s.long_factor, pairs);
      if (c.original_context() <= 1)
        fail(op,
             "rope_scaling 'longrope' needs original_max_position_embeddings or max_position_embeddings > 1");
      if (s.original_max_position_embeddings > 0 && c.max_position_embeddings <= 0)
        fail(
            op,
            "rope_scaling 'longrope' with original_max_position_embeddings needs max_position_embeddings > 0 "
            "(HF takes factor = max_position_embeddings / original_max_position_embeddings)");
      break;
    case RopeScalingType::qwen_dynamic:
      if (s.original_max_position_embeddings <= 0)
        fail_arg(op, "rope_scaling.original_max_position_embeddings", s.original_max_position_embeddings,
                 "must be > 0 for rope_scaling 'qwen_dynamic' (Qwen's seq_length)");
      if (r <= 2)
        fail_arg(op, "rotary_dim", r, "must be > 2 for rope_scaling 'qwen_dynamic' (exponent dim/(dim-2))");
      break;
    case RopeScalingType::llama3:
      check_scale(op, "rope_scaling.low_freq_factor", s.low_freq_factor);
      check_scale(op, "rope_scaling.high_freq_factor", s.high_freq_factor);
      // Equal factors (Llama 4 Scout: 1, 1): transformers only warns (modeling_rope_utils.py
      // _validate_llama3_parameters); the smooth band is then empty, a hard switch.
      if (!(s.high_freq_factor >= s.low_freq_factor))
        fail_arg(op, "rope_scaling.high_freq_factor", s.high_freq_factor,
                 "must be >= low_freq_factor = " + std::to_string(s.low_freq_factor));
      if (s.original_max_position_embeddings <= 0)
        fail_arg(op, "rope_scaling.original_max_position_embeddings", s.original_max_position_embeddings,
                 "must be > 0 for rope_scaling 'llama3'");
      break;
  }
  if (s.type == RopeScalingType::proportional && !(s.proportion > 0 && s.proportion <= 1))
    fail_arg(op, "rope_scaling.proportion", s.proportion, "must be in (0, 1] (partial_rotary_factor)");
  if (!c.frequency_divisors.empty()) {
    if (static_cast<int64_t>(c.frequency_divisors.size()) != pairs)
      fail(op, "frequency_divisors has ", c.frequency_divisors.size(),
           " values, expected rotary_dim/2 = ", pairs);
    for (size_t i = 0; i < c.frequency_divisors.size(); ++i)
      if (!(c.frequency_divisors[i] >= kMinRopeScale && c.frequency_divisors[i] <= kMaxRopeScale))
        fail(op, "frequency_divisors[", i, "] = ", c.frequency_divisors[i],
             " is invalid: must be in [2^-16, 2^16]");
  }
  switch (c.multimodal) {
    case RopeMultimodal::none:
      if (!c.mrope_section.empty()) fail(op, "mrope_section is set but multimodal is 'none'");
      break;
    case RopeMultimodal::mrope:
    case RopeMultimodal::mrope_interleaved:
    case RopeMultimodal::mrope_alternating_hw: {
      if (c.mrope_section.size() != 3)
        fail(op, "mrope_section = ", detail::to_string(c.mrope_section),
             " is invalid: needs 3 values {t, h, w}");
      // modeling_ernie4_5_vl_moe.py recomposition_frequencies stacks the h and w sections pairwise.
      if (c.multimodal == RopeMultimodal::mrope_alternating_hw && c.mrope_section[0] != c.mrope_section[1])
        fail(op, "mrope_section = ", detail::to_string(c.mrope_section),
             " is invalid for mrope_alternating_hw: its {h, w, t} needs h == w");
      int64_t sum = 0;
      for (int64_t v : c.mrope_section) {
        if (v < 0 || v > pairs)  // bounded before summing: three INT64_MAX would overflow
          fail(op, "mrope_section = ", detail::to_string(c.mrope_section),
               " is invalid: values must be in [0, ", pairs, "] (rotary_dim/2)");
        sum += v;
      }
      // Qwen3-VL's apply_interleaved_mrope only overwrites the h and w slices of the t frequencies, so any
      // sections are well defined there (transformers 5's qwen4_exp default [11, 11, 10] against a
      // whole 256-dim head leaves pairs 33 .. 127 on t); Qwen2-VL's split needs the exact sum.
      if (sum != pairs && c.multimodal != RopeMultimodal::mrope_interleaved)
        fail(op, "mrope_section = ", detail::to_string(c.mrope_section), " sums to ", sum,
             ", expected rotary_dim/2 = ", pairs);
      break;
    }
    case RopeMultimodal::axial_2d:
      if (pairs % 2 != 0)
        fail_arg(op, "rotary_dim", r, "must be a multiple of 4 for axial_2d (two halves of pairs)");
      if (s.type != RopeScalingType::none && s.type != RopeScalingType::linear)
        fail(op, "rope_scaling '", rope_scaling_name(s.type),
             "' is not defined for axial_2d (only default, linear)");
      if (!c.mrope_section.empty()) fail(op, "mrope_section is set but multimodal is 'axial_2d'");
      break;
  }
  // What yarn and longrope derive from valid parameters can still leave the range (an mscale
  // ratio with a vanishing denominator, or one below 0): the kernels multiply cos and sin by it.
  const double af = attention_factor_of(c);
  if (!(af >= kMinRopeScale && af <= kMaxRopeScale)) {
    std::ostringstream from;
    from.precision(17);
    from << "factor = " << s.factor;
    if (s.mscale) from << ", mscale = " << *s.mscale;
    if (s.mscale_all_dim) from << ", mscale_all_dim = " << *s.mscale_all_dim;
    fail(op, "the attention factor rope_scaling '", rope_scaling_name(s.type), "' derives (", from.str(),
         ") is ", af, ", which is invalid: must be in [2^-16, 2^16]");
  }
}

namespace {
// 1 / base^(2j / dim) for j < dim / 2: the RoFormer ladder.
std::vector<double> default_ladder(double base, int64_t dim) {
  std::vector<double> f(dim / 2);
  for (int64_t j = 0; j < dim / 2; ++j)
    f[j] = std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(dim));
  return f;
}

// YaRN (Peng et al., arXiv 2309.00071) as HF computes it: dimensions rotating fewer than beta_slow
// times over the original context are interpolated (divided by factor), more than beta_fast times
// extrapolated (kept), with a linear ramp between.
void apply_yarn(const RopeConfig& c, int64_t dim, std::vector<double>& inv_freq, double& attention_factor) {
  const RopeScaling& s = c.scaling;
  const double factor = s.factor;
  const double original = static_cast<double>(c.original_context());
  attention_factor = attention_factor_of(c);
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(c.base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a singular ramp
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    const double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;  // weight of the unscaled frequency
    inv_freq[j] = inv_freq[j] / factor * (1.0 - extrapolation) + inv_freq[j] * extrapolation;
  }
}

// Llama 3.1: wavelengths longer than original/low_freq_factor are divided by factor, shorter than
// original/high_freq_factor kept, and those between interpolated smoothly.
void apply_llama3(const RopeScaling& s, std::vector<double>& inv_freq) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_context / s.low_freq_factor;
  const double high_wavelen = old_context / s.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f = f / s.factor;
    } else if (!(wavelen < high_wavelen) && s.high_freq_factor > s.low_freq_factor) {
      // transformers' is_medium_freq; with equal factors it holds only at wavelen == original /
      // low_freq_factor exactly, where its smooth_factor is 0/0 = NaN: posenc keeps the frequency.
      const double smooth =
          (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
}

// modeling_qwen.py QWenModel.get_ntk_alpha: context_value = math.log(L / seq_length, 2) + 1, ntk_alpha =
// max(2 ** math.ceil(context_value) - 1, 1). math.log(x, 2) is log(x) / log(2) (CPython loghelper), not
// log2(x): the same quotient here, so L = 2^k S lands in the same step as Qwen's.
double qwen_ntk_alpha(int64_t seq_len, int64_t seq_length) {
  if (seq_len <= seq_length) return 1.0;
  const double context =
      std::log(static_cast<double>(seq_len) / static_cast<double>(seq_length)) / std::log(2.0) + 1.0;
  return std::max(std::exp2(std::ceil(context)) - 1.0, 1.0);
}
}  // namespace

RopeFrequencies rope_frequencies(const RopeConfig& c, int64_t seq_len) {
  validate(c);
  const int64_t r = c.effective_rotary_dim();
  const int64_t pairs = r / 2;
  const RopeScaling& s = c.scaling;
  RopeFrequencies out;
  out.stream.assign(pairs, 0);

  if (c.multimodal == RopeMultimodal::axial_2d) {
    // Each half of the pairs gets its own ladder over rotary_dim / 2.
    std::vector<double> half = default_ladder(c.base, r / 2);
    out.inv_freq.resize(pairs);
    for (int64_t j = 0; j < pairs / 2; ++j) {
      out.inv_freq[j] = out.inv_freq[j + pairs / 2] = half[j];
      out.stream[j + pairs / 2] = 1;
    }
  } else {
    double base = c.base;
    if (s.type == RopeScalingType::dynamic) {
      // NTK-aware base growth (HF _compute_dynamic_ntk_parameters).
      const double max_pos = static_cast<double>(c.max_position_embeddings);
      const double len = seq_len > c.max_position_embeddings ? static_cast<double>(seq_len) : max_pos;
      base = base * std::pow(s.factor * len / max_pos - (s.factor - 1), static_cast<double>(r) / (r - 2));
    } else if (s.type == RopeScalingType::qwen_dynamic) {
      base = base * std::pow(qwen_ntk_alpha(seq_len, s.original_max_position_embeddings),
                             static_cast<double>(r) / (r - 2));
    }
    out.inv_freq = default_ladder(base, r);
  }

  switch (s.type) {
    case RopeScalingType::none:
    case RopeScalingType::dynamic:
    case RopeScalingType::qwen_dynamic:
      break;
    case RopeScalingType::linear:
      for (double& f : out.inv_freq) f /= s.factor;
      break;
    case RopeScalingType::yarn:
      apply_yarn(c, r, out.inv_freq, out.attention_factor);
      break;
    case RopeScalingType::longrope: {
      // HF switches to the long factors past the original context (attention factor: see
      // attention_factor_of).
      const int64_t original = c.original_context();
      out.attention_factor = attention_factor_of(c);
      const std::vector<double>& ext = seq_len > original ? s.long_factor : s.short_factor;
      for (int64_t j = 0; j < pairs; ++j) out.inv_freq[j] /= ext[j];
      break;
    }
    case RopeScalingType::llama3:
      apply_llama3(s, out.inv_freq);
      break;
    case RopeScalingType::proportional: {
      // rope_angles = int(rope_proportion * head_dim // 2); the rest are zeros; then /= factor.
      const auto angles = static_cast<int64_t>(std::floor(s.proportion * static_cast<double>(r) / 2));
      for (int64_t j = 0; j < pairs; ++j) out.inv_freq[j] = j < angles ? out.inv_freq[j] / s.factor : 0.0;
      break;
    }
  }
  for (size_t j = 0; j < c.frequency_divisors.size(); ++j) out.inv_freq[j] /= c.frequency_divisors[j];
  // validate()'s bounds keep every frequency finite; this guard names the table if a path misses one.
  for (size_t j = 0; j < out.inv_freq.size(); ++j)
    if (!(std::isfinite(out.inv_freq[j]) && out.inv_freq[j] >= 0))
      fail("rope", "rope_scaling '", rope_scaling_name(s.type), "' gives inv_freq[", j,
           "] = ", out.inv_freq[j], " at seq_len ", seq_len,
           ": the config is outside the range posenc supports");

  if (c.multimodal == RopeMultimodal::mrope) {
    // Qwen2-VL: consecutive sections of pairs take the t, h, w streams.
    int64_t j = 0;
    for (uint8_t stream = 0; stream < 3; ++stream)
      for (int64_t n = 0; n < c.mrope_section[stream]; ++n) out.stream[j++] = stream;
  } else if (c.multimodal == RopeMultimodal::mrope_alternating_hw) {
    // ERNIE 4.5 VL (modeling_ernie4_5_vl_moe.py): inv_freq pre-permuted to even then odd frequencies of
    // the first 2h pairs, split {h, w, t}, h and w stacked pairwise: pair j takes h (j even) or w (j odd)
    // below 2h, t above, each with its own frequency f_j.
    for (int64_t j = 0; j < pairs; ++j) out.stream[j] = j < 2 * c.mrope_section[0] ? (j % 2 == 0 ? 1 : 2) : 0;
  } else if (c.multimodal == RopeMultimodal::mrope_interleaved) {
    // Qwen3-VL apply_interleaved_mrope: h on j % 3 == 1 below 3*h, w on j % 3 == 2 below 3*w.
    for (int64_t j = 0; j < pairs; ++j) {
      if (j % 3 == 1 && j < 3 * c.mrope_section[1])
        out.stream[j] = 1;
      else if (j % 3 == 2 && j < 3 * c.mrope_section[2])
        out.stream[j] = 2;
    }
  }
  return out;
}

double detail::yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace posenc
