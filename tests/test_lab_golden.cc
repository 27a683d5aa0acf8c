// tests/test_lab_golden.cc: the lab's figures, fixed. Every default encoding (and RoPE's evaluation-
// time scalings) is trained for one seed at a tiny size on a generated text, and its bits per
// character at 1x-8x and final training loss are compared with tests/data/lab_golden.json, on every
// SIMD target this CPU runs. A change of any lab number then fails here until the file is regenerated
// on purpose, with the reason in the commit:
//
//   POSENC_LAB_GOLDEN_WRITE=1 build/release/tests/test_lab_golden
//
// (writes the figures of the best SIMD target, then checks every target against them).
//
// Tolerance: the same code gives the same bits on one machine and target, but a figure here is the
// end of 40 training steps, so a different summation order (another SIMD target's lane count, another
// compiler) moves its last digits. kTolerance is over 20 times the largest such spread measured and
// under a hundredth of the smallest change a real edit of the lab made to these figures (both
// recorded in docs/lab.md, "Golden figures").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corpus.h"
#include "experiment.h"
#include "files.h"
#include "rng.h"
#include "test_util.h"

#ifndef POSENC_LAB_GOLDEN
#error "POSENC_LAB_GOLDEN (the golden file's path) is set by tests/CMakeLists.txt"
#endif

namespace posenc::lab {
namespace {

constexpr double kTolerance = 1e-6;  // bits per character and nats; see the header

// Sentences of twelve words in a seeded order: enough structure for 40 steps to learn something
// position-dependent (word lengths, line ends), small enough to train every encoding in a second.
std::string golden_text() {
  const char* words[] = {"in",  "the",   "beginning", "god",     "created", "heaven",
                         "and", "earth", "was",       "without", "form",    "void"};
  Rng rng(7, "golden text");
  std::string text;
  for (int line = 0; line < 240; ++line) {
    const int64_t n = 4 + rng.below(6);
    for (int64_t w = 0; w < n; ++w) text += std::string(words[rng.below(12)]) + (w + 1 < n ? " " : ".\n");
  }
  return text;
}

ExperimentConfig golden_config() {
  ExperimentConfig c;
  c.model.d_model = 16;
  c.model.layers = 2;
  c.model.heads = 2;
  c.model.mlp = 32;
  c.model.train_len = 16;
  c.model.options.t5_buckets = 8;
  c.model.options.t5_max_distance = 8;
  c.model.options.max_distance = 8;
  c.model.options.binary_bits = 7;  // enough for the longest evaluation length, as the CLI sizes it
  c.train.steps = 40;
  c.train.batch = 4;
  c.train.optimizer.lr = 1e-2;
  c.train.optimizer.warmup = 4;
  c.eval.lengths = {16, 32, 64, 128};
  c.eval.max_tokens = 512;
  c.seeds = 1;
  return c;
}

// label -> bits/char per length (NaN where the encoding cannot run) and the final training loss.
using Figures = std::map<std::string, std::vector<double>>;

Figures run_golden() {
  const Corpus corpus = make_corpus(golden_text(), 0.2, "golden text");
  ExperimentConfig config = golden_config();
  config.model.vocab_size = corpus.vocab_size();
  Figures out;
  for (const RunResult& r : run_experiment(corpus, config)) {
    std::vector<double>& f = out[r.label];
    for (const EvalResult& e : r.eval) f.push_back(e.ok ? e.bits_per_char : std::nan(""));
    f.push_back(r.train.final_loss);
  }
  return out;
}

nlohmann::ordered_json to_json(const Figures& figures) {
  nlohmann::ordered_json j;
  j["about"] =
      "test_lab_golden's figures: per label, bits/char at 16, 32, 64, 128 (null: cannot run) and the final "
      "training loss. Regenerate with POSENC_LAB_GOLDEN_WRITE=1 build/release/tests/test_lab_golden";
  for (const auto& [label, values] : figures) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (double v : values)
      row.push_back(std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v));
    j["figures"][label] = row;
  }
  return j;
}

Figures from_json(const nlohmann::json& j) {
  Figures out;
  for (const auto& [label, row] : j.at("figures").items())
    for (const auto& v : row) out[label].push_back(v.is_null() ? std::nan("") : v.get<double>());
  return out;
}

// The largest difference from the golden figures; every label, length and n/a must match.
double compare(const Figures& got, const Figures& golden, const std::string& target) {
  double worst = 0;
  EXPECT_EQ(got.size(), golden.size()) << target << ": a label was added or removed";
  for (const auto& [label, want] : golden) {
    SCOPED_TRACE(label);
    const auto it = got.find(label);
    if (it == got.end()) {
      ADD_FAILURE() << target << ": no run labelled " << label;
      continue;
    }
    const std::vector<double>& have = it->second;
    EXPECT_EQ(have.size(), want.size());
    for (size_t i = 0; i < std::min(have.size(), want.size()); ++i) {
      EXPECT_EQ(std::isnan(have[i]), std::isnan(want[i])) << target << ": figure " << i;
      if (std::isnan(have[i]) || std::isnan(want[i])) continue;
      const double d = std::abs(have[i] - want[i]);
      worst = std::max(worst, d);
      EXPECT_LE(d, kTolerance) << target << ": figure " << i << " is " << have[i] << ", golden " << want[i];
    }
  }
  return worst;
}

TEST(LabGolden, EveryEncodingsFiguresAreTheRecordedOnes) {
  const char* write = std::getenv("POSENC_LAB_GOLDEN_WRITE");
  if (write && std::string(write) == "1") {
    const Figures figures = run_golden();
    write_file("POSENC_LAB_GOLDEN", POSENC_LAB_GOLDEN, to_json(figures).dump(2) + "\n");
    std::cout << "wrote " << POSENC_LAB_GOLDEN << " (" << figures.size() << " labels)\n";
  }
  std::ifstream in(POSENC_LAB_GOLDEN);
  ASSERT_TRUE(in) << "cannot read " << POSENC_LAB_GOLDEN;
  const Figures golden = from_json(nlohmann::json::parse(in));
  ASSERT_GE(golden.size(), 11u);
  double worst = 0;
  std::string targets;
  test::for_each_cpu_target([&](const std::string& target) {
    worst = std::max(worst, compare(run_golden(), golden, target));
    targets += (targets.empty() ? "" : ", ") + target;
  });
  std::cout << "largest difference from the golden figures over " << targets << ": " << worst
            << " (tolerance " << kTolerance << ")\n";
}

}  // namespace
}  // namespace posenc::lab
