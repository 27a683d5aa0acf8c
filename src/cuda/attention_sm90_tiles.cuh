// src/cuda/attention_sm90_tiles.cuh: the tiles of the Hopper attention forward (src/cuda/attention_sm90.cu)
// on CuTe's SM90 atoms, and the layout algebra that turns its accumulators into rows and operands.
// Host-evaluable: tests/cuda/test_cute_layouts.cu checks these maps without a GPU.
//   wgmma m64nNk16 (bf16 or fp16 in, f32 accumulators), issued by a warpgroup (4 warps, 128 threads); two
//   consumer warpgroups stacked along M: a block's 128 query rows, 64 each;
//   S = Q K^T: both operands in shared memory (K-major: the head dim contiguous), a (128, 128) tile of keys
//   (128, 64) at heads of 256;
//   O += P V: P from registers (the accumulators of S rounded to the storage type), V in shared memory read
//   as (head dim, keys), MN-major (its rows, the keys, are the reduction; the head dim is contiguous);
//   Q, K and V in 128-byte-swizzled atoms of 8 rows x 64 columns (GMMA's canonical K-major layout), which
//   the tensor-memory accelerator (TMA) writes and wgmma reads in the same swizzle; K and V in kStages
//   buffers.
#pragma once
#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

namespace posenc::cuda {

// kHeadDim, kHeadDimV: the q / k and the v heads' columns (head dims below are zero-padded by the TMA): 64 /
// 64, 128 / 128, MLA's 192 / 128 and 256 / 256; kKeys: the key tile, 128, or 64 at 256 (two buffers of K and
// V within the 227 KB of shared memory and the accumulators of O and S within a consumer's registers) and
// with Transformer-XL's terms (its band of deltas beside them, src/cuda/attention_sm90_xl.h).
template <class Element, int kHeadDim, int kHeadDimV = kHeadDim, int kKeys = kHeadDim == 256 ? 64 : 128>
struct AttentionSm90Tiles {
  static_assert((kHeadDim == 64 && kHeadDimV == 64) || (kHeadDim == 128 && kHeadDimV == 128) ||
                    (kHeadDim == 192 && kHeadDimV == 128) || (kHeadDim == 256 && kHeadDimV == 256),
                "head tiles of 64, 128, 192 / 128 or 256 columns");
  static_assert(kKeys == 128 || kKeys == 64, "key tiles of 128 or 64");
  static_assert(kKeys == 64 || kHeadDim != 256, "heads of 256: key tiles of 64");
  static constexpr int kBlockM = 128, kBlockN = kKeys, kStages = 2;
  static constexpr int kConsumers = 2;                     // warpgroups of 64 rows each
  static constexpr int kThreads = 128 * (kConsumers + 1);  // and one producer warpgroup
  using MmaS = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kHeadDim>>>(),
      cute::Layout<cute::Shape<cute::Int<kConsumers>, cute::_1, cute::_1>>{}));
  using MmaO = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kHeadDimV>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      cute::Layout<cute::Shape<cute::Int<kConsumers>, cute::_1, cute::_1>>{}));
  using Atom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  using SmemQ = decltype(cute::tile_to_shape(Atom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  // K and V: (keys, head dim, stage).
  using SmemK = decltype(cute::tile_to_shape(
      Atom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  using SmemV = decltype(cute::tile_to_shape(
      Atom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDimV>, cute::Int<kStages>>{}));
  // V as (head dim, keys, stage): the B operand of P V.
  using SmemVt = decltype(cute::composition(
      SmemV{},
      cute::make_layout(cute::Shape<cute::Int<kHeadDimV>, cute::Int<kBlockN>, cute::Int<kStages>>{},
                        cute::Stride<cute::Int<kBlockN>, cute::_1, cute::Int<kBlockN * kHeadDimV>>{})));
  // Bytes the TMA writes per K, V or Q tile (a whole box, rows and columns past the tensor zero-filled).
  static constexpr int kKBytes = kBlockN * kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kVBytes = kBlockN * kHeadDimV * static_cast<int>(sizeof(Element));
  static constexpr int kQBytes = kBlockM * kHeadDim * static_cast<int>(sizeof(Element));
};

// A wgmma accumulator fragment ((2, 2, N / 8), M, N) as (rows, cols) = ((2, M), ((2, N / 8), N)): values
// c[v] of thread t = 32 w + l at row 16 w + l / 4 + 8 ((v / 2) % 2) and column 8 (v / 4) + 2 (l % 4) + v % 2.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto gmma_accumulator_rows_cols(Layout layout) {
  using namespace cute;
  static_assert(decltype(rank<0>(layout))::value == 3 && decltype(rank(layout))::value == 3);
  return make_layout(make_layout(get<0, 1>(layout), get<1>(layout)),
                     make_layout(make_layout(get<0, 0>(layout), get<0, 2>(layout)), get<2>(layout)));
}

// The accumulators of S (M x N) as the A operand of P V in registers (M x K, K = N): the k16 operand tile's
// ((2, 2, 2), M, K / 16) values are two n8 column groups of the accumulators, ((2, 2, N / 8), M, N) ->
// ((2, 2, 2), M, (N / 16, N)).
template <class Layout>
CUTE_HOST_DEVICE constexpr auto gmma_accumulator_as_operand_a(Layout layout) {
  using namespace cute;
  static_assert(decltype(rank<0>(layout))::value == 3 && decltype(rank(layout))::value == 3);
  const auto groups = logical_divide(get<0, 2>(layout), Shape<_2>{});  // ((2, N / 16))
  return make_layout(make_layout(get<0, 0>(layout), get<0, 1>(layout), get<0, 0>(groups)), get<1>(layout),
                     make_layout(get<0, 1>(groups), get<2>(layout)));
}

}  // namespace posenc::cuda

namespace posenc::cuda {

// The tiles of the Hopper attention backward (src/cuda/attention_backward_sm90.cu): a block owns 128 keys of
// a kv head (two consumer warpgroups of 64 keys each, stacked along M) and walks row tiles of 64 queries:
//   S^T = K Q^T and dP^T = V dO^T: (keys, rows), both operands K-major in shared memory;
//   dV += P^T dO and dK += dS^T Q: (keys, head dim), A from registers (S^T's and dP^T's accumulators turned
//   into P^T and dS^T, rounded to the storage type), B = dO or Q read as (head dim, rows), MN-major;
//   dQ = dS K: (rows, head dim), A = dS in shared memory with the rows contiguous (MN-major: dS^T's
//   accumulators stored as they are), B = K read as (head dim, keys), MN-major; kHeadDim / 64 warpgroups side
//   by side along the head dim, 64 columns each.
template <class Element, int kHeadDim>
struct AttentionBackwardSm90Tiles {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head tiles of 64 or 128 columns");
  static constexpr int kBlockM = 64, kBlockN = 128, kStages = 2;
  static constexpr int kConsumers = 2;                     // warpgroups of 64 keys each
  static constexpr int kThreads = 128 * (kConsumers + 1);  // and one producer warpgroup
  static constexpr int kDQGroups = kHeadDim / 64;          // the warpgroups computing dQ
  // Floats per row of a tile's d logit in shared memory, (rows, keys) for the learned table's gradient: the
  // consumers' stores (rows 2 (lane % 4) + 8 j, keys lane / 4) and the diagonals' loads (consecutive keys)
  // each meet 32 banks.
  static constexpr int kGradStride = kBlockN + 4;
  using MmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockM>, cute::Int<kHeadDim>>>(),
      cute::Layout<cute::Shape<cute::Int<kConsumers>, cute::_1, cute::_1>>{}));
  using MmaKV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kHeadDim>, cute::Int<kBlockM>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      cute::Layout<cute::Shape<cute::Int<kConsumers>, cute::_1, cute::_1>>{}));
  using MmaDQ = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::Int<kBlockM>, cute::_64, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::MN, cute::GMMA::Major::MN>(),
      cute::Layout<cute::Shape<cute::_1, cute::Int<kDQGroups>, cute::_1>>{}));
  using Atom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  // K and V: (keys, head dim); K as (head dim, keys): the B operand of dS K.
  using SmemKV =
      decltype(cute::tile_to_shape(Atom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  using SmemKt = decltype(cute::composition(
      SmemKV{}, cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{},
                                  cute::Stride<cute::Int<kBlockN>, cute::_1>{})));
  // Q and dO: (rows, head dim, stage); as (head dim, rows, stage): the B operands of dS^T Q and P^T dO.
  using SmemRows = decltype(cute::tile_to_shape(
      Atom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  using SmemRowsT = decltype(cute::composition(
      SmemRows{},
      cute::make_layout(cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockM>, cute::Int<kStages>>{},
                        cute::Stride<cute::Int<kBlockM>, cute::_1, cute::Int<kBlockM * kHeadDim>>{})));
  // dS: (rows, keys), the rows contiguous in 128-byte-swizzled atoms of 64 rows x 8 keys.
  using SmemDS = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                              cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));
  static constexpr int kKeyBytes = kBlockN * kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kRowBytes = kBlockM * kHeadDim * static_cast<int>(sizeof(Element));
};

// The learned table's gradient on the sm_90a backward: with default positions (row i of a problem of nq rows
// and nk keys at position nk - nq + i, key j at j), the pairs of row tile m (64 rows) and key tile n (128
// keys) on diagonal e = key - row + 63 (0 .. 190) lie at one distance, k_pos - q_pos:
CUTE_HOST_DEVICE constexpr int64_t sm90_table_distance(int64_t nq, int64_t nk, int64_t m, int64_t n, int e) {
  return n * 128 - (nk - nq + m * 64) - 63 + e;
}
// and their sum goes to the lookup's entry d + limit strictly inside (-limit, limit), else to an end (entry 0
// at d <= -limit, entry 2 limit past it), where the tile's diagonals are summed first: the entry the tiled
// passes' clamp(d, -limit, limit) + limit gives each pair.
enum class TableEnd { none, low, high };
CUTE_HOST_DEVICE constexpr TableEnd sm90_table_end(int64_t d, int64_t limit) {
  return d <= -limit ? TableEnd::low : d >= limit ? TableEnd::high : TableEnd::none;
}

}  // namespace posenc::cuda
