// posenc/rope.h: rotary position embedding (RoPE; Su et al., RoFormer, arXiv 2104.09864).
//
// Each pair (x_a, x_b) of a head is rotated by the angle theta_j = position * inv_freq_j:
//   x_a' = x_a cos(theta_j) - x_b sin(theta_j)
//   x_b' = x_b cos(theta_j) + x_a sin(theta_j)        (then both scaled by attention_factor)
// so <R(m) q, R(n) k> depends on m - n only. inv_freq_j = base^(-2j / rotary_dim) / scaling.
//
// Which elements form pair j (rotary_dim R = 8, head_dim D = 10, c/s = cos/sin partner, 0 = passes):
//   half        (GPT-NeoX, Llama, HF rotate_half): pair j = (x[j], x[j + R/2])   [ccccssss00]
//   interleaved (RoFormer, GPT-J, x[..., ::2]):    pair j = (x[2j], x[2j + 1])   [cscscscs00]
// The two agree only after permuting the q/k projection weights.
//
// Multimodal variants choose, per frequency pair, which position stream drives it:
//   mrope (Qwen2-VL), mrope_section = {t, h, w} pairs:  pairs [t...t h...h w...w]   positions (3, B, T)
//   mrope_interleaved (Qwen3-VL): pair j uses h if j%3==1 and j<3h, w if j%3==2 and j<3w, else t
//   mrope_alternating_hw (ERNIE 4.5 VL), mrope_section = {h, w, t} with h == w: pair j uses h if
//       j < 2h and j is even, w if j < 2h and j is odd, else t
//   axial_2d (2-D image patches): first half of the pairs uses the row position, second half the
//       column; each half has its own frequency ladder base^(-4j/R)          positions (2, B, T)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/tensor.h"

namespace posenc {

enum class RopeLayout : uint8_t { half, interleaved };
// proportional: Gemma 4's p-RoPE (transformers 5 modeling_rope_utils.py
// _compute_proportional_rope_parameters): the first floor(proportion * R / 2) pairs keep the ladder
// base^(-2j/R) over the full R, the other pairs get inv_freq 0 (identity rotation).
// qwen_dynamic: Qwen (1)'s dynamic NTK (remote code modeling_qwen.py QWenModel.get_ntk_alpha), not an HF
// rope_type: for a sequence of L tokens and S = original_max_position_embeddings (Qwen's seq_length),
//   alpha = max(2^ceil(log2(L / S) + 1) - 1, 1),  base' = base alpha^(R / (R - 2))
// so 1 up to S, 3 up to 2S, 7 up to 4S, ... Qwen takes L at the prefill (the prompt's length) and keeps
// that base while it decodes: pass RopeCall::seq_len = the prompt's length for the decode steps.
enum class RopeScalingType : uint8_t {
  none,
  linear,
  dynamic,
  yarn,
  longrope,
  llama3,
  proportional,
  qwen_dynamic
};
enum class RopeMultimodal : uint8_t { none, mrope, mrope_interleaved, axial_2d, mrope_alternating_hw };

const char* rope_layout_name(RopeLayout layout);
const char* rope_scaling_name(RopeScalingType type);  // HF rope_type: "default", "linear", ...
const char* rope_multimodal_name(RopeMultimodal mode);

// The HuggingFace `rope_scaling` dictionary, with the same keys and meanings
// (transformers/modeling_rope_utils.py). Fields a type does not use are ignored.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;                                   // linear, dynamic, yarn, llama3 (and longrope)
  int64_t original_max_position_embeddings = 0;          // yarn, longrope, llama3, qwen_dynamic (0 = none)
  std::optional<double> attention_factor;                // yarn, longrope: final multiplier on cos/sin
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn ramp, in rotations
  std::optional<double> mscale, mscale_all_dim;          // yarn, DeepSeek form of the attention factor
  bool truncate = true;                                  // yarn: floor/ceil the ramp bounds
  std::vector<double> short_factor, long_factor;         // longrope: one per frequency pair
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double proportion = 1.0;  // proportional: partial_rotary_factor (rotated fraction of the pairs)
};

// The bounds validate() holds every RopeConfig to, so that an accepted config gives finite
// frequencies, cos/sin and outputs at every position in [-2^53, 2^53] (and never allocates more
// than a few head_dim-sized tables). Errors state them.
inline constexpr int64_t kMaxRopeHeadDim = int64_t{1} << 16;             // head_dim
inline constexpr double kMinRopeBase = 0x1p-16, kMaxRopeBase = 0x1p126;  // base (rope_theta), as sinusoidal's
// Every multiplicative scale parameter: rope_scaling.factor, attention_factor (also the one yarn or
// longrope derive), beta_fast, beta_slow, low/high_freq_factor, short/long_factor entries,
// frequency_divisors; |mscale| and |mscale_all_dim| at most kMaxRopeScale.
inline constexpr double kMinRopeScale = 0x1p-16, kMaxRopeScale = 0x1p16;
inline constexpr int64_t kMaxRopeContext = int64_t{1} << 53;  // (original_)max_position_embeddings

