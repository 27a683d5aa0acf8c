// src/cpu/bf16_dot.cc: vdpbf16ps kernels of the attention forward's logits and rounded P V (see
// bf16_dot.h). Written
// with AVX-512 intrinsics in functions compiled for avx512_bf16 (Highway 1.0.3 has no target with
// it: its bf16 dot emulates by widening) and called only when the CPU reports it.
#include "src/cpu/bf16_dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "src/half.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define POSENC_BF16_DOT 1
#else
#define POSENC_BF16_DOT 0
#endif

namespace posenc::cpu {
namespace {
// POSENC_BF16_DOT=0 switches the path off (the widening one then runs, as on CPUs without it).
std::atomic<bool> enabled{[] {
  const char* env = std::getenv("POSENC_BF16_DOT");
  return !(env && std::strcmp(env, "0") == 0);
}()};

bool cpu_has_bf16_dot() {
#if POSENC_BF16_DOT
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

// The top 16 bits of x: a bf16 whose residual x - part is exact in fp32 (truncation, unlike rounding,
// never overflows to inf near FLT_MAX).
inline uint16_t truncated_bf16(float x) { return static_cast<uint16_t>(detail::f32_bits(x) >> 16); }
}  // namespace

bool bf16_dot_available() { return enabled.load(std::memory_order_relaxed) && cpu_has_bf16_dot(); }
void set_bf16_dot_enabled(bool on) { enabled.store(on, std::memory_order_relaxed); }

bool cpu_prefers_bf16_value_dots() {
#if POSENC_BF16_DOT
  static const bool amd = [] {
    __builtin_cpu_init();  // value_dots_preferred's initializer may run before the library's constructors
    return __builtin_cpu_is("amd");
  }();
  return amd;
#else
  return false;
#endif
}
namespace {
std::atomic<bool> value_dots_preferred{cpu_prefers_bf16_value_dots()};
}
bool bf16_value_dots_available() {
  return value_dots_preferred.load(std::memory_order_relaxed) && bf16_dot_available();
}
void set_bf16_value_dots_preferred(bool preferred) {
  value_dots_preferred.store(preferred, std::memory_order_relaxed);
}

void split_queries(const float* q, int64_t q_stride, int64_t m, int64_t D, Bf16Queries& out) {
  out.m = m, out.dim = (D + 31) / 32 * 32;
  out.data.assign(static_cast<size_t>(3 * m * out.dim), 0);
  int64_t parts = 1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t d = 0; d < D; ++d) {
      const float x = q[i * q_stride + d];
      uint16_t* hi = out.data.data() + i * out.dim + d;
      if (!std::isfinite(x)) {  // inf and NaN propagate through the first part alone
        *hi = detail::f32_to_bf16(x);
        continue;
      }
      // x = hi + mid + lo exactly: each part takes the next 8 significant bits of the 24.
      *hi = truncated_bf16(x);
      const float r = x - detail::bf16_to_f32(*hi);
      if (r == 0) continue;
      const uint16_t mid = truncated_bf16(r), lo = truncated_bf16(r - detail::bf16_to_f32(mid));
      hi[m * out.dim] = mid, hi[2 * m * out.dim] = lo;
      parts = std::max<int64_t>(parts, (lo & 0x7fffu) ? 3 : (mid & 0x7fffu) ? 2 : 1);  // -0 is no part
    }
  out.parts = parts;
}

int64_t key_pairs_size(int64_t D, int64_t nk) { return (D + 1) / 2 * nk * 2; }
int64_t value_pairs_size(int64_t Dv, int64_t n) { return (n + 1) / 2 * ((Dv + 15) / 16 * 16) * 2; }

void pack_key_pairs(const uint16_t* k, int64_t k_stride, int64_t D, int64_t nk, uint16_t* pairs) {
  for (int64_t j = 0; j < nk; ++j) {
    const uint16_t* row = k + j * k_stride;
    for (int64_t d = 0; d < D; ++d) pairs[((d / 2) * nk + j) * 2 + d % 2] = row[d];
    if (D % 2) pairs[((D / 2) * nk + j) * 2 + 1] = 0;
  }
}

#if POSENC_BF16_DOT
// GCC 12's unpack and shuffle intrinsics pass _mm512_undefined_ps() as the unused merge source, which
// its -Wuninitialized (-Wmaybe-uninitialized under ASan) reports at every use (GCC bug 105593, fixed
// in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
#define POSENC_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// One vector of the 16 sums of v[0..16): lane t = sum of v[t]'s lanes, in a fixed order.
POSENC_BF16_TARGET inline __m512 sum16(const __m512* v) {
  __m512 w[8], x[4];
  for (int t = 0; t < 8; ++t)  // per 128-bit lane: v[2t] at positions 0, 2 and v[2t+1] at 1, 3
    w[t] =
        _mm512_add_ps(_mm512_unpacklo_ps(v[2 * t], v[2 * t + 1]), _mm512_unpackhi_ps(v[2 * t], v[2 * t + 1]));
  for (int t = 0; t < 4; ++t) {  // per 128-bit lane: v[4t .. 4t+4) at positions 0..3
    const __m512d a = _mm512_castps_pd(w[2 * t]), b = _mm512_castps_pd(w[2 * t + 1]);
    x[t] =
        _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Sum the four 128-bit lanes, x[t] going to lane t.
  const __m512 y0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xdd));
  const __m512 y1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, 0x88), _mm512_shuffle_f32x4(y0, y1, 0xdd));
}

