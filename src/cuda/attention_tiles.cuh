// src/cuda/attention_tiles.cuh: the tensor-core tiles of the GPU attention (src/cuda/attention.cu) on CuTe's
// SM80 atoms, and the layout algebra that turns accumulators into rows and operands. Host-evaluable: the
// layout tests (tests/cuda/test_cute_layouts.cu) check these maps without a GPU.
//   mma.sync m16n8k16 (bf16 or fp16 in, f32 accumulators), 4 warps stacked along M: a 64 x 16 x 16 step;
//   Q, K, V tiles in shared memory in 8 x 64 swizzled atoms (Swizzle<3, 3, 3>: 16-byte chunks XOR-ed by row,
//   so ldmatrix reads 8 rows of a column block without bank conflicts); V read transposed (ldmatrix.trans)
//   as the B operand of P V; global tiles by cp.async, 16 bytes per thread, 8 threads per 64-column row.
#pragma once
#include <cstdint>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>
#include <type_traits>

#include "src/cuda/attention-inl.cuh"

namespace posenc::cuda {

// kQKDim: the q / k head's columns, kVDim: the v head's (the output's) columns a block computes; both whole
// 64-column atoms (head dims below them are zero-padded by load_rows).
template <class Element, int kQKDim, int kVDim>
struct AttentionTiles {
  static_assert(kQKDim % 64 == 0 && kVDim % 64 == 0, "head sizes of whole 64-column atoms");
  static constexpr int kBlockM = 64, kBlockN = 64, kWarps = 4, kThreads = 32 * kWarps;
  using MmaOp = std::conditional_t<std::is_same_v<Element, cutlass::bfloat16_t>,
                                   cute::SM80_16x8x16_F32BF16BF16F32_TN, cute::SM80_16x8x16_F32F16F16F32_TN>;
  using Mma =
      cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::Int<kWarps>, cute::_1, cute::_1>>,
                     cute::Tile<cute::Int<16 * kWarps>, cute::_16, cute::_16>>;
  using SmemAtom = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
  using SmemQ =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kQKDim>>{}));
  using SmemK =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kQKDim>>{}));
  using SmemV =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kVDim>>{}));
  // V (keys, dims) read as (dims, keys): the B operand of P V, K-major in the keys.
  using SmemVt = decltype(cute::composition(
      SmemV{}, cute::make_layout(cute::Shape<cute::Int<kVDim>, cute::Int<kBlockN>>{}, cute::GenRowMajor{})));
  using SmemVtPlain = decltype(cute::get_nonswizzle_portion(SmemVt{}));
  using GmemCopy = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{},
      cute::Layout<cute::Shape<cute::Int<kThreads / 8>, cute::_8>, cute::Stride<cute::_8, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using SmemCopyA = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyVt = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
};

// The backward's tiles: 8 warps, 4 along M and 2 along N (a 64 x 32 x 16 step), so that each of its five
// products (S = Q K^T, dP = dO V^T, dV = P^T dO, dK = dS^T Q, dQ = dS K) keeps its accumulators in registers;
// P and dS pass through shared memory as (64 rows, 64 keys) tiles, read transposed where a product takes them
// as (keys, rows); a (64, D) tile of Q, dO or K read as (D, 64) is the B operand where the rows are the
// reduction.
template <class Element, int kHeadDim>
struct AttentionBackwardTiles {
  static_assert(kHeadDim % 64 == 0, "head sizes of whole 64-column atoms");
  static constexpr int kBlockM = 64, kBlockN = 64, kWarps = 8, kThreads = 32 * kWarps;
  using MmaOp = typename AttentionTiles<Element, kHeadDim, kHeadDim>::MmaOp;
  using Mma = cute::TiledMMA<cute::MMA_Atom<MmaOp>, cute::Layout<cute::Shape<cute::_4, cute::_2, cute::_1>>,
                             cute::Tile<cute::_64, cute::_32, cute::_16>>;
  using SmemAtom = typename AttentionTiles<Element, kHeadDim, kHeadDim>::SmemAtom;
  using SmemRows = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::_64, cute::Int<kHeadDim>>{}));
  using SmemRowsT = decltype(cute::composition(
      SmemRows{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::_64>{}, cute::GenRowMajor{})));
  using SmemRowsTPlain = decltype(cute::get_nonswizzle_portion(SmemRowsT{}));
  using SmemP = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::_64, cute::_64>{}));
  using SmemPT = decltype(cute::composition(
      SmemP{}, cute::make_layout(cute::Shape<cute::_64, cute::_64>{}, cute::GenRowMajor{})));
  using SmemPTPlain = decltype(cute::get_nonswizzle_portion(SmemPT{}));
  using GmemCopy = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{},
      cute::Layout<cute::Shape<cute::Int<kThreads / 8>, cute::_8>, cute::Stride<cute::_8, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using SmemCopyN = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemCopyT = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
};

