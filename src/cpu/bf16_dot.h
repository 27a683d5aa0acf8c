// src/cpu/bf16_dot.h: the attention forward's logits q . k on bf16 keys with the CPU's bf16 dot
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

}  // namespace posenc::cpu