inline __mmask32 first_bits32(int64_t n) { return n >= 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1; }
inline __mmask16 first_bits16(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// S rows [i0, i0 + kRows), keys [0, nb) of k, nb <= kKeys = 16 / kRows: one accumulator per pair,
// each key row read in order (a long cache streams from memory: reading 16 rows a chunk at a time
// measured slower), each chunk of 32 elements (the last one masked: no read past a key row of D)
// times every query part of the kRows rows; the 16 sums at once (sum16: lane r kKeys + t).
template <int kParts, int kRows>
POSENC_BF16_TARGET void row_block(const Bf16Queries& q, int64_t i0, int64_t D, const uint16_t* k,
                                  int64_t k_stride, int64_t nb, float scale, float* S, int64_t ld) {
  constexpr int kKeys = 16 / kRows;
  __m512 acc[16];
#pragma GCC unroll 16
  for (int t = 0; t < kKeys; ++t) {
    // Keys past nb: a zero mask reads nothing (at a valid address); no early exit, which would keep
    // GCC from unrolling (and the accumulators from registers).
    const uint16_t* kt = k + std::min<int64_t>(t, nb - 1) * k_stride;
    const __mmask32 live = t < nb ? ~__mmask32{0} : 0;
    __m512 a[kRows];  // this key's sums, in registers (GCC keeps acc[] on the stack across the loop)
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) a[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < D; c += 32) {
      const __m512bh kv = (__m512bh)_mm512_maskz_loadu_epi16(first_bits32(D - c) & live, kt + c);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
        for (int p = 0; p < kParts; ++p)
          a[r] = _mm512_dpbf16_ps(a[r], (__m512bh)_mm512_loadu_si512(q.row(p, i0 + r) + c), kv);
    }
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) acc[r * kKeys + t] = a[r];
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale)));
  for (int r = 0; r < kRows; ++r)
    for (int64_t t = 0; t < nb; ++t) S[(i0 + r) * ld + t] = sums[r * kKeys + t];
}

template <int kParts>
POSENC_BF16_TARGET void row_logits(const Bf16Queries& q, int64_t D, const uint16_t* k, int64_t k_stride,
                                   int64_t n, float scale, float* S, int64_t ld) {
  for (int64_t i = 0; i < q.m;) {
    const int rows = q.m - i >= 4 ? 4 : q.m - i >= 2 ? 2 : 1, keys = 16 / rows;
    for (int64_t j0 = 0; j0 < n; j0 += keys) {
      const int64_t nb = std::min<int64_t>(keys, n - j0);
      const uint16_t* kj = k + j0 * k_stride;
      if (rows == 4)
        row_block<kParts, 4>(q, i, D, kj, k_stride, nb, scale, S + j0, ld);
      else if (rows == 2)
        row_block<kParts, 2>(q, i, D, kj, k_stride, nb, scale, S + j0, ld);
      else
        row_block<kParts, 1>(q, i, D, kj, k_stride, nb, scale, S + j0, ld);
    }
    i += rows;
  }
}

