// posenc/bias.h: encodings that add a scalar bias b_h(q_pos, k_pos) to the attention logits.
//
// Every bias here depends on the signed distance d = k_pos - q_pos only (T5's convention; DeBERTa
// uses q - k), so a block of (query, key) pairs is produced from a per-head lookup over the block's
// distances, without an S x S intermediate. Outputs are (H, Q, K): head, query, key.
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/tensor.h"

namespace posenc {

// ---------------------------------------------------------------- learned relative bias
// How a distance d = k - q becomes a table row.
enum class Bucketing : uint8_t {
  clipped,  // Shaw et al.-style clipping: row = clamp(d, -max_distance, max_distance) + max_distance
  t5,       // T5 (Raffel et al.): exact buckets near 0, log-spaced up to max_distance, then clamped
};

struct RelativeBiasConfig {
  int64_t heads = 0;
  Bucketing bucketing = Bucketing::t5;
  int64_t num_buckets = 32;    // t5 only
  int64_t max_distance = 128;  // t5: where log buckets end; clipped: K of [-K, K]
  bool bidirectional = true;   // t5 only: false is the causal (decoder) form

  static RelativeBiasConfig clipped(int64_t heads, int64_t max_distance);
  static RelativeBiasConfig t5(int64_t heads, int64_t num_buckets = 32, int64_t max_distance = 128,
                               bool bidirectional = true);
  int64_t num_rows() const;  // table rows: num_buckets, or 2 * max_distance + 1
};
void validate(const RelativeBiasConfig& config);

// T5's _relative_position_bucket for d = k - q, evaluated in float32 as T5 and HF do (the float
// rounding decides buckets that sit exactly on a log boundary).
int64_t t5_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets, int64_t max_distance);
int64_t relative_bias_row(const RelativeBiasConfig& config, int64_t relative_position);

// table (rows, H) as in nn.Embedding(rows, heads) (HF T5's relative_attention_bias.weight).
// out (H, Q, K) = table[row(k_pos[j] - q_pos[i]), h]. out (and grad_out, and alibi_bias's out) may
// be bf16 or fp16 with a unit stride on K: fp32 values rounded once; tables and their gradients fp32.
void relative_bias(const RelativeBiasConfig& config, ConstTensorView table, ConstTensorView q_positions,
                   ConstTensorView k_positions, TensorView out);
// grad_table (rows, H) += sum over (i, j) mapped to each row of grad_out (H, Q, K). Deterministic.
void relative_bias_backward(const RelativeBiasConfig& config, ConstTensorView grad_out,
                            ConstTensorView q_positions, ConstTensorView k_positions, TensorView grad_table);

// ---------------------------------------------------------------- ALiBi (Press et al. 2022)
enum class AlibiSlopes : uint8_t {
  bloom,  // Press et al. / BLOOM: 2^(-8i/n) for n a power of two; otherwise those of the closest
          // lower power of two, then every other slope of the next power of two.
  mpt,    // MPT's gen_slopes with alibi_bias_max: 2^(-i * max / n') for n' = next power of two,
          // reordered odd-then-even. With alibi_bias_max = 8 it yields the same slopes as bloom.
};
struct AlibiConfig {
  int64_t heads = 0;
  AlibiSlopes slopes = AlibiSlopes::bloom;
  double alibi_bias_max = 8.0;  // mpt only
  bool symmetric = false;       // false: -m (q - k) (causal; future keys are masked by attention)
                                // true:  -m |q - k| (bidirectional encoders)
};
void validate(const AlibiConfig& config);
std::vector<double> alibi_slopes(const AlibiConfig& config);  // (H,)
// out (H, Q, K). No parameters, so no backward.
void alibi_bias(const AlibiConfig& config, ConstTensorView q_positions, ConstTensorView k_positions,
                TensorView out);

}  // namespace posenc
