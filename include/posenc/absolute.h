// posenc/absolute.h: absolute encodings, added to the token embeddings.
//   sinusoidal (Vaswani et al. 2017), learned tables (BERT, GPT-2, ViT), binary codes (the textbook
//   counter-example of a good encoding: unique, but neighbours such as 7 = 0111 and 8 = 1000 are far apart).
#pragma once
#include <cstdint>
#include <vector>

#include "posenc/tensor.h"

namespace posenc {

// ---------------------------------------------------------------- sinusoidal
// Layout, dim = 8, frequencies w_0 > w_1 > w_2 > w_3:
//   interleaved (the paper):               [s0 c0 s1 c1 s2 c2 s3 c3]
//   split (tensor2tensor, fairseq, T-XL):  [s0 s1 s2 s3 c0 c1 c2 c3]
enum class SinusoidalLayout : uint8_t { interleaved, split };
// w_i = base^(-i / denominator):
//   model_dim (paper):                        denominator = dim / 2, i.e. base^(-2i/dim)
//   half_dim_minus_one (t2t, fairseq, CT2):   denominator = dim/2 - 1 (lowest frequency = 1/base)
enum class SinusoidalFrequencies : uint8_t { model_dim, half_dim_minus_one };

struct SinusoidalConfig {
  int64_t dim = 0;  // even for interleaved; odd allowed for split (last column zero, fairseq)
  double base = 10000.0;
  SinusoidalLayout layout = SinusoidalLayout::interleaved;
  SinusoidalFrequencies frequencies = SinusoidalFrequencies::model_dim;
  int64_t position_offset = 0;  // added to every position (fairseq: padding_idx + 1)
};
void validate(const SinusoidalConfig& config);
// "interleaved" / "split" and "model_dim" / "half_dim_minus_one": the names the CLI and Python use.
const char* sinusoidal_layout_name(SinusoidalLayout layout);
const char* sinusoidal_frequencies_name(SinusoidalFrequencies frequencies);
// The angular frequencies w_i (dim/2 values), in double.
std::vector<double> sinusoidal_frequencies(const SinusoidalConfig& config);

// out (N, dim) = PE(positions (N)). Positions may be any int64; angles are reduced in double.
void sinusoidal_table(const SinusoidalConfig& config, ConstTensorView positions, TensorView out);
// x (B, T, dim) += PE(positions), positions (T) or (B, T). Its backward is the identity on x.
void sinusoidal_add(const SinusoidalConfig& config, ConstTensorView positions, TensorView x);

// ---------------------------------------------------------------- learned
// table (max_len, dim). A position outside [0, max_len) is an error naming the position and
// max_len: a learned table cannot extrapolate, and posenc never clamps or reads out of bounds.
// out (N, dim) = table[positions (N)]
void learned_lookup(ConstTensorView table, ConstTensorView positions, TensorView out);
// x (B, T, dim) += table[positions], positions (T) or (B, T)
void learned_add(ConstTensorView table, ConstTensorView positions, TensorView x);
// grad_table (max_len, dim) += scatter of grad_out (N, dim) or (B, T, dim) by positions.
// Deterministic: the sum order does not depend on the thread count.
void learned_backward(ConstTensorView grad_out, ConstTensorView positions, TensorView grad_table);

// ---------------------------------------------------------------- binary
// Position p as its `bits` binary digits, most significant first (7 -> 0 1 1 1 with bits = 4),
// written as {0, 1} or, with signed_values, {-1, +1}. p must lie in [0, 2^bits): position 300
// with 8 bits is an error, which is why this code does not generalise past its bits.
struct BinaryConfig {
  int64_t bits = 0;  // 1..62
  bool signed_values = true;
};
void validate(const BinaryConfig& config);
int64_t binary_bits_for_length(int64_t max_len);  // ceil(log2(max_len)), at least 1
void binary_table(const BinaryConfig& config, ConstTensorView positions, TensorView out);  // (N, bits)

}  // namespace posenc