// Rows [i0, i0 + kRows) of S, keys [j0, j0 + n), n <= 64: 4 vectors of 16 keys per row; per pair
// of dims, each row's pair (times each part) broadcast against the keys' pairs. S's rows hold 64
// (ld >= 64). The unroll pragmas keep the 16 accumulators in registers: without them GCC 12 stored
// every accumulator to the stack at each step (half the rate).
template <int kParts, int kRows>
POSENC_BF16_TARGET void tile_rows(const Bf16Queries& q, int64_t i0, int64_t D, const uint16_t* pairs,
                                  int64_t nk, int64_t j0, int64_t n, float scale, float* S, int64_t ld) {
  __mmask16 mask[4];
  for (int v = 0; v < 4; ++v) mask[v] = first_bits16(std::max<int64_t>(0, n - 16 * v));
  const uint16_t* qrow[kParts][kRows];
  for (int p = 0; p < kParts; ++p)
    for (int r = 0; r < kRows; ++r) qrow[p][r] = q.row(p, i0 + r);
  __m512 acc[kRows][4];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t pairs_per_row = (D + 1) / 2;
  for (int64_t l = 0; l < pairs_per_row; ++l) {
    const uint16_t* b = pairs + (l * nk + j0) * 2;
    __m512bh kv[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) kv[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], mask[v] ? b + 32 * v : b);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int p = 0; p < kParts; ++p) {
        int32_t pair;
        std::memcpy(&pair, qrow[p][r] + 2 * l, sizeof pair);
        const __m512bh qv = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], qv, kv[v]);
      }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
      _mm512_mask_storeu_ps(S + (i0 + r) * ld + 16 * v, mask[v], _mm512_mul_ps(acc[r][v], vscale));
}

// Rows [i0, i0 + kRows) of O, dims [c, c + 16 kVectors): per pair of keys, each row's two
// probabilities broadcast as one 32-bit pair against kVectors vectors of 16 dims x 2 keys. The sums
// start at zero and are added to O at the end, as TileGemm's accumulate. 4 x 4 accumulators, 4
// value vectors and a broadcast: 21 of the 32 registers.
template <int kRows, int kVectors>
POSENC_BF16_TARGET void value_block(const uint32_t* p_pairs, int64_t npairs, const uint16_t* pairs,
                                    int64_t width, int64_t c, int64_t Dv, float* O, int64_t ldo) {
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t l = 0; l < npairs; ++l) {
    const uint16_t* b = pairs + (l * width + c) * 2;
    __m512bh vv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) vv[v] = (__m512bh)_mm512_loadu_si512(b + 32 * v);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m512bh pv = (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(p_pairs[r * 32 + l]));
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], pv, vv[v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      float* o = O + r * ldo + c + 16 * v;
      const __mmask16 live = first_bits16(Dv - c - 16 * v);
      _mm512_mask_storeu_ps(o, live, _mm512_add_ps(_mm512_maskz_loadu_ps(live, o), acc[r][v]));
    }
}

template <int kRows>
POSENC_BF16_TARGET void value_rows(const uint32_t* p_pairs, int64_t npairs, const uint16_t* pairs, int64_t Dv,
                                   float* O, int64_t ldo) {
  const int64_t width = (Dv + 15) / 16 * 16;
  for (int64_t c = 0; c < width; c += 64) {
    switch ((width - c) / 16) {
      case 1:
        value_block<kRows, 1>(p_pairs, npairs, pairs, width, c, Dv, O, ldo);
        break;
      case 2:
        value_block<kRows, 2>(p_pairs, npairs, pairs, width, c, Dv, O, ldo);
        break;
      case 3:
        value_block<kRows, 3>(p_pairs, npairs, pairs, width, c, Dv, O, ldo);
        break;
      default:
        value_block<kRows, 4>(p_pairs, npairs, pairs, width, c, Dv, O, ldo);
    }
  }
}