struct RopeConfig {
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // 0 means head_dim; < head_dim is partial rotary (the rest passes)
  double base = 10000.0;   // rope_theta
  RopeLayout layout = RopeLayout::half;
  RopeScaling scaling;
  int64_t max_position_embeddings = 0;  // needed by dynamic and longrope (0 = not given)
  // Explicit per-frequency divisors (rotary_dim/2 values > 0): inv_freq_j /= divisors[j], applied
  // after `scaling`. Expresses any published per-frequency scaling (LongRoPE, Llama 3 conversions).
  std::vector<double> frequency_divisors;
  RopeMultimodal multimodal = RopeMultimodal::none;
  // pairs per stream: {t, h, w} (mrope, mrope_interleaved), {h, w, t} (mrope_alternating_hw, as ERNIE's
  // config lists them); the position streams are (t, h, w) in every mode.
  std::vector<int64_t> mrope_section;
  // Rotate by -p theta instead of p theta (every angle negated: the rotation is the transpose of the
  // usual one, and so is its backward). NanoChat's: its rotate_half returns [x2, -x1] (transformers
  // modeling_nanochat.py L169-173), so q cos + rotate_half(q) sin = R(-p theta) q. Attention scores
  // stay relative: they depend on -(m - n) theta. cos_sin returns the angles applied (sin of -p theta).
  bool reversed = false;

  int64_t effective_rotary_dim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
  // The pre-training context yarn and longrope read: scaling.original_max_position_embeddings if
  // given, else max_position_embeddings.
  int64_t original_context() const {
    return scaling.original_max_position_embeddings > 0 ? scaling.original_max_position_embeddings
                                                        : max_position_embeddings;
  }
  int64_t num_position_streams() const;  // 1, 3 (mrope) or 2 (axial_2d)
};

// Everything a kernel needs, computed on the host in double.
struct RopeFrequencies {
  std::vector<double> inv_freq;   // (R/2,) radians per position, per pair
  std::vector<uint8_t> stream;    // (R/2,) which position stream drives the pair
  double attention_factor = 1.0;  // multiplies cos and sin (yarn, longrope)
};

// Throws posenc::Error naming the first invalid field.
void validate(const RopeConfig& config);

// inv_freq etc. for a sequence of length seq_len. seq_len matters for `dynamic` (NTK base grows
// once seq_len > max_position_embeddings) and `longrope` (long factors once seq_len >
// original_max_position_embeddings), exactly as HF switches them; other types ignore it.
RopeFrequencies rope_frequencies(const RopeConfig& config, int64_t seq_len = 0);

// Per-call options.
struct RopeCall {
  // Sequence length for dynamic/longrope; default: max(position) + 1 over the call, which is what
  // HF's dynamic_rope_update uses. (HF caches the grown frequencies; posenc is stateless.)
  std::optional<int64_t> seq_len;
};

// A validated RoPE configuration, ready to apply. Thread-safe (const methods only).
//   x, q, k: (B, T, H, D) f32, any strides with a unit stride on D; heads of q and k may differ.
//   positions: (T) shared by the batch, or (B, T); multimodal: (S, T) or (S, B, T) with S streams.
//   Positions are arbitrary int64 (KV-cache offsets, packed sequences); angles are computed in
//   double and reduced mod 2*pi before the fp32 sin/cos, so results stay accurate at 2^20 and beyond.
class Rope {
 public:
  explicit Rope(RopeConfig config);
  const RopeConfig& config() const { return config_; }
  // Same as rope_frequencies(config(), seq_len), served from tables computed at construction
  // (both regimes of dynamic/longrope that do not depend on the exact length).
  RopeFrequencies frequencies(int64_t seq_len = 0) const;
  // The cached table when seq_len needs no new one (every type but dynamic past its limit), else null.
  const RopeFrequencies* cached_frequencies(int64_t seq_len) const;

  void forward(TensorView x, ConstTensorView positions, RopeCall call = {}) const;  // in place
  void forward(ConstTensorView x, TensorView out, ConstTensorView positions, RopeCall call = {}) const;
  // q and k in one pass (cos/sin computed once per token).
  void forward_qk(TensorView q, TensorView k, ConstTensorView positions, RopeCall call = {}) const;
  // Gradient w.r.t. the input: the transposed rotation R(-theta) (times attention_factor).
  void backward(TensorView grad, ConstTensorView positions, RopeCall call = {}) const;  // in place
  void backward(ConstTensorView grad_out, TensorView grad_in, ConstTensorView positions,
                RopeCall call = {}) const;

  // cos/sin tables (N, R/2) for flat positions (N) or (S, N): what the kernels use, for inspection.
  void cos_sin(ConstTensorView positions, TensorView cos, TensorView sin, RopeCall call = {}) const;

 private:
  RopeConfig config_;
  RopeFrequencies short_;  // seq_len <= the length where dynamic/longrope start to change
  RopeFrequencies long_;   // longrope past original_max_position_embeddings
};

// Parse a HuggingFace config.json (text). A model_type posenc's model table plans
// (model_positions_from_hf_json) gives that model's RoPE as its family's code applies it (layout,
// direction, class defaults, partial rotary as transformers 5 reads it); a model whose RoPE layers
// differ (Gemma 3's local / global bases), rotate a range not at dim 0 (MLA) or has none is refused
// with a pointer to ModelPositions; layers without RoPE (NoPE) are named in a warning. Any other config
// is read by the generic rules: rope_theta, partial_rotary_factor, rope_scaling or rope_parameters
// (also the legacy key "type"), head_dim or hidden_size / num_attention_heads, max_position_embeddings,
// original_max_position_embeddings (Phi-3), mrope_section (Qwen2-VL): with a warning naming why when
// it has a model_type (remote code, a type not in the table), silently when it has none (a bare RoPE
// description). warnings (optional) receives those and the model plan's.
RopeConfig rope_config_from_hf_json(const std::string& json_text,
                                    std::vector<std::string>* warnings = nullptr);
RopeConfig rope_config_from_hf_file(const std::string& path, std::vector<std::string>* warnings = nullptr);

}  // namespace posenc
