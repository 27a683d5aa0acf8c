// lab/experiment.cc: see experiment.h.
#include "experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numbers>
#include <optional>

#include "posenc/error.h"
#include "rng.h"
#include "safetensors.h"

namespace posenc::lab {

void validate(const ExperimentConfig& c) {
  if (c.encodings.empty()) throw Error("lab: encodings is empty");
  if (c.seeds < 1) throw Error("lab: seeds = " + std::to_string(c.seeds) + " is invalid: must be >= 1");
  validate(c.train);
  for (int64_t L : c.eval.lengths)
    if (L < 1) throw Error("lab: evaluation length " + std::to_string(L) + " is invalid: must be >= 1");
  for (const EncodingSpec& e : c.encodings) {
    ModelConfig m = c.model;
    m.vocab_size = std::max<int64_t>(m.vocab_size, 2);
    m.encoding = e;
    validate(m);
  }
}

double estimated_memory_bytes(const ExperimentConfig& c) {
  double longest = 1;
  for (int64_t L : c.eval.lengths) longest = std::max(longest, static_cast<double>(L));
  const double tokens = std::max(static_cast<double>(c.train.batch) * static_cast<double>(c.model.train_len),
                                 std::max(static_cast<double>(c.eval.batch_tokens), longest));
  double most = 0, runs = 0;
  for (const EncodingSpec& e : c.encodings) {
    ModelConfig m = c.model;
    m.encoding = e;
    most = std::max(most, estimated_memory_bytes(m, tokens));
    runs += 1 + (e.has(EncodingKind::rope) ? static_cast<double>(c.rope_evals.size()) : 0.0);
  }
  // Every run keeps its training losses: a double each, and its JSON value and text in the report.
  const double results = static_cast<double>(c.seeds) * runs * static_cast<double>(c.train.steps) * 48;
  return most + results;
}

namespace {

// What differs between the text comparison and a task: the vocabulary, the training batches,
// the scoring, and what a checkpoint records of the data.
struct Workload {
  int64_t vocab_size = 0;
  std::map<std::string, std::string> metadata;
  std::function<TrainResult(Model&, const TrainConfig&, const std::function<void(const StepReport&)>&)> train;
  std::function<void(Model&, RopeEval, RunResult&)> evaluate;
};

std::vector<RunResult> run_workload(const ExperimentConfig& config, const Workload& work,
                                    const ExperimentCallbacks& callbacks) {
  if (!config.checkpoint_dir.empty()) std::filesystem::create_directories(config.checkpoint_dir);
  std::vector<RunResult> runs;
  const auto total = static_cast<int64_t>(config.encodings.size()) * config.seeds;
  int64_t index = 0;
  for (int64_t s = 0; s < config.seeds; ++s) {
    for (const EncodingSpec& encoding : config.encodings) {
      const uint64_t seed = config.seed + static_cast<uint64_t>(s);
      ModelConfig mc = config.model;
      mc.vocab_size = work.vocab_size;
      mc.encoding = encoding;
      if (callbacks.on_train_start) callbacks.on_train_start(encoding.name(), seed, index++, total);
      Model model(mc, seed);
      TrainConfig tc = config.train;
      tc.seed = seed;
      RunResult base;
      base.label = encoding.name();
      base.encoding = encoding;
      base.seed = seed;
      base.num_params = model.num_params();
      base.train = work.train(model, tc, callbacks.on_step);
      if (!config.checkpoint_dir.empty()) {
        std::string file = encoding.name();
        std::replace(file.begin(), file.end(), '+', '_');
        base.checkpoint = (std::filesystem::path(config.checkpoint_dir) /
                           (file + "-seed" + std::to_string(seed) + ".safetensors"))
                              .string();
        std::map<std::string, std::string> metadata = work.metadata;
        metadata["seed"] = std::to_string(seed);
        metadata["steps"] = std::to_string(tc.steps);
        save_safetensors(base.checkpoint, model.to_checkpoint(metadata));
      }
      std::vector<RopeEval> modes{RopeEval::plain};
      if (encoding.has(EncodingKind::rope))
        modes.insert(modes.end(), config.rope_evals.begin(), config.rope_evals.end());
      for (RopeEval mode : modes) {
        RunResult r = base;
        r.rope_eval = mode;
        if (mode != RopeEval::plain) r.label += std::string(" (") + rope_eval_name(mode) + ")";
        work.evaluate(model, mode, r);
        model.set_rope_eval(RopeEval::plain, mc.train_len);
        if (callbacks.on_run_done) callbacks.on_run_done(r);
        runs.push_back(std::move(r));
      }
    }
  }
  return runs;
}

}  // namespace

std::vector<RunResult> run_experiment(const Corpus& corpus, const ExperimentConfig& config,
                                      const ExperimentCallbacks& callbacks) {
  validate(config);
  const int64_t longest = *std::max_element(config.eval.lengths.begin(), config.eval.lengths.end());
  if (static_cast<int64_t>(corpus.test.size()) < longest + 1)
    throw Error("lab: the test split of " + corpus.origin + " has " + std::to_string(corpus.test.size()) +
                " characters, fewer than the longest evaluation length + 1 = " + std::to_string(longest + 1));
  Workload work;
  work.vocab_size = corpus.vocab_size();
  work.metadata = {{"corpus", corpus.origin},
                   {"corpus_fingerprint", corpus.fingerprint},
                   {"vocabulary", corpus.vocabulary_utf8()}};
  work.train = [&](Model& model, const TrainConfig& tc, const auto& on_step) {
    return train(model, corpus.train, tc, on_step);
  };
  work.evaluate = [&](Model& model, RopeEval mode, RunResult& r) {
    for (int64_t L : config.eval.lengths) {
      model.set_rope_eval(mode, L);
      EvalConfig one = config.eval;
      one.lengths = {L};
      // Score the same characters at every length: the prefix fitting the longest length.
      one.max_tokens =
          std::min<int64_t>(config.eval.max_tokens, static_cast<int64_t>(corpus.test.size()) - 1) / longest *
          longest;
      r.eval.push_back(evaluate(model, corpus.test, one).front());
    }
  };
  return run_workload(config, work, callbacks);
}

std::vector<RunResult> run_task_experiment(const ExperimentConfig& config,
                                           const ExperimentCallbacks& callbacks) {
  validate(config);
  if (!config.task) throw Error("lab: run_task_experiment needs a task");
  const Task task = *config.task;
  if (config.model.train_len < task_min_length(task))
    throw Error("lab: train_len = " + std::to_string(config.model.train_len) + " is too short for " +
                task_name(task) + ": must be >= " + std::to_string(task_min_length(task)));
  TaskEvalConfig eval;
  eval.lengths = config.eval.lengths;
  eval.samples = config.task_samples;
  eval.batch_tokens = config.eval.batch_tokens;
  eval.seed = config.seed;  // the same evaluation samples for every model and seed
  Workload work;
  work.vocab_size = task_vocab_size();
  work.metadata = {{"task", task_name(task)}, {"vocabulary", task_alphabet()}};
  work.train = [&](Model& model, const TrainConfig& tc, const auto& on_step) {
    Rng rng(tc.seed, std::string("task data ") + task_name(task));
    const BatchSource samples = [&](int32_t* inputs, int32_t* targets) {
      const TaskBatch batch = make_task_batch(task, tc.batch, model.config().train_len, rng);
      std::copy(batch.tokens.begin(), batch.tokens.end(), inputs);
      std::copy(batch.targets.begin(), batch.targets.end(), targets);
    };
    return train(model, samples, tc, on_step);
  };
  work.evaluate = [&](Model& model, RopeEval mode, RunResult& r) {
    for (int64_t L : eval.lengths) {
      model.set_rope_eval(mode, L);
      TaskEvalConfig one = eval;
      one.lengths = {L};
      r.task_eval.push_back(evaluate_task(model, task, one).front());
    }
  };
  return run_workload(config, work, callbacks);
}

namespace {

Stat stat_of(const std::vector<double>& xs) {
  Stat s;
  s.n = static_cast<int64_t>(xs.size());
  if (xs.empty()) return s;
  for (double x : xs) s.mean += x;
  s.mean /= static_cast<double>(xs.size());
  if (xs.size() > 1) {
    double ss = 0;
    for (double x : xs) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(xs.size() - 1));
  }
  return s;
}

// Bits per character over the positions >= train_len of a result (its buckets past the first).
std::optional<double> unseen_bits(const EvalResult& e) {
  if (!e.ok || e.buckets.size() < 2) return std::nullopt;
  double bits = 0;
  int64_t tokens = 0;
  for (size_t k = 1; k < e.buckets.size(); ++k) {
    bits += e.buckets[k].bits_per_char * static_cast<double>(e.buckets[k].tokens);
    tokens += e.buckets[k].tokens;
  }
  return bits / static_cast<double>(tokens);
}

// One row per label, in the order the runs first show it.
template <typename Row>
std::vector<Row> rows_by_label(const std::vector<RunResult>& runs) {
  std::vector<Row> rows;
  for (const RunResult& r : runs)
    if (std::none_of(rows.begin(), rows.end(), [&](const Row& row) { return row.label == r.label; })) {
      rows.emplace_back();
      rows.back().label = r.label;
    }
  return rows;
}

}  // namespace

