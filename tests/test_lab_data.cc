// tests/test_lab_data.cc: the lab's pieces around the model: the corpus (UTF-8, vocabulary, split
// on a line end), encoding names, RoPE evaluation configs, the learning-rate schedule, and the
// verdicts set against the published claims.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "claims.h"
#include "corpus.h"
#include "experiment.h"
#include "optimizer.h"
#include "positional.h"
#include "test_util.h"

namespace posenc::lab {
namespace {

TEST(LabCorpus, CharacterVocabularyAndLineSplit) {
  const std::string text = "ab\nba\nçé\nab\n";  // ç and é are two bytes each
  const Corpus c = make_corpus(text, 0.25, "t");
  EXPECT_EQ(c.vocabulary, (std::vector<char32_t>{U'\n', U'a', U'b', U'ç', U'é'}));
  EXPECT_EQ(c.train.size() + c.test.size(), 12u);
  // 25% of 12 characters -> split at 9, which is a line start: test = "ab\n"
  EXPECT_EQ(c.decode(c.test.data(), static_cast<int64_t>(c.test.size())), "ab\n");
  EXPECT_EQ(c.decode(c.train.data(), static_cast<int64_t>(c.train.size())), "ab\nba\nçé\n");
  EXPECT_EQ(c.vocabulary_utf8(), "\nabçé");
  EXPECT_EQ(c.bytes, text.size());
  // A split point inside a line moves forward to the next line start.
  const Corpus d = make_corpus("aaaa\nbbbb\ncccc\n", 0.5, "t");
  EXPECT_EQ(d.train.size(), 10u);
}

TEST(LabCorpus, RejectsMalformedUtf8AndMissingFiles) {
  test::expect_error([] { make_corpus(std::string("ab\xC3"), 0.1, "t"); }, "not valid UTF-8 at byte 2");
  test::expect_error([] { make_corpus(std::string("a\xC0\xAF"), 0.1, "t"); }, "at byte 1");  // overlong '/'
  test::expect_error([] { make_corpus(std::string("\xED\xA0\x80x"), 0.1, "t"); }, "at byte 0");  // surrogate
  test::expect_error([] { make_corpus(std::string("a\x80"), 0.1, "t"); }, "at byte 1");
  test::expect_error([] { make_corpus("a", 0.1, "t"); }, "too few");
  test::expect_error([] { make_corpus("abc", 1.0, "t"); }, "test_fraction");
  test::expect_error([] { load_corpus("/nonexistent/file.txt", 0.05); },
                     "cannot open '/nonexistent/file.txt'");
}

TEST(LabEncodings, ParseAndName) {
  EXPECT_EQ(EncodingSpec::parse("none").name(), "none");
  EXPECT_EQ(EncodingSpec::parse("alibi+rope").name(), "rope+alibi");
  EXPECT_EQ(EncodingSpec::parse("t5+learned+rope").name(), "rope+learned+t5");
  const EncodingSpec s = EncodingSpec::parse("rope+shaw+sinusoidal");
  EXPECT_TRUE(s.has(EncodingKind::rope));
  EXPECT_EQ(s.part(EncodingRole::attention_vectors), EncodingKind::shaw);
  EXPECT_EQ(s.part(EncodingRole::absolute), EncodingKind::sinusoidal);
  EXPECT_EQ(EncodingSpec::parse("xl"), EncodingSpec::parse("transformer_xl"));  // the alias
  EXPECT_EQ(EncodingSpec::parse("rope+xl").name(), "rope+transformer_xl");
  for (const EncodingSpec& e : default_lab_encodings()) EXPECT_EQ(EncodingSpec::parse(e.name()), e);
  EXPECT_EQ(default_lab_encodings().size(), 11u);
  test::expect_error([] { EncodingSpec::parse("alibi+t5"); }, "'t5' conflicts");
  test::expect_error([] { EncodingSpec::parse("rope+rope"); }, "'rope' appears twice");
  test::expect_error([] { EncodingSpec::parse("nope"); }, "unknown part 'nope'");
  test::expect_error([] { EncodingSpec::parse("rope+"); }, "unknown part ''");
  test::expect_error([] { parse_rope_eval("pi"); }, "'pi'");
}

TEST(LabEncodings, RopeEvaluationConfigs) {
  const EncodingOptions o;
  EXPECT_EQ(lab_rope_config(o, 16, 64, RopeEval::yarn, 64).scaling.type, RopeScalingType::none);
  const RopeConfig linear = lab_rope_config(o, 16, 64, RopeEval::linear, 256);
  EXPECT_EQ(linear.scaling.type, RopeScalingType::linear);
  EXPECT_EQ(linear.scaling.factor, 4.0);
  const RopeConfig yarn = lab_rope_config(o, 16, 64, RopeEval::yarn, 1024);
  EXPECT_EQ(yarn.scaling.factor, 16.0);
  EXPECT_EQ(yarn.scaling.original_max_position_embeddings, 64);
  // ntk: HF dynamic at the window's length grows the base by (L / 64)^(d / (d - 2))
  const RopeConfig ntk = lab_rope_config(o, 16, 64, RopeEval::ntk, 256);
  const RopeFrequencies f = rope_frequencies(ntk, 256);
  const double base = 10000.0 * std::pow(4.0, 16.0 / 14.0);
  EXPECT_NEAR(f.inv_freq[1], std::pow(base, -2.0 / 16.0), 1e-12);
}

TEST(LabOptimizer, WarmupThenCosine) {
  OptimizerConfig c;
  c.lr = 1.0, c.warmup = 10, c.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9, 110), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10, 110), 1.0);
  EXPECT_NEAR(learning_rate(c, 60, 110), 0.55, 1e-12);  // half way: the mean of 1 and 0.1
  EXPECT_NEAR(learning_rate(c, 110, 110), 0.1, 1e-12);
  c.lr = -1;
  test::expect_error([&] { validate(c); }, "lr = -1");
}