// An m16n8 accumulator fragment ((2, 2), M, N) as (rows, cols) = ((2, M), (2, N)): its values are c0 c1 on
// row l / 4 and c2 c3 on row l / 4 + 8, each pair at adjacent columns 2 (l % 4) + {0, 1}.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_rows_cols(Layout layout) {
  using namespace cute;
  static_assert(decltype(size<0>(layout))::value == 4 && decltype(rank(layout))::value == 3);
  const auto l = logical_divide(layout, Shape<_2>{});  // ((2, 2), M, N)
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}

// The accumulators of S (M x N) as the A operand of P V (M x K with K = N): two n8 accumulator tiles
// side by side are one k16 operand tile, ((2, 2), M, N) -> ((2, 2, 2), M, N / 2).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto accumulator_as_operand_a(Layout layout) {
  using namespace cute;
  static_assert(decltype(size<0>(layout))::value == 4 && decltype(rank(layout))::value == 3);
  const auto l = logical_divide(layout, Shape<Underscore, Underscore, _2>{});  // ((2, 2), M, (2, N / 2))
  return make_layout(make_layout(get<0>(l), get<2, 0>(l)), get<1>(l), get<2, 1>(l));
}

// acc += A B^T with both operands read from shared memory one k16 step ahead of the MMA.
template <class Mma, class Acc, class RA, class RB, class SA, class RAView, class SB, class RBView,
          class CopyA, class CopyB>
CUTE_DEVICE void tile_gemm(const Mma& mma, Acc& acc, RA& ra, RB& rb, const SA& sa, RAView& ra_view,
                           const SB& sb, RBView& rb_view, const CopyA& copy_a, const CopyB& copy_b) {
  using namespace cute;
  copy(copy_a, sa(_, _, 0), ra_view(_, _, 0));
  copy(copy_b, sb(_, _, 0), rb_view(_, _, 0));
  CUTE_UNROLL
  for (int i = 0; i < size<2>(ra); ++i) {
    if (i + 1 < size<2>(ra)) {
      copy(copy_a, sa(_, _, i + 1), ra_view(_, _, i + 1));
      copy(copy_b, sb(_, _, i + 1), rb_view(_, _, i + 1));
    }
    gemm(mma, ra(_, _, i), rb(_, _, i), acc);
  }
}

// acc += A B^T with A in registers (the probabilities) and B read from shared memory a step ahead.
template <class Mma, class Acc, class RA, class RB, class SB, class RBView, class CopyB>
CUTE_DEVICE void tile_gemm_registers_a(const Mma& mma, Acc& acc, const RA& ra, RB& rb, const SB& sb,
                                       RBView& rb_view, const CopyB& copy_b) {
  using namespace cute;
  copy(copy_b, sb(_, _, 0), rb_view(_, _, 0));
  CUTE_UNROLL
  for (int i = 0; i < size<2>(ra); ++i) {
    if (i + 1 < size<2>(ra)) copy(copy_b, sb(_, _, i + 1), rb_view(_, _, i + 1));
    gemm(mma, ra(_, _, i), rb(_, _, i), acc);
  }
}

// A (rows, padded head dim) global tile into shared memory: rows < n and columns < dim (a multiple of the 8
// elements a thread copies) by cp.async, the others zeroed: past the rows, their scores are masked and their
// values multiply zero probabilities (no NaN from stale memory); past the head dim, zero columns add nothing
// to Q K^T and give zero output columns, which are not stored. Nothing past n or dim is read.
template <class Copy, class G, class S, class C>
__device__ __forceinline__ void load_rows(const Copy& copy, const G& g, S&& s, const C& coords, int n,
                                          int dim) {
  CUTE_UNROLL
  for (int m = 0; m < cute::size<1>(g); ++m) {
    CUTE_UNROLL
    for (int k = 0; k < cute::size<2>(g); ++k) {
      if (cute::get<0>(coords(0, m, k)) < n && cute::get<1>(coords(0, m, k)) < dim)
        cute::copy(copy, g(cute::_, m, k), s(cute::_, m, k));
      else
        cute::clear(s(cute::_, m, k));
    }
  }
}

// The min and max of the tile's key positions over every warp's lanes (each warp computes them whole), and
// whether any is out of the exact range.
struct KeyRange {
  int64_t lo, hi;
  bool bad;
};
__device__ __forceinline__ KeyRange key_range(const int64_t* pos, int n) {
  const int lane = threadIdx.x % 32;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  bool bad = false;
  for (int j = lane; j < n; j += 32) {
    const int64_t p = pos[j];
    lo = p < lo ? p : lo, hi = p > hi ? p : hi;
    bad |= !position_in_range(p, 0);
  }
  CUTE_UNROLL
  for (int o = 16; o > 0; o /= 2) {
    const int64_t other_lo = __shfl_xor_sync(0xffffffffu, static_cast<long long>(lo), o);
    const int64_t other_hi = __shfl_xor_sync(0xffffffffu, static_cast<long long>(hi), o);
    lo = other_lo < lo ? other_lo : lo, hi = other_hi > hi ? other_hi : hi;
  }
  return {lo, hi, __any_sync(0xffffffffu, bad) != 0};
}

}  // namespace posenc::cuda
