// tests/test_attention_reference_backward.cc: the second oracle of attention's gradients
// (tests/attention_gradients.h) for every encoding.
//   1. The naive backward against central finite differences of the naive forward, in double.
//   2. The library's fused attention_backward against that naive backward, every element of every
//      gradient, across the shapes of the forward and backward tests, on every SIMD target.
#include "attention_gradients.h"

namespace posenc::test {
namespace {

TEST(AttentionReferenceBackward, MatchesFiniteDifferencesForEveryEncoding) {
  const std::vector<Case> cases = {
      {1, 5, 7, 2, 1, 4, true},                           // causal, GQA 2/1, queries at the end of the keys
      {2, 3, 6, 2, 2, 4, false, 3},                       // bidirectional, window 3
      {1, 6, 6, 2, 1, 4, true, 0, {0, 2, 6}, {0, 2, 6}},  // packed: two sequences
  };
  for (const Case& c : cases)
    for (Enc e : all_encs()) check_reference_against_finite_differences(c, e);
}

TEST(AttentionReferenceBackward, FullyMaskedRowsGiveZeroGradients) {
  // Queries at 7..9 of 10 keys, window 2 and causal: only keys 6..9 are visible. Query rows whose
  // keys are all masked must receive no gradient, and send none.
  const AttentionCase ac({1, 3, 10, 1, 1, 4, true, 2}, Enc::rope_t5);
  ref::AttentionProblem<double> p = ac.reference_problem(ac.flat());
  p.q_pos = {100, 101, 102};  // past every key: every row fully masked
  const std::vector<double> w = to_double(random_floats(3 * 4, 5));
  const auto g = ref::attention_backward<double>(
      p, ac.slice(ac.flat(), Params::q), ac.slice(ac.flat(), Params::k), ac.slice(ac.flat(), Params::v), w);
  for (const auto* x : {&g.q, &g.k, &g.v, &g.relative_table})
    EXPECT_EQ(*x, std::vector<double>(x->size(), 0.0));
}

const std::vector<Case>& grid() {
  static const std::vector<Case> cases = {
      {1, 70, 70, 2, 1, 40, true},
      {2, 3, 67, 2, 2, 24, false},
      {1, 1, 66, 2, 1, 8, true},
      {1, 1, 130, 4, 1, 64, true},
      {1, 5, 133, 2, 2, 66, true},
      {1, 67, 67, 2, 1, 16, true, 9},
      {1, 67, 67, 2, 2, 16, false, 5},
      {1, 76, 76, 2, 1, 8, true, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},
      {1, 76, 76, 2, 2, 8, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},
      {1, 2, 75, 2, 1, 8, true, 0, {0, 1, 2}, {0, 9, 75}},
  };
  return cases;
}

TEST(AttentionReferenceBackward, LibraryMatchesTheNaiveBackwardEverywhere) {
  for (const Case& c : grid())
    for (Enc e : all_encs()) {
      if ((e == Enc::transformer_xl || e == Enc::transformer_xl_t5) && c.Q * c.K * c.D > 40000)
        continue;  // keep the XL reference quick
      check_library_against_reference(c, e);
    }
  check_library_against_reference({1, 70, 70, 2, 1, 4, true}, Enc::transformer_xl);  // XL across tiles
  check_library_against_reference({1, 76, 76, 2, 2, 8, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},
                                  Enc::transformer_xl_t5);
}

TEST(AttentionReferenceBackward, LibraryMatchesTheNaiveBackwardOnEverySimdTarget) {
  for_each_cpu_target([](const std::string&) {
    for (Enc e : all_encs())
      check_library_against_reference(
          {1, 70, 70, 2, 1, e == Enc::transformer_xl || e == Enc::transformer_xl_t5 ? 6 : 66, true}, e);
    check_library_against_reference({2, 3, 67, 2, 2, 20, false}, Enc::t5);
    check_library_against_reference({2, 3, 130, 4, 2, 66, true}, Enc::rope_shaw);  // decode: key rows
    check_library_against_reference({1, 67, 67, 2, 1, 16, true, 9}, Enc::rope_t5);
    check_library_against_reference({1, 76, 76, 2, 2, 8, false, 0, {0, 5, 75, 76}, {0, 5, 75, 76}},
                                    Enc::shaw);
  });
}

}  // namespace
}  // namespace posenc::test
