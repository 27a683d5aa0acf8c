// tests/test_lab_data.cc: the lab's pieces around the model: the corpus (UTF-8, vocabulary, split
// on a line end), encoding names, RoPE evaluation configs, the learning-rate schedule, and the
// verdicts set against the published claims.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

SummaryRow row(const std::string& label, double at1, double at16) {
  SummaryRow r;
  r.label = label;
  r.bits_per_char = {{at1, 0, 1}, {at16, 0, at16 > 0 ? 1 : 0}};
  r.errors = {"", at16 > 0 ? "" : "learned_add: position 64 >= max_len"};
  return r;
}

TEST(LabVerdicts, CompareWithThePublishedClaims) {
  const std::vector<int64_t> lengths{64, 1024};
  const auto lines = verdicts({row("alibi", 2.0, 1.9), row("t5", 2.0, 2.1), row("rope", 2.0, 3.0),
                               row("sinusoidal", 2.0, 4.0), row("learned", 2.0, 0), row("none", 2.0, 2.5)},
                              lengths, 64);
  ASSERT_EQ(lines.size(), 6u);  // five claims + the ranking; "none" has no published figure
  EXPECT_NE(lines[0].find("alibi"), std::string::npos);
  EXPECT_NE(lines[0].find("-5.0%"), std::string::npos);
  EXPECT_NE(lines[0].find("agrees"), std::string::npos);
  EXPECT_NE(lines[2].find("rope"), std::string::npos);
  EXPECT_NE(lines[2].find("degrades -> agrees"), std::string::npos);
  EXPECT_NE(lines[4].find("cannot run at 16x"), std::string::npos);
  EXPECT_NE(lines[5].find("here alibi < t5 < rope < sinusoidal -> agrees"), std::string::npos) << lines[5];
  const auto swapped = verdicts({row("alibi", 2.0, 2.5), row("rope", 2.0, 2.2)}, lengths, 64);
  EXPECT_NE(swapped[0].find("degrades -> differs"), std::string::npos) << swapped[0];
  EXPECT_NE(swapped[2].find("differs"), std::string::npos) << swapped[2];
}

}  // namespace
}  // namespace posenc::lab