namespace {

// What the runs of one label give: per metric and length the value of each run, per length the
// library's error where the encoding cannot run, and the training speed.
struct Collected {
  std::vector<std::vector<std::vector<double>>> values;  // [metric][length] -> one value per run
  std::vector<std::string> errors;                       // [length]
  Stat tokens_per_second, ms_per_step;
};

// read(run, length index, error) returns the run's metrics at that length (nullopt: not a value,
// e.g. a bucket that does not exist), or an empty vector after setting error.
template <typename Read>
Collected collect(const std::vector<RunResult>& runs, const std::string& label, size_t lengths,
                  size_t metrics, Read read) {
  Collected c;
  c.values.assign(metrics, std::vector<std::vector<double>>(lengths));
  c.errors.assign(lengths, "");
  std::vector<double> tps, ms;
  for (const RunResult& r : runs) {
    if (r.label != label) continue;
    tps.push_back(r.train.tokens_per_second);
    ms.push_back(r.train.ms_per_step);
    for (size_t i = 0; i < lengths; ++i) {
      const std::vector<std::optional<double>> got = read(r, i, c.errors[i]);
      for (size_t m = 0; m < got.size() && m < metrics; ++m)
        if (got[m]) c.values[m][i].push_back(*got[m]);
    }
  }
  c.tokens_per_second = stat_of(tps);
  c.ms_per_step = stat_of(ms);
  return c;
}

std::vector<Stat> stats_of(const std::vector<std::vector<double>>& per_length) {
  std::vector<Stat> out;
  for (const std::vector<double>& values : per_length) out.push_back(stat_of(values));
  return out;
}

}  // namespace