// Rows 2l and 2l + 1 interleaved 16 dims at a time: element t of row 2l to lane pair (t, 0), of
// row 2l + 1 to (t, 1), by one two-source word permute (masked loads: zeros past Dv and past n).
POSENC_BF16_TARGET void pack_value_pairs_avx512(const uint16_t* v, int64_t v_stride, int64_t n, int64_t Dv,
                                                uint16_t* pairs) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                           37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                           11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i index = _mm512_load_si512(kInterleave);
  const int64_t width = (Dv + 15) / 16 * 16;
  for (int64_t l = 0; l < (n + 1) / 2; ++l) {
    const uint16_t* even = v + 2 * l * v_stride;
    const uint16_t* odd = 2 * l + 1 < n ? even + v_stride : even;
    const __mmask16 odd_live = 2 * l + 1 < n ? __mmask16(0xffff) : __mmask16(0);
    for (int64_t c = 0; c < width; c += 16) {
      const __mmask16 live = first_bits16(Dv - c);
      const __m512i a = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(live, even + c));
      const __m512i b = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(live & odd_live, odd + c));
      _mm512_storeu_si512(pairs + (l * width + c) * 2, _mm512_permutex2var_epi16(a, index, b));
    }
  }
}

template <int kParts>
POSENC_BF16_TARGET void tile_logits(const Bf16Queries& q, int64_t D, const uint16_t* pairs, int64_t nk,
                                    int64_t j0, int64_t n, float scale, float* S, int64_t ld) {
  int64_t i = 0;
  for (; i + 4 <= q.m; i += 4) tile_rows<kParts, 4>(q, i, D, pairs, nk, j0, n, scale, S, ld);
  for (; i < q.m; ++i) tile_rows<kParts, 1>(q, i, D, pairs, nk, j0, n, scale, S, ld);
}
}  // namespace

void bf16_row_logits(const Bf16Queries& q, int64_t D, const uint16_t* k, int64_t k_stride, int64_t n,
                     float scale, float* S, int64_t ld) {
  switch (q.parts) {
    case 1:
      return row_logits<1>(q, D, k, k_stride, n, scale, S, ld);
    case 2:
      return row_logits<2>(q, D, k, k_stride, n, scale, S, ld);
    default:
      return row_logits<3>(q, D, k, k_stride, n, scale, S, ld);
  }
}

void bf16_tile_logits(const Bf16Queries& q, int64_t D, const uint16_t* pairs, int64_t nk, int64_t j0,
                      int64_t n, float scale, float* S, int64_t ld) {
  switch (q.parts) {
    case 1:
      return tile_logits<1>(q, D, pairs, nk, j0, n, scale, S, ld);
    case 2:
      return tile_logits<2>(q, D, pairs, nk, j0, n, scale, S, ld);
    default:
      return tile_logits<3>(q, D, pairs, nk, j0, n, scale, S, ld);
  }
}
void pack_value_pairs(const uint16_t* v, int64_t v_stride, int64_t n, int64_t Dv, uint16_t* pairs) {
  pack_value_pairs_avx512(v, v_stride, n, Dv, pairs);
}

void bf16_tile_values(int64_t m, int64_t n, int64_t Dv, const float* P, int64_t ldp, const uint16_t* pairs,
                      float* O, int64_t ldo) {
  const int64_t npairs = (n + 1) / 2;
  // Each row's probabilities as pairs (key 2l in the low half, 2l + 1 in the high half; zero past n).
  uint32_t p_pairs[4 * 32];
  for (int64_t i = 0; i < m;) {
    const int rows = m - i >= 4 ? 4 : 1;
    for (int r = 0; r < rows; ++r) {
      const float* p = P + (i + r) * ldp;
      for (int64_t l = 0; l < npairs; ++l) {
        const uint32_t lo = detail::f32_bits(p[2 * l]) >> 16,
                       hi = 2 * l + 1 < n ? detail::f32_bits(p[2 * l + 1]) & 0xffff0000u : 0;
        p_pairs[r * 32 + l] = hi | lo;
      }
    }
    if (rows == 4)
      value_rows<4>(p_pairs, npairs, pairs, Dv, O + i * ldo, ldo);
    else
      value_rows<1>(p_pairs, npairs, pairs, Dv, O + i * ldo, ldo);
    i += rows;
  }
}
#pragma GCC diagnostic pop
#else
// Never called: bf16_dot_available() is false.
void bf16_row_logits(const Bf16Queries&, int64_t, const uint16_t*, int64_t, int64_t, float, float*, int64_t) {
}
void bf16_tile_logits(const Bf16Queries&, int64_t, const uint16_t*, int64_t, int64_t, int64_t, float, float*,
                      int64_t) {}
void pack_value_pairs(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*) {}
void bf16_tile_values(int64_t, int64_t, int64_t, const float*, int64_t, const uint16_t*, float*, int64_t) {}
#endif

}  // namespace posenc::cpu
