// tests/cuda/test_cute_layouts.cu: the accumulator layouts of the tensor-core tiles the CUDA attention is
// built on, evaluated on the host (no GPU): CuTe's map from (thread, value) of an accumulator fragment to
// (row, col) of the tile, against the fragment layouts the PTX ISA documents. The positional terms are
// applied per score from these coordinates (the query and key of each accumulator element), so the map
// must be known exactly: every element of the tile once, at the documented place.
//   mma.sync m16n8k16 (SM80), f32 accumulators, a warp: c[v] of lane l at
//     row = l / 4 + 8 (v / 2),  col = 2 (l % 4) + v % 2
//   wgmma m64nNk16 (SM90), f32 accumulators, a warpgroup of 4 warps: d[v] of thread t = 32 w + l at
//     row = 16 w + l / 4 + 8 ((v / 2) % 2),  col = 8 (v / 4) + 2 (l % 4) + v % 2
#include <gtest/gtest.h>

#include <algorithm>
#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "src/cuda/attention_sm90_tiles.cuh"
#include "src/cuda/attention_tiles.cuh"

namespace {
using namespace cute;

// Every (thread, value) of a tiled MMA's accumulators over an M x N identity tile, as (row, col).
template <class TiledMma, int M, int N, class Expect>
void check_accumulators(const TiledMma& mma, int threads, Expect expect) {
  const auto tile = make_identity_tensor(make_shape(Int<M>{}, Int<N>{}));
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < threads; ++t) {
    const auto frag = mma.get_slice(t).partition_C(tile);
    for (int v = 0; v < size(frag); ++v) {
      const auto rc = frag(v);
      const int row = int(get<0>(rc)), col = int(get<1>(rc));
      const auto [want_row, want_col] = expect(t, v);
      ASSERT_EQ(row, want_row) << "thread " << t << " value " << v;
      ASSERT_EQ(col, want_col) << "thread " << t << " value " << v;
      ASSERT_TRUE(seen.insert({row, col}).second) << "(" << row << ", " << col << ") twice";
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(M * N));
}

TEST(CuteLayouts, Sm80Mma16x8x16AccumulatorsAsThePtxIsaDocuments) {
  // Four warps stacked along M: a 64 x 8 tile, warp w owning rows [16 w, 16 w + 16).
  const auto mma = make_tiled_mma(MMA_Atom<SM80_16x8x16_F32BF16BF16F32_TN>{}, Layout<Shape<_4, _1, _1>>{});
  check_accumulators<decltype(mma), 64, 8>(mma, 128, [](int t, int v) {
    const int w = t / 32, l = t % 32;
    return std::pair<int, int>{16 * w + l / 4 + 8 * (v / 2), 2 * (l % 4) + v % 2};
  });
}

TEST(CuteLayouts, Sm90Gmma64x128x16AccumulatorsAsThePtxIsaDocuments) {
  const auto mma = make_tiled_mma(SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{});
  check_accumulators<decltype(mma), 64, 128>(mma, 128, [](int t, int v) {
    const int w = t / 32, l = t % 32;
    return std::pair<int, int>{16 * w + l / 4 + 8 * ((v / 2) % 2), 8 * (v / 4) + 2 * (l % 4) + v % 2};
  });
}

// The attention's tiles (src/cuda/attention_tiles.cuh), for bf16 and fp16 and each (q / k, v) tile pair.
template <class Element, int kQKDim, int kVDim>
void check_attention_tiles() {
  using T = posenc::cuda::AttentionTiles<Element, kQKDim, kVDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN;
  typename T::Mma mma;
  const auto scores = make_identity_tensor(make_shape(Int<BM>{}, Int<BN>{}));
  const auto pv_a = make_identity_tensor(make_shape(Int<BM>{}, Int<BN>{}));  // P as (rows, keys)
  for (int t = 0; t < T::kThreads; ++t) {
    const int w = t / 32, l = t % 32;
    const auto thr = mma.get_slice(t);
    const auto c = thr.partition_C(scores);
    // (rows, cols) view: row r of the thread is 16 w + l / 4 + 8 r on every column; columns in adjacent
    // pairs.
    const auto rc = make_tensor(c.data(), posenc::cuda::accumulator_rows_cols(c.layout()));
    ASSERT_EQ(int(size<0>(rc)), 2);
    for (int r = 0; r < size<0>(rc); ++r)
      for (int k = 0; k < size<1>(rc); ++k) {
        ASSERT_EQ(int(get<0>(rc(r, k))), 16 * w + l / 4 + 8 * r) << "thread " << t;
        if (k % 2 == 1) ASSERT_EQ(int(get<1>(rc(r, k))), int(get<1>(rc(r, k - 1))) + 1);
      }
    // The accumulators of S reshaped as the A operand of P V hold exactly the operand's (row, key) elements.
    const auto as_a = make_tensor(c.data(), posenc::cuda::accumulator_as_operand_a(c.layout()));
    const auto a = thr.partition_A(pv_a);
    ASSERT_EQ(int(size(as_a)), int(size(a)));
    for (int i = 0; i < size(a); ++i) {
      ASSERT_EQ(int(get<0>(as_a(i))), int(get<0>(a(i)))) << "thread " << t << " value " << i;
      ASSERT_EQ(int(get<1>(as_a(i))), int(get<1>(a(i)))) << "thread " << t << " value " << i;
    }
  }
  // V^T is V read by columns: element (d, n) of the transposed view is element (n, d) of the tile.
  const typename T::SmemVt vt;
  const typename T::SmemV v_tile;
  for (int d = 0; d < kVDim; ++d)
    for (int n = 0; n < BN; ++n) ASSERT_EQ(int(vt(d, n)), int(v_tile(n, d)));
  // The swizzled tiles are permutations of their elements.
  const typename T::SmemK k_tile;
  for (const auto& [cols, is_k] : {std::pair<int, bool>{kQKDim, true}, {kVDim, false}}) {
    std::set<int> offsets;
    for (int n = 0; n < BN; ++n)
      for (int d = 0; d < cols; ++d) offsets.insert(is_k ? int(k_tile(n, d)) : int(v_tile(n, d)));
    EXPECT_EQ(offsets.size(), size_t(BN * cols));
  }
  // The global copy: every element of a (64, D) tile once, in 16-byte runs of 8 along D starting at a
  // multiple of 8 (load_rows keeps or zeroes a run whole: a head dim that is a multiple of 8 never splits
  // one).
  typename T::GmemCopy copy;
  const auto tile = make_identity_tensor(make_shape(Int<BM>{}, Int<kQKDim>{}));
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < T::kThreads; ++t) {
    const auto part = copy.get_thread_slice(t).partition_S(tile);
    for (int i = 0; i < size(part); ++i) seen.insert({int(get<0>(part(i))), int(get<1>(part(i)))});
    for (int m = 0; m < size<1>(part); ++m)
      for (int k = 0; k < size<2>(part); ++k) {
        ASSERT_EQ(int(get<1>(part(0, m, k))) % 8, 0);
        for (int v = 1; v < size<0>(part); ++v)
          ASSERT_EQ(int(get<1>(part(v, m, k))), int(get<1>(part(0, m, k))) + v);
      }
  }
  EXPECT_EQ(seen.size(), size_t(BM * kQKDim));
}