TEST(LabStats, MeanAndStudentInterval) {
  EXPECT_DOUBLE_EQ(student_t95(1), 12.706);
  EXPECT_DOUBLE_EQ(student_t95(2), 4.303);
  EXPECT_DOUBLE_EQ(student_t95(30), 2.042);
  // Past the table, the expansion against exact quantiles (R's qt(0.975, dof)).
  EXPECT_NEAR(student_t95(31), 2.039513, 1e-4);
  EXPECT_NEAR(student_t95(60), 2.000298, 1e-4);
  EXPECT_NEAR(student_t95(1000), 1.962339, 1e-4);
  test::expect_error([] { student_t95(0); }, "dof = 0");
  const Stat s = stat_of({1.0, 2.0, 3.0});  // std 1
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.std, 1.0);
  EXPECT_NEAR(s.ci95, 4.303 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(s.n, 3);
  const Stat one = stat_of({2.5});  // no interval with one value
  EXPECT_EQ(one.ci95, 0.0);
  EXPECT_EQ(one.low(), 2.5);
}

TEST(LabClaims, PublishedRatiosInTheLabsUnit) {
  // ln(perplexity at 8512) / ln(perplexity at 512): the paper's figures in the lab's unit at ~16x.
  const auto sinusoidal = published_ratio("sinusoidal", 16);
  ASSERT_TRUE(sinusoidal);
  EXPECT_EQ(sinusoidal->length, 8512);
  EXPECT_NEAR(sinusoidal->ratio, std::log(305.65) / std::log(20.05), 1e-12);
  EXPECT_NEAR(published_ratio("rope", 16)->ratio, 1.336, 1e-3);
  EXPECT_NEAR(published_ratio("t5", 16)->ratio, 1.264, 1e-3);
  EXPECT_NEAR(published_ratio("alibi", 16)->ratio, 0.976, 1e-3);
  EXPECT_EQ(published_ratio("rope", 2)->length, 1012);  // the nearest published length
  EXPECT_EQ(published_ratio("rope", 8)->length, 4512);
  EXPECT_FALSE(published_ratio("none", 16));
  EXPECT_EQ(trend_of(0.9, kHoldsAt), Trend::holds);
  EXPECT_EQ(trend_of(kHoldsAt + 1e-9, 2.0), Trend::degrades);
  EXPECT_EQ(trend_of(1.0, 1.1), Trend::undecided);
}

