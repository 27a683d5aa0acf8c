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

#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>
#include <set>
#include <utility>

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

}  // namespace