// The backward's tiles: the 8-warp accumulators cover a (64, 64) tile once; P read transposed is P by
// columns; a (64, D) tile read as (D, 64) is the tile by columns; the 256-thread global copy covers (64, D)
// once.
template <class Element, int kHeadDim>
void check_backward_tiles() {
  using T = posenc::cuda::AttentionBackwardTiles<Element, kHeadDim>;
  typename T::Mma mma;
  for (const int cols : {64, kHeadDim}) {
    std::set<std::pair<int, int>> seen;
    const auto tile = make_identity_tensor(make_shape(Int<64>{}, cols));
    for (int t = 0; t < T::kThreads; ++t) {
      const auto c = mma.get_slice(t).partition_C(tile);
      for (int i = 0; i < size(c); ++i) seen.insert({int(get<0>(c(i))), int(get<1>(c(i)))});
    }
    EXPECT_EQ(seen.size(), size_t(64 * cols));
  }
  const typename T::SmemP p;
  const typename T::SmemPT pt;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) ASSERT_EQ(int(pt(c, r)), int(p(r, c)));
  const typename T::SmemRows rows;
  const typename T::SmemRowsT rows_t;
  for (int r = 0; r < 64; ++r)
    for (int d = 0; d < kHeadDim; ++d) ASSERT_EQ(int(rows_t(d, r)), int(rows(r, d)));
  typename T::GmemCopy copy;
  const auto tile = make_identity_tensor(make_shape(Int<64>{}, Int<kHeadDim>{}));
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < T::kThreads; ++t) {
    const auto part = copy.get_thread_slice(t).partition_S(tile);
    for (int i = 0; i < size(part); ++i) seen.insert({int(get<0>(part(i))), int(get<1>(part(i)))});
    for (int m = 0; m < size<1>(part); ++m)  // runs of 8 from a multiple of 8, as load_rows keeps or zeroes
      for (int k = 0; k < size<2>(part); ++k) ASSERT_EQ(int(get<1>(part(0, m, k))) % 8, 0);
  }
  EXPECT_EQ(seen.size(), size_t(64 * kHeadDim));
}