// A summary row from each seed's bits/char at 1x and 16x (an empty at16: cannot run there).
SummaryRow row(const std::string& label, const std::vector<double>& at1, const std::vector<double>& at16) {
  SummaryRow r;
  r.label = label;
  r.seed_bits_per_char = {at1, at16};
  r.bits_per_char = {stat_of(at1), stat_of(at16)};
  r.errors = {"", at16.empty() ? "learned_add: position 64 >= max_len" : ""};
  return r;
}

std::string line_of(const std::vector<std::string>& lines, const std::string& start) {
  for (const std::string& line : lines)
    if (line.rfind(start, 0) == 0) return line;
  return "no line starts with '" + start + "'";
}

void expect_has(const std::string& line, const std::string& needle) {
  EXPECT_NE(line.find(needle), std::string::npos) << "'" << needle << "' not in: " << line;
}

TEST(LabVerdicts, FollowTheRuleWithIntervals) {
  const std::vector<int64_t> lengths{64, 1024};
  const auto lines =
      verdicts({row("alibi", {2.0, 2.1, 2.2}, {1.99, 2.1, 2.21}),  // ratio ~1.0: holds
                row("t5", {2.0, 2.0, 2.0}, {2.0, 2.06, 2.1}),      // straddles 1.02
                row("rope", {2.0, 2.0, 2.0}, {3.2, 3.22, 3.24}),   // 1.61: degrades
                row("sinusoidal", {2.0, 2.0, 2.0}, {2.4, 2.41, 2.42}), row("learned", {2.0, 2.1, 2.2}, {}),
                row("none", {2.0, 2.0, 2.0}, {2.0, 2.0, 2.0})},
               lengths, 64);
  expect_has(line_of(lines, "alibi "), "holds      holds      agrees");
  expect_has(line_of(lines, "alibi "), "0.976 (19.73 -> 18.34 at 8512)");
  expect_has(line_of(lines, "alibi "), "extrapolates: right");
  expect_has(line_of(lines, "t5 "), "undecided");
  expect_has(line_of(lines, "t5 "), "extrapolates: undecided");
  expect_has(line_of(lines, "rope "), "1.610 [1.585, 1.635]");
  expect_has(line_of(lines, "rope "), "degrades   degrades   agrees, larger here");
  expect_has(line_of(lines, "rope "), "extrapolates: wrong");
  expect_has(line_of(lines, "sinusoidal "), "agrees, smaller here");  // 1.205 against the paper's 1.909
  expect_has(line_of(lines, "learned "), "cannot run at 16x");
  expect_has(line_of(lines, "learned "), "does not extrapolate: right");
  expect_has(line_of(lines, "none "), "holds");  // no claim: the trend alone
  // Ordering at 16x: alibi ~ t5 overlap (2.1 +- 0.27 vs 2.053 +- 0.124); sinusoidal < rope separate.
  expect_has(line_of(lines, "  here"), "t5 ~ alibi < sinusoidal < rope");
  expect_has(line_of(lines, "  paper"), "alibi < t5 < rope < sinusoidal");
  expect_has(line_of(lines, "  the paper's pairs"),
             "agree alibi<rope, alibi<sinusoidal, t5<rope, t5<sinusoidal;");
  expect_has(line_of(lines, "  the paper's pairs"), "differ rope<sinusoidal;");
  expect_has(line_of(lines, "  the paper's pairs"), "not separated here alibi~t5");
}

TEST(LabVerdicts, OneSeedHasNoIntervalAndNoOrdering) {
  const auto lines =
      verdicts({row("alibi", {2.0}, {1.9}), row("rope", {2.0}, {3.0})}, std::vector<int64_t>{64, 1024}, 64);
  expect_has(line_of(lines, "alibi "), "0.950 (1 seed)");
  expect_has(line_of(lines, "alibi "), "(1 seed)");
  expect_has(line_of(lines, "ordering"), "no ordering is called");
  EXPECT_EQ(line_of(lines, "  the paper's pairs").rfind("no line", 0), 0u);
  const auto no_base = verdicts({row("alibi", {2.0}, {1.9})}, std::vector<int64_t>{128, 1024}, 64);
  ASSERT_EQ(no_base.size(), 1u);
  expect_has(no_base[0], "need the training length 64");
}

}  // namespace
}  // namespace posenc::lab
