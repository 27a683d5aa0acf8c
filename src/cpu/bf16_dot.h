// src/cpu/bf16_dot.h: the attention forward's logits q . k on bf16 keys, and its P V on bf16 values
// with rounded probabilities (AttentionConfig::round_probabilities), with the CPU's bf16 dot
// product (vdpbf16ps, AVX512_BF16: 32 bf16 products per instruction accumulated into 16 fp32 lanes,
// twice the multiply-adds of an fp32 FMA). The products are exact: a bf16 x bf16 product fits an
// fp32, and an fp32 query row is split into the fewest bf16 parts (at most 3: 8 + 8 + 8 significant
// bits) that sum to it exactly for |q| >= 2^-100, so q . k = sum over parts of part . k with every
// product exact and fp32 accumulation, as the FMA path; only the summation order differs. Below
// that, vdpbf16ps treats bf16 inputs under FLT_MIN as zero, so parts under 2^-126 are lost (an error
// under 2^-126 |k| per dim), and an infinite key times a zero part gives NaN where an FMA gives inf.
// A query block of bf16 values needs one part (the only case the attention uses: with three, the
// dot costs 1.5 instructions per element where widening the keys for FMAs costs 1).
#pragma once
#include <cstdint>
#include <vector>

namespace posenc::cpu {

// Whether this CPU has vdpbf16ps and the path is enabled.
bool bf16_dot_available();
// Tests switch the path off to cover the widening one on the same machine (default: on, unless the
// environment sets POSENC_BF16_DOT=0).
void set_bf16_dot_enabled(bool enabled);

// Whether the forward's P V with rounded probabilities takes vdpbf16ps (bf16_tile_values): where the
// path is available and preferred. Preferred by default where the CPU issues vdpbf16ps at the FMA's
// instruction rate, twice its multiply-adds: AMD's (Zen 4: 469 vs 234 GFLOP/s, BENCHMARKS.md). Intel
// Sapphire Rapids issues it at half that rate (151 vs 305 GFLOP/s on 2 threads): no more multiply-adds
// than FMAs, and the pair packing made its prefill 12-23% slower there, so P V stays on FMAs. The q.k
// dots pay on both (they replace widening the keys). Tests prefer it to run the kernel on any such CPU.
bool bf16_value_dots_available();
bool cpu_prefers_bf16_value_dots();
void set_bf16_value_dots_preferred(bool preferred);

// A block of query rows as bf16 parts: part `part` of row i at row(part, i), `dim` elements each
// (D rounded up to a multiple of 32, zero-padded, so the kernels load whole vectors).
struct Bf16Queries {
  std::vector<uint16_t> data;
  int64_t m = 0, dim = 0, parts = 0;
  const uint16_t* row(int64_t part, int64_t i) const { return data.data() + (part * m + i) * dim; }
};
// q: m rows of D fp32 (row stride q_stride), split exactly into out.
void split_queries(const float* q, int64_t q_stride, int64_t m, int64_t D, Bf16Queries& out);

// S (q.m x n, row stride ld) = scale q k^T; k: n rows of D bf16 (row stride k_stride). The
// decode path: key rows read where they are (a long cache is neither packed nor widened).
void bf16_row_logits(const Bf16Queries& q, int64_t D, const uint16_t* k, int64_t k_stride, int64_t n,
                     float scale, float* S, int64_t ld);

// K^T of nk keys in pairs, the operand layout of vdpbf16ps: element (d, j) at
// ((d / 2) nk + j) 2 + d % 2, for d < D rounded up to even (zero there).
int64_t key_pairs_size(int64_t D, int64_t nk);
void pack_key_pairs(const uint16_t* k, int64_t k_stride, int64_t D, int64_t nk, uint16_t* pairs);

// S (q.m x n, row stride ld) = scale q k^T for keys [j0, j0 + n) of packed pairs of nk keys.
void bf16_tile_logits(const Bf16Queries& q, int64_t D, const uint16_t* pairs, int64_t nk, int64_t j0,
                      int64_t n, float scale, float* S, int64_t ld);

// P V with the pairs running over keys: the n <= 64 value rows of a tile (Dv bf16 each, row stride
// v_stride) in pairs of rows, element (j, d) at ((j / 2) width + d) 2 + j % 2 with width = Dv rounded
// up to 16 (zero there, and in the pair of an odd n's last row), packed once per tile for every
// query row of it (value_pairs_size elements).
int64_t value_pairs_size(int64_t Dv, int64_t n);
void pack_value_pairs(const uint16_t* v, int64_t v_stride, int64_t n, int64_t Dv, uint16_t* pairs);

// O (m x Dv, row stride ldo) += P V for the tile's n keys: P (m x n, row stride ldp) holds bf16
// values (probabilities rounded once to bf16 by the softmax: the top 16 bits of each are read), so
// every product is exact and sums are fp32, as the FMA path over the same rounded P; vdpbf16ps
// flushes a probability under 2^-126 to zero (an error under 2^-126 |v| per key) and subnormal sums.
void bf16_tile_values(int64_t m, int64_t n, int64_t Dv, const float* P, int64_t ldp, const uint16_t* pairs,
                      float* O, int64_t ldo);

}  // namespace posenc::cpu