TEST(CuteLayouts, AttentionBackwardTiles) {
  check_backward_tiles<cutlass::bfloat16_t, 128>();
  check_backward_tiles<cutlass::half_t, 64>();
  check_backward_tiles<cutlass::bfloat16_t, 192>();
  check_backward_tiles<cutlass::half_t, 256>();
}

TEST(CuteLayouts, AttentionTilesBf16HeadDim128) { check_attention_tiles<cutlass::bfloat16_t, 128, 128>(); }
TEST(CuteLayouts, AttentionTilesFp16HeadDim64) { check_attention_tiles<cutlass::half_t, 64, 64>(); }
TEST(CuteLayouts, AttentionTilesWideQueryKeyHeads) {
  check_attention_tiles<cutlass::bfloat16_t, 192, 128>();
  check_attention_tiles<cutlass::half_t, 256, 128>();
}

// The Hopper forward's tiles (src/cuda/attention_sm90_tiles.cuh): the two consumer warpgroups' accumulators
// of S cover the (128, key tile) tile once, with row r of a thread's S and of its O the same query row (the
// row's softmax state is shared by both); S's accumulators reshaped as the A operand of P V hold exactly the
// operand's (row, key) elements; V^T is V read by columns; the shared-memory descriptors of each k16 step
// start at that step's first element, in the 128-byte swizzle.
template <class Element, int kHeadDim, int kHeadDimV = kHeadDim>
void check_sm90_tiles() {
  using T = posenc::cuda::AttentionSm90Tiles<Element, kHeadDim, kHeadDimV>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, D = kHeadDim, Dv = kHeadDimV;
  typename T::MmaS mma_s;
  typename T::MmaO mma_o;
  const auto scores = make_identity_tensor(make_shape(Int<BM>{}, Int<BN>{}));
  const auto outputs = make_identity_tensor(make_shape(Int<BM>{}, Int<Dv>{}));
  std::set<std::pair<int, int>> seen_s, seen_o;
  for (int t = 0; t < 128 * T::kConsumers; ++t) {
    const int g = t / 128, w = t % 128 / 32, l = t % 32;
    const auto c = mma_s.get_slice(t).partition_C(scores);
    const auto o = mma_o.get_slice(t).partition_C(outputs);
    const auto rc = make_tensor(c.data(), posenc::cuda::gmma_accumulator_rows_cols(c.layout()));
    const auto orc = make_tensor(o.data(), posenc::cuda::gmma_accumulator_rows_cols(o.layout()));
    ASSERT_EQ(int(size<0>(rc)), 2);
    ASSERT_EQ(int(size<0>(orc)), 2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < size<1>(rc); ++k) {
        ASSERT_EQ(int(get<0>(rc(r, k))), 64 * g + 16 * w + l / 4 + 8 * r) << "thread " << t;
        seen_s.insert({int(get<0>(rc(r, k))), int(get<1>(rc(r, k)))});
      }
      for (int k = 0; k < size<1>(orc); ++k) {
        ASSERT_EQ(int(get<0>(orc(r, k))), int(get<0>(rc(r, 0)))) << "thread " << t;
        seen_o.insert({int(get<0>(orc(r, k))), int(get<1>(orc(r, k)))});
      }
    }
    const auto as_a = make_tensor(c.data(), posenc::cuda::gmma_accumulator_as_operand_a(c.layout()));
    const auto a = mma_o.get_slice(t).partition_A(scores);
    ASSERT_EQ(int(size(as_a)), int(size(a)));
    ASSERT_EQ(int(size<2>(as_a)), int(size<2>(a)));
    for (int k = 0; k < size<2>(a); ++k)
      for (int i = 0; i < size<0>(a); ++i) {
        ASSERT_EQ(int(get<0>(as_a(i, 0, k))), int(get<0>(a(i, 0, k)))) << "thread " << t << " k " << k;
        ASSERT_EQ(int(get<1>(as_a(i, 0, k))), int(get<1>(a(i, 0, k)))) << "thread " << t << " k " << k;
      }
  }
  EXPECT_EQ(seen_s.size(), size_t(BM * BN));
  EXPECT_EQ(seen_o.size(), size_t(BM * Dv));
  const typename T::SmemK kv;
  const typename T::SmemV v;
  const typename T::SmemVt vt;
  std::set<int> offsets, v_offsets;
  for (int s = 0; s < T::kStages; ++s)
    for (int n = 0; n < BN; ++n) {
      for (int d = 0; d < D; ++d) offsets.insert(int(kv(n, d, s)));
      for (int d = 0; d < Dv; ++d) {
        ASSERT_EQ(int(vt(d, n, s)), int(v(n, d, s)));
        v_offsets.insert(int(v(n, d, s)));
      }
    }
  EXPECT_EQ(offsets.size(), size_t(T::kStages * BN * D));
  EXPECT_EQ(v_offsets.size(), size_t(T::kStages * BN * Dv));
  EXPECT_EQ(*offsets.rbegin(), T::kStages * BN * D - 1);
  EXPECT_EQ(*v_offsets.rbegin(), T::kStages * BN * Dv - 1);
  // The shared-memory descriptors: bits [62, 64) the layout type (1: the 128-byte swizzle); bits [0, 14) the
  // start address in 16-byte units, of which the host sees only each k16 step's offset from the first (CuTe
  // reads the tile's own address on the device alone): that step's first element.
  Element* base = nullptr;
  const auto sQ = make_tensor(make_smem_ptr(base), typename T::SmemQ{});
  const auto sK = make_tensor(make_smem_ptr(base), typename T::SmemK{});
  const auto sVt = make_tensor(make_smem_ptr(base), typename T::SmemVt{});
  const auto thr_s = mma_s.get_slice(128);  // the second consumer warpgroup: rows 64 .. 127
  const auto thr_o = mma_o.get_slice(0);
  const auto q_desc = thr_s.partition_fragment_A(sQ);
  const auto k_desc = thr_s.partition_fragment_B(sK);
  const auto v_desc = thr_o.partition_fragment_B(sVt);
  const auto start = [](const GmmaDescriptor& d) { return int(d.bitfield.start_address_); };
  const auto type = [](const GmmaDescriptor& d) { return int(d.bitfield.layout_type_); };
  const typename T::SmemQ q_layout;
  const int units = 16 / int(sizeof(Element));  // elements per 16 bytes
  ASSERT_EQ(int(size<2>(q_desc)), D / 16);
  ASSERT_EQ(int(size<2>(k_desc)), D / 16);
  ASSERT_EQ(int(size<2>(v_desc)), BN / 16);
  for (int kb = 0; kb < D / 16; ++kb) {
    ASSERT_EQ(start(q_desc(0, 0, kb)) - start(q_desc(0, 0, 0)),
              (int(q_layout(64, 16 * kb)) - int(q_layout(64, 0))) / units)
        << "k step " << kb;
    ASSERT_EQ(start(k_desc(0, 0, kb, 1)) - start(k_desc(0, 0, 0, 1)),
              (int(kv(0, 16 * kb, 1)) - int(kv(0, 0, 1))) / units)
        << "k step " << kb;
    ASSERT_EQ(type(q_desc(0, 0, kb)), 1);
    ASSERT_EQ(type(k_desc(0, 0, kb, 1)), 1);
  }
  for (int kb = 0; kb < BN / 16; ++kb) {
    ASSERT_EQ(start(v_desc(0, 0, kb, 1)) - start(v_desc(0, 0, 0, 1)),
              (int(vt(0, 16 * kb, 1)) - int(vt(0, 0, 1))) / units)
        << "k step " << kb;
    ASSERT_EQ(type(v_desc(0, 0, kb, 1)), 1);
  }
}