std::vector<SummaryRow> summarize(const std::vector<RunResult>& runs, const std::vector<int64_t>& lengths) {
  std::vector<SummaryRow> rows = rows_by_label<SummaryRow>(runs);
  for (SummaryRow& row : rows) {
    const Collected c =
        collect(runs, row.label, lengths.size(), 2, [](const RunResult& r, size_t i, std::string& error) {
          std::vector<std::optional<double>> got;
          if (i >= r.eval.size()) return got;
          if (!r.eval[i].ok) {
            error = r.eval[i].error;
            return got;
          }
          return std::vector<std::optional<double>>{r.eval[i].bits_per_char, unseen_bits(r.eval[i])};
        });
    row.bits_per_char = stats_of(c.values[0]);
    row.unseen_bits_per_char = stats_of(c.values[1]);
    row.errors = c.errors;
    row.tokens_per_second = c.tokens_per_second;
    row.ms_per_step = c.ms_per_step;
  }
  return rows;
}

std::vector<TaskSummaryRow> summarize_tasks(const std::vector<RunResult>& runs,
                                            const std::vector<int64_t>& lengths) {
  std::vector<TaskSummaryRow> rows = rows_by_label<TaskSummaryRow>(runs);
  for (TaskSummaryRow& row : rows) {
    const Collected c =
        collect(runs, row.label, lengths.size(), 2, [](const RunResult& r, size_t i, std::string& error) {
          std::vector<std::optional<double>> got;
          if (i >= r.task_eval.size()) return got;
          if (!r.task_eval[i].ok) {
            error = r.task_eval[i].error;
            return got;
          }
          return std::vector<std::optional<double>>{r.task_eval[i].exact_match,
                                                    r.task_eval[i].token_accuracy};
        });
    row.exact_match = stats_of(c.values[0]);
    row.token_accuracy = stats_of(c.values[1]);
    row.errors = c.errors;
    row.tokens_per_second = c.tokens_per_second;
    row.ms_per_step = c.ms_per_step;
  }
  return rows;
}

