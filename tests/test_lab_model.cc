// tests/test_lab_model.cc: the lab's whole model: finite-difference gradients of every parameter
// for every encoding, training lowers the loss, runs repeat bit for bit, checkpoints round-trip
// and bad ones are rejected, and encodings undefined past their length say so.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "corpus.h"
#include "model.h"
#include "rng.h"
#include "test_util.h"
#include "trainer.h"

namespace posenc::lab {
namespace {

ModelConfig tiny_config(const std::string& encoding, ops::Norm norm = ops::Norm::layer) {
  ModelConfig c;
  c.vocab_size = 11;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 2;
  c.mlp = 24;
  c.train_len = 8;
  c.norm = norm;
  c.encoding = EncodingSpec::parse(encoding);
  c.options.t5_buckets = 6;  // causal: 3 exact buckets, 3 log-spaced up to 6
  c.options.t5_max_distance = 6;
  c.options.max_distance = 3;  // clipping matters inside 8 positions
  c.options.binary_bits = 4;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};
Batch random_batch(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  for (int64_t i = 0; i < n; ++i) {
    b.tokens.push_back(static_cast<int32_t>(rng.below(vocab)));
    b.targets.push_back(static_cast<int32_t>(rng.below(vocab)));
  }
  return b;
}

// Central differences of the mean loss in every parameter tensor, against backward(). Parameters are
// spread away from their small initial values first so every path carries a visible gradient.
// The model computes in fp32: with h = 1e-2 the differences carry ~1e-5 of rounding noise and
// O(h^2) truncation, hence |fd - analytic| <= 2e-4 + 1e-2 |fd| (measured worst: 0.33 of that;
// dropping any one table's gradient gives 60-90x of it).
// ignore_some: every third target is ops::kIgnoreTarget (the synthetic tasks' answer-only loss).
void check_gradients(const ModelConfig& config, bool ignore_some = false) {
  SCOPED_TRACE(config.encoding.name());
  Model model(config, 3);
  Rng rng(17);
  for (float& p : model.params()) p += static_cast<float>(0.3 * rng.normal());
  const int64_t B = 2, T = config.train_len;
  Batch batch = random_batch(B * T, config.vocab_size, 5);
  if (ignore_some)
    for (size_t i = 0; i < batch.targets.size(); i += 3) batch.targets[i] = ops::kIgnoreTarget;
  model.forward(batch.tokens.data(), batch.targets.data(), B, T);
  model.zero_grad();
  model.backward();
  const std::vector<float> analytic = model.grads();
  const float h = 1e-2f;
  double worst = 0;
  std::string worst_name;
  for (const ParamSlice& s : model.layout()) {
    // Every coordinate of small tensors (norms, biases, the positional tables of this size); 32
    // spread over larger ones (keeps the check to seconds under ASan).
    const int64_t stride = s.size <= 64 ? 1 : s.size / 32;
    for (int64_t i = s.offset + (stride > 1 ? stride / 2 : 0); i < s.offset + s.size; i += stride) {
      float& p = model.params()[static_cast<size_t>(i)];
      const float saved = p;
      p = saved + h;
      const double up = model.forward(batch.tokens.data(), batch.targets.data(), B, T);
      p = saved - h;
      const double down = model.forward(batch.tokens.data(), batch.targets.data(), B, T);
      p = saved;
      const double fd = (up - down) / (2.0 * static_cast<double>(h));
      const double a = analytic[static_cast<size_t>(i)];
      const double err = std::abs(fd - a) / (2e-4 + 1e-2 * std::abs(fd));
      if (err > worst) {
        worst = err;
        worst_name = s.name + "[" + std::to_string(i - s.offset) + "] fd " + std::to_string(fd) +
                     " analytic " + std::to_string(a);
      }
    }
  }
  EXPECT_LE(worst, 1.0) << worst_name;
}

class LabGradient : public ::testing::TestWithParam<const char*> {};

TEST_P(LabGradient, MatchesFiniteDifferences) { check_gradients(tiny_config(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Encodings, LabGradient,
                         ::testing::Values("none", "learned", "sinusoidal", "binary", "relative", "t5",
                                           "shaw", "transformer_xl", "rope", "alibi", "rope+alibi",
                                           "rope+t5+learned", "rope+shaw"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '+') ch = '_';
                           return name;
                         });

TEST(LabGradient, RmsNorm) { check_gradients(tiny_config("rope", ops::Norm::rms)); }
TEST(LabGradient, IgnoredTargets) { check_gradients(tiny_config("rope+alibi"), true); }

// A small text with structure to learn: counting words repeated with variations.
std::string small_text() {
  std::string text;
  const char* words[] = {"one", "two", "three", "four", "five", "six"};
  for (int line = 0; line < 300; ++line) {
    for (int w = 0; w < 4; ++w) text += std::string(words[(line + w) % 6]) + (w < 3 ? " " : ".\n");
  }
  return text;
}

TrainConfig short_training(int64_t steps) {
  TrainConfig t;
  t.steps = steps;
  t.batch = 8;
  t.optimizer.lr = 1e-2;
  t.optimizer.warmup = 5;
  return t;
}

TEST(LabTraining, LowersTheLossAndTheTestBits) {
  const Corpus corpus = make_corpus(small_text(), 0.1, "small");
  ModelConfig config = tiny_config("rope");
  config.vocab_size = corpus.vocab_size();
  config.train_len = 16;
  Model model(config, 1);
  EvalConfig eval;
  eval.lengths = {16};
  const double before = evaluate(model, corpus.test, eval).front().bits_per_char;
  const TrainResult result = train(model, corpus.train, short_training(80));
  const double after = evaluate(model, corpus.test, eval).front().bits_per_char;
  const double first = (result.losses[0] + result.losses[1] + result.losses[2]) / 3;
  EXPECT_LT(result.final_loss, 0.5 * first) << "first " << first << " final " << result.final_loss;
  EXPECT_LT(after, 0.6 * before) << "test bits/char before " << before << " after " << after;
  EXPECT_GT(result.tokens_per_second, 0);
}

TEST(LabTraining, RepeatsBitForBitWithAnyThreadCount) {
  const Corpus corpus = make_corpus(small_text(), 0.1, "small");
  ModelConfig config = tiny_config("rope+t5");
  config.vocab_size = corpus.vocab_size();
  auto run = [&](int threads) {
    ops::set_threads(threads);
    Model model(config, 4);
    train(model, corpus.train, short_training(4));
    return model.params();
  };
  const std::vector<float> a = run(2), b = run(2), c = run(1);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

TEST(LabModel, SharedWeightsStartEqualAcrossEncodings) {
  ModelConfig a = tiny_config("rope"), b = tiny_config("learned+shaw");
  const Model ma(a, 9), mb(b, 9), mc(a, 10);
  const auto slice = [](const Model& m, const std::string& name) {
    for (const ParamSlice& s : m.layout())
      if (s.name == name)
        return std::vector<float>(m.params().begin() + s.offset, m.params().begin() + s.offset + s.size);
    return std::vector<float>{};
  };
  for (const char* name : {"wte.weight", "layers.1.attn.qkv.weight", "layers.0.mlp.proj.weight"}) {
    EXPECT_FALSE(slice(ma, name).empty());
    EXPECT_EQ(slice(ma, name), slice(mb, name)) << name;
    EXPECT_NE(slice(ma, name), slice(mc, name)) << name;
  }
}

TEST(LabModel, EncodingsUndefinedPastTheirLengthSaySo) {
  const Corpus corpus = make_corpus(small_text(), 0.2, "small");
  EvalConfig eval;
  eval.lengths = {8, 16};
  ModelConfig learned = tiny_config("learned");
  learned.vocab_size = corpus.vocab_size();
  Model model(learned, 1);
  const auto results = evaluate(model, corpus.test, eval);
  EXPECT_TRUE(results[0].ok);
  ASSERT_FALSE(results[1].ok);
  EXPECT_NE(results[1].error.find("max_len"), std::string::npos) << results[1].error;
  ModelConfig binary = tiny_config("binary");  // 4 bits: positions 0..15
  binary.vocab_size = corpus.vocab_size();
  Model bmodel(binary, 1);
  eval.lengths = {16, 32};
  const auto bresults = evaluate(bmodel, corpus.test, eval);
  EXPECT_TRUE(bresults[0].ok);
  ASSERT_FALSE(bresults[1].ok);
  EXPECT_NE(bresults[1].error.find("16"), std::string::npos) << bresults[1].error;
}

TEST(LabModel, RopeScalingOnlyActsPastTheTrainingLength) {
  const Corpus corpus = make_corpus(small_text(), 0.2, "small");
  ModelConfig config = tiny_config("rope");
  config.vocab_size = corpus.vocab_size();
  Model model(config, 2);
  const EvalConfig at8{{8}, 256, 64}, at32{{32}, 256, 64};
  const double plain8 = evaluate(model, corpus.test, at8).front().bits_per_char;
  const double plain32 = evaluate(model, corpus.test, at32).front().bits_per_char;
  for (RopeEval mode : {RopeEval::linear, RopeEval::ntk, RopeEval::yarn}) {
    SCOPED_TRACE(rope_eval_name(mode));
    model.set_rope_eval(mode, 8);
    EXPECT_EQ(evaluate(model, corpus.test, at8).front().bits_per_char, plain8);
    model.set_rope_eval(mode, 32);
    EXPECT_NE(evaluate(model, corpus.test, at32).front().bits_per_char, plain32);
    // what run_experiment relies on to take plain's figures instead of evaluating again
    EXPECT_TRUE(rope_eval_is_plain(mode, config.train_len, 8));
    EXPECT_FALSE(rope_eval_is_plain(mode, config.train_len, 32));
  }
}

TEST(LabModel, BucketsPartitionTheWindow) {
  const Corpus corpus = make_corpus(small_text(), 0.2, "small");
  ModelConfig config = tiny_config("alibi");
  config.vocab_size = corpus.vocab_size();
  Model model(config, 2);
  EvalConfig eval;
  eval.lengths = {40};
  const EvalResult r = evaluate(model, corpus.test, eval).front();
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.buckets.size(), 4u);  // [0,8) [8,16) [16,32) [32,40)
  EXPECT_EQ(r.buckets[3].begin, 32);
  EXPECT_EQ(r.buckets[3].end, 40);
  double weighted = 0;
  int64_t tokens = 0;
  for (const BucketResult& b : r.buckets) {
    weighted += b.bits_per_char * static_cast<double>(b.tokens);
    tokens += b.tokens;
  }
  EXPECT_EQ(tokens, r.tokens);
  EXPECT_NEAR(weighted / static_cast<double>(tokens), r.bits_per_char, 1e-9);
}

TEST(LabModel, BadInputIsRejected) {
  ModelConfig c = tiny_config("rope");
  c.heads = 3;
  test::expect_error([&] { Model m(c, 1); }, "heads = 3");
  c = tiny_config("binary");
  c.options.binary_bits = 17;
  test::expect_error([&] { Model m(c, 1); }, "binary_bits = 17");
  c = tiny_config("t5");
  c.options.t5_buckets = 0;
  test::expect_error([&] { Model m(c, 1); }, "num_buckets");
  Model m(tiny_config("none"), 1);
  const std::vector<int32_t> tokens{0, 1, 11}, targets{1, 2, 3};
  test::expect_error([&] { m.forward(tokens.data(), targets.data(), 1, 3); }, "token id 11");
  const std::vector<int32_t> ok_tokens{0, 1, 2}, bad_targets{1, -2, 3}, ignored{-1, -1, -1};
  test::expect_error([&] { m.forward(ok_tokens.data(), bad_targets.data(), 1, 3); }, "target id -2 at 1");
  test::expect_error([&] { m.forward(ok_tokens.data(), ignored.data(), 1, 3); }, "no counted target");
  test::expect_error([&] { m.predictions(); }, "need a completed forward");
  test::expect_error([&] { m.backward(); }, "needs a completed forward");
}

TEST(LabCheckpoint, RoundTripsThroughSafetensors) {
  for (const char* encoding : {"learned+t5", "rope+shaw", "xl", "binary+alibi"}) {
    SCOPED_TRACE(encoding);
    Model model(tiny_config(encoding, ops::Norm::rms), 5);
    const Checkpoint ck = decode_safetensors(encode_safetensors(model.to_checkpoint({{"seed", "5"}})));
    EXPECT_EQ(ck.metadata.at("seed"), "5");
    Model loaded = Model::from_checkpoint(ck);
    EXPECT_EQ(loaded.config().to_json(), model.config().to_json());
    EXPECT_EQ(loaded.params(), model.params());
    const Batch batch = random_batch(16, 11, 1);
    EXPECT_EQ(loaded.forward(batch.tokens.data(), batch.targets.data(), 2, 8),
              model.forward(batch.tokens.data(), batch.targets.data(), 2, 8));
  }
}

TEST(LabCheckpoint, RejectsCheckpointsThatDoNotFitTheConfig) {
  const Model model(tiny_config("t5"), 5);
  const Checkpoint good = model.to_checkpoint();
  auto expect_rejected = [&](const std::function<void(Checkpoint&)>& edit, const std::string& needle) {
    Checkpoint ck = good;
    edit(ck);
    test::expect_error([&] { Model::from_checkpoint(ck); }, needle);
  };
  expect_rejected([](Checkpoint& ck) { ck.metadata.erase("config"); }, "no metadata 'config'");
  expect_rejected([](Checkpoint& ck) { ck.metadata["config"] = "{not json"; }, "not valid JSON");
  expect_rejected(
      [](Checkpoint& ck) {
        auto j = ck.metadata["config"];
        ck.metadata["config"] = j.replace(j.find("\"heads\":2"), 9, "\"heads\":5");
      },
      "heads = 5");
  expect_rejected([](Checkpoint& ck) { ck.tensors.pop_back(); }, "no tensor named 'normf.bias'");
  expect_rejected(
      [](Checkpoint& ck) {
        ck.tensors.push_back({"extra", {1}, {0.0f}});
      },
      "'extra' is not a parameter");
  expect_rejected(
      [](Checkpoint& ck) {
        ck.tensors[0].shape = {16, 11};
      },
      "has shape [16, 11], expected [11, 16]");
  expect_rejected([](Checkpoint& ck) { ck.tensors[1].data[0] = NAN; }, "non-finite");
}

}  // namespace
}  // namespace posenc::lab