// The Hopper backward's tiles (AttentionBackwardSm90Tiles): S^T's and dP^T's accumulators, (keys, rows), the
// two consumer warpgroups 64 keys each, cover the (128, 64) tile once; reshaped as the A operand of
// P^T dO and dS^T Q they hold exactly the operand's (key, row) elements; dV's and dK's accumulators cover
// (128, D) once; dQ's, (64, D) once over the dQ warpgroups, a thread's values i and i + 1 adjacent columns
// of a row (its 8-byte stores); Q^T, dO^T and K^T read Q, dO and K by columns; dS is one element per
// (row, key); the descriptors of dS (MN-major) and K^T step by 16 keys.
template <class Element, int kHeadDim>
void check_sm90_backward_tiles() {
  using T = posenc::cuda::AttentionBackwardSm90Tiles<Element, kHeadDim>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, D = kHeadDim;
  typename T::MmaSdP mma_sdp;
  typename T::MmaKV mma_kv;
  typename T::MmaDQ mma_dq;
  const auto scores = make_identity_tensor(make_shape(Int<BN>{}, Int<BM>{}));
  std::set<std::pair<int, int>> seen_s, seen_kv, seen_dq;
  for (int t = 0; t < 128 * T::kConsumers; ++t) {
    const int g = t / 128, w = t % 128 / 32, l = t % 32;
    const auto c = mma_sdp.get_slice(t).partition_C(scores);
    const auto rc = make_tensor(c.data(), posenc::cuda::gmma_accumulator_rows_cols(c.layout()));
    ASSERT_EQ(int(size<0>(rc)), 2);
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < size<1>(rc); ++k) {
        ASSERT_EQ(int(get<0>(rc(r, k))), 64 * g + 16 * w + l / 4 + 8 * r) << "thread " << t;
        seen_s.insert({int(get<0>(rc(r, k))), int(get<1>(rc(r, k)))});
      }
    const auto as_a = make_tensor(c.data(), posenc::cuda::gmma_accumulator_as_operand_a(c.layout()));
    const auto a = mma_kv.get_slice(t).partition_A(scores);
    ASSERT_EQ(int(size(as_a)), int(size(a)));
    for (int k = 0; k < size<2>(a); ++k)
      for (int i = 0; i < size<0>(a); ++i) {
        ASSERT_EQ(int(get<0>(as_a(i, 0, k))), int(get<0>(a(i, 0, k)))) << "thread " << t << " k " << k;
        ASSERT_EQ(int(get<1>(as_a(i, 0, k))), int(get<1>(a(i, 0, k)))) << "thread " << t << " k " << k;
      }
    const auto kv = mma_kv.get_slice(t).partition_C(make_identity_tensor(make_shape(Int<BN>{}, Int<D>{})));
    for (int i = 0; i < size(kv); ++i) seen_kv.insert({int(get<0>(kv(i))), int(get<1>(kv(i)))});
    if (t < 128 * T::kDQGroups) {
      const auto dq = mma_dq.get_slice(t).partition_C(make_identity_tensor(make_shape(Int<BM>{}, Int<D>{})));
      for (int i = 0; i < size(dq); ++i) {
        seen_dq.insert({int(get<0>(dq(i))), int(get<1>(dq(i)))});
        if (i % 2 == 1) {
          ASSERT_EQ(int(get<0>(dq(i))), int(get<0>(dq(i - 1))));
          ASSERT_EQ(int(get<1>(dq(i))), int(get<1>(dq(i - 1))) + 1);
        }
      }
    }
  }
  EXPECT_EQ(seen_s.size(), size_t(BN * BM));
  EXPECT_EQ(seen_kv.size(), size_t(BN * D));
  EXPECT_EQ(seen_dq.size(), size_t(BM * D));
  const typename T::SmemRows rows;
  const typename T::SmemRowsT rows_t;
  const typename T::SmemKV keys;
  const typename T::SmemKt keys_t;
  const typename T::SmemDS ds;
  std::set<int> ds_offsets;
  for (int d = 0; d < D; ++d) {
    for (int s = 0; s < T::kStages; ++s)
      for (int r = 0; r < BM; ++r) ASSERT_EQ(int(rows_t(d, r, s)), int(rows(r, d, s)));
    for (int n = 0; n < BN; ++n) ASSERT_EQ(int(keys_t(d, n)), int(keys(n, d)));
  }
  for (int r = 0; r < BM; ++r)
    for (int n = 0; n < BN; ++n) ds_offsets.insert(int(ds(r, n)));
  EXPECT_EQ(ds_offsets.size(), size_t(BM * BN));
  Element* base = nullptr;
  const auto thr_dq = mma_dq.get_slice(0);
  const auto ds_desc = thr_dq.partition_fragment_A(make_tensor(make_smem_ptr(base), typename T::SmemDS{}));
  const auto kt_desc = thr_dq.partition_fragment_B(make_tensor(make_smem_ptr(base), typename T::SmemKt{}));
  const auto start = [](const GmmaDescriptor& d) { return int(d.bitfield.start_address_); };
  const int units = 16 / int(sizeof(Element));
  ASSERT_EQ(int(size<2>(ds_desc)), BN / 16);
  ASSERT_EQ(int(size<2>(kt_desc)), BN / 16);
  for (int kb = 0; kb < BN / 16; ++kb) {
    ASSERT_EQ(start(ds_desc(0, 0, kb)) - start(ds_desc(0, 0, 0)),
              (int(ds(0, 16 * kb)) - int(ds(0, 0))) / units)
        << "k step " << kb;
    ASSERT_EQ(start(kt_desc(0, 0, kb)) - start(kt_desc(0, 0, 0)),
              (int(keys_t(0, 16 * kb)) - int(keys_t(0, 0))) / units)
        << "k step " << kb;
    ASSERT_EQ(int(ds_desc(0, 0, kb).bitfield.layout_type_), 1);
  }
}