std::vector<std::string> verdicts(const std::vector<SummaryRow>& rows, const std::vector<int64_t>& lengths,
                                  int64_t train_len) {
  struct Claim {
    const char* label;
    const char* seeds;      // the seeds' table
    const char* published;  // Press et al. at ~16x
    bool published_holds;   // loss does not rise
  };
  static const Claim kClaims[] = {
      {"alibi", "extrapolates", "perplexity slightly lower at 16x", true},
      {"t5", "extrapolates", "perplexity x2.2 at 16x", false},
      {"rope", "extrapolates", "perplexity x2.7 at 16x", false},
      {"sinusoidal", "extrapolates", "perplexity x15 at 16x", false},
      {"learned", "does not extrapolate", "cannot run past its table", false},
  };
  std::vector<std::string> out;
  if (lengths.empty()) return out;
  size_t base = 0, last = 0;  // the 1x column and the longest one
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] == train_len) base = i;
    if (lengths[i] > lengths[last]) last = i;
  }
  const double ratio_len = static_cast<double>(lengths[last]) / static_cast<double>(train_len);
  char buf[512];
  std::vector<std::pair<double, std::string>> measured;
  for (const Claim& claim : kClaims) {
    const auto row =
        std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& r) { return r.label == claim.label; });
    if (row == rows.end()) continue;
    const Stat& b = row->bits_per_char[base];
    const Stat& l = row->bits_per_char[last];
    if (l.n == 0) {
      const bool agrees = std::string(claim.label) == "learned";
      std::snprintf(buf, sizeof buf, "%-10s seeds: %s; published: %s; here: cannot run at %gx (%s) -> %s",
                    claim.label, claim.seeds, claim.published, ratio_len, "library error",
                    agrees ? "agrees" : "differs");
      out.emplace_back(buf);
      continue;
    }
    const double change = 100.0 * (l.mean / b.mean - 1.0);
    const bool holds = change <= 2.0;
    std::snprintf(buf, sizeof buf,
                  "%-10s seeds: %s; published: %s; here: %.3f -> %.3f bits/char at %gx (%+.1f%%): %s -> %s",
                  claim.label, claim.seeds, claim.published, b.mean, l.mean, ratio_len, change,
                  holds ? "holds" : "degrades",
                  holds == claim.published_holds ? "agrees with the paper" : "differs from the paper");
    out.emplace_back(buf);
    measured.emplace_back(l.mean, claim.label);
  }
  // The published order at 8-16x (lower is better): alibi <= t5 < rope < sinusoidal.
  const std::vector<std::string> published{"alibi", "t5", "rope", "sinusoidal"};
  std::vector<std::string> expected;
  for (const std::string& p : published)
    if (std::any_of(measured.begin(), measured.end(), [&](const auto& m) { return m.second == p; }))
      expected.push_back(p);
  std::stable_sort(measured.begin(), measured.end());
  std::string order, order_expected;
  std::vector<std::string> got;
  for (const auto& [bits, label] : measured) {
    if (std::find(published.begin(), published.end(), label) == published.end()) continue;
    order += (order.empty() ? "" : " < ") + label;
    got.push_back(label);
  }
  for (const std::string& e : expected)  // Press et al.: ALiBi and T5 close, then RoPE, then sinusoidal
    order_expected += (order_expected.empty()                   ? ""
                       : order_expected == "alibi" && e == "t5" ? " <= "
                                                                : " < ") +
                      e;
  if (got.size() >= 2) {
    std::snprintf(buf, sizeof buf, "ranking at %gx: published %s; here %s -> %s", ratio_len,
                  order_expected.c_str(), order.c_str(), got == expected ? "agrees" : "differs");
    out.emplace_back(buf);
  }
  return out;
}

}  // namespace posenc::lab