// The learned table's gradient on the sm_90a backward: each consumer thread stores its S^T elements' d logit
// at row * kGradStride + key, and thread e < 191 then sums diagonal e (key - row = e - 63) over rows 0..63.
// Every element of the (64 rows, 128 keys) tile is stored once and read once, on its own diagonal; each
// warp's stores (one per accumulator element) and loads (one per row) meet 32 distinct banks.
TEST(CuteLayouts, AttentionSm90BackwardTableDiagonals) {
  using T = posenc::cuda::AttentionBackwardSm90Tiles<cutlass::bfloat16_t, 128>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, kStride = T::kGradStride, kBand = BM + BN - 1;
  typename T::MmaSdP mma_sdp;
  const auto scores = make_identity_tensor(make_shape(Int<BN>{}, Int<BM>{}));
  std::map<int, int> stored;                           // offset -> key - row
  std::map<std::pair<int, int>, std::set<int>> banks;  // (warp, element) -> its lanes' banks
  for (int t = 0; t < 128 * T::kConsumers; ++t) {
    const auto c = mma_sdp.get_slice(t).partition_C(scores);
    const auto rc = make_tensor(c.data(), posenc::cuda::gmma_accumulator_rows_cols(c.layout()));
    for (int k = 0; k < size<0>(rc); ++k)
      for (int j = 0; j < size<1>(rc); ++j) {
        const int key = int(get<0>(rc(k, j))), row = int(get<1>(rc(k, j)));
        const int offset = row * kStride + key;
        ASSERT_TRUE(stored.emplace(offset, key - row).second) << "thread " << t << " offset " << offset;
        std::set<int>& warp_banks = banks[std::make_pair(t / 32, k * int(size<1>(rc)) + j)];
        ASSERT_TRUE(warp_banks.insert(offset % 32).second) << "thread " << t;
      }
  }
  ASSERT_EQ(stored.size(), size_t(BM * BN));
  std::set<int> read;
  for (int row = 0; row < BM; ++row)
    for (int w = 0; w * 32 < kBand; ++w) {
      std::set<int> row_banks;
      for (int e = 32 * w; e < std::min(kBand, 32 * w + 32); ++e) {
        const int key = row + e - (BM - 1);
        if (key < 0 || key >= BN) continue;
        const int offset = row * kStride + key;
        ASSERT_EQ(stored.at(offset), e - (BM - 1));
        ASSERT_TRUE(read.insert(offset).second);
        ASSERT_TRUE(row_banks.insert(offset % 32).second) << "row " << row << " diagonal " << e;
      }
    }
  EXPECT_EQ(read.size(), size_t(BM * BN));
}

// The same gradient's bookkeeping over whole problems: each (row tile, key tile)'s diagonals summed, at
// their distance (sm90_table_distance) and entry or end (sm90_table_end), give every lookup entry the sum
// the tiled passes' rule gives it: each pair (row i at nk - nq + i, key j at j) at clamp(j - q_i, -L, L) + L.
// Decoding rows, more keys than rows and the reverse, limits 0 (both ends one entry), 1, 5, 40 and 400.
TEST(CuteLayouts, AttentionSm90BackwardTableDistances) {
  using posenc::cuda::TableEnd;
  uint64_t state = 7;
  const auto next = [&] {  // a fixed sequence in (-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(static_cast<int64_t>(state >> 11)) / 4503599627370496.0 - 1.0;
  };
  for (const auto& [nq, nk] :
       {std::pair<int64_t, int64_t>{70, 70}, {300, 650}, {129, 1000}, {2, 500}, {5, 3}})
    for (const int64_t limit : {0, 1, 5, 40, 400}) {
      std::vector<double> grad(static_cast<size_t>(nq * nk));
      for (double& g : grad) g = next();
      std::vector<double> want(2 * limit + 1), got(2 * limit + 1);
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t d = j - (nk - nq + i);
          want[std::clamp(d, -limit, limit) + limit] += grad[i * nk + j];
        }
      for (int64_t m = 0; m * 64 < nq; ++m)
        for (int64_t n = 0; n * 128 < nk; ++n)
          for (int e = 0; e < 191; ++e) {
            double sum = 0;
            for (int row = 0; row < 64; ++row) {
              const int key = row + e - 63;
              const int64_t i = m * 64 + row, j = n * 128 + key;
              if (key >= 0 && key < 128 && i < nq && j < nk) {
                ASSERT_EQ(j - (nk - nq + i), posenc::cuda::sm90_table_distance(nq, nk, m, n, e));
                sum += grad[i * nk + j];
              }
            }
            const int64_t d = posenc::cuda::sm90_table_distance(nq, nk, m, n, e);
            const TableEnd end = posenc::cuda::sm90_table_end(d, limit);
            got[end == TableEnd::low ? 0 : end == TableEnd::high ? 2 * limit : d + limit] += sum;
          }
      for (int64_t x = 0; x <= 2 * limit; ++x)
        ASSERT_NEAR(got[x], want[x], 1e-9)
            << "nq " << nq << " nk " << nk << " limit " << limit << " entry " << x;
    }
}

TEST(CuteLayouts, AttentionSm90BackwardTilesBf16HeadDim128) {
  check_sm90_backward_tiles<cutlass::bfloat16_t, 128>();
}
TEST(CuteLayouts, AttentionSm90BackwardTilesFp16HeadDim64) {
  check_sm90_backward_tiles<cutlass::half_t, 64>();
}

TEST(CuteLayouts, AttentionSm90TilesBf16HeadDim128) { check_sm90_tiles<cutlass::bfloat16_t, 128>(); }
TEST(CuteLayouts, AttentionSm90TilesFp16HeadDim64) { check_sm90_tiles<cutlass::half_t, 64>(); }
TEST(CuteLayouts, AttentionSm90TilesBf16HeadDims192And128) {
  check_sm90_tiles<cutlass::bfloat16_t, 192, 128>();
}
TEST(CuteLayouts, AttentionSm90TilesBf16HeadDim256) {
  using T = posenc::cuda::AttentionSm90Tiles<cutlass::bfloat16_t, 256>;
  static_assert(T::kBlockN == 64, "key tiles of 64 at heads of 256");
  check_sm90_tiles<cutlass::bfloat16_t, 256>();
}

}  // namespace
