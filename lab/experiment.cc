// lab/experiment.cc: see experiment.h.
#include "experiment.h"

#include <algorithm>
#include <chrono>
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

double student_t95(int64_t dof) {
  if (dof < 1) throw Error("student_t95: dof = " + std::to_string(dof) + " is invalid: must be >= 1");
  // The 0.975 quantiles of Student's t for 1..30 degrees of freedom.
  static constexpr double kTable[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                        2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                        2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                        2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof <= 30) return kTable[dof - 1];
  const double z = 1.959963984540054, v = static_cast<double>(dof), z2 = z * z;
  return z + z * (z2 + 1) / (4 * v) + z * ((5 * z2 + 16) * z2 + 3) / (96 * v * v) +
         z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * v * v * v);
}

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
    s.ci95 = student_t95(s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
  }
  return s;
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

namespace {

// The configuration, and a test split long enough for the longest evaluation window.
void validate_text(const Corpus& corpus, const ExperimentConfig& config) {
  validate(config);
  const int64_t longest = *std::max_element(config.eval.lengths.begin(), config.eval.lengths.end());
  if (static_cast<int64_t>(corpus.test.size()) < longest + 1)
    throw Error("lab: the test split of " + corpus.origin + " has " + std::to_string(corpus.test.size()) +
                " characters, fewer than the longest evaluation length + 1 = " + std::to_string(longest + 1));
}

}  // namespace

std::vector<RunResult> run_experiment(const Corpus& corpus, const ExperimentConfig& config,
                                      const ExperimentCallbacks& callbacks) {
  validate_text(corpus, config);
  const int64_t longest = *std::max_element(config.eval.lengths.begin(), config.eval.lengths.end());
  Workload work;
  work.vocab_size = corpus.vocab_size();
  work.metadata = {{"corpus", corpus.origin},
                   {"corpus_fingerprint", corpus.fingerprint},
                   {"vocabulary", corpus.vocabulary_utf8()}};
  work.train = [&](Model& model, const TrainConfig& tc, const auto& on_step) {
    return train(model, corpus.train, tc, on_step);
  };
  // The plain rotation's results of the model last evaluated plain (run_workload evaluates plain first):
  // a scaled mode at a length where it is the plain rotation takes them instead of computing them again.
  std::vector<EvalResult> plain;
  work.evaluate = [&](Model& model, RopeEval mode, RunResult& r) {
    if (mode == RopeEval::plain) plain.clear();
    for (size_t at = 0; at < config.eval.lengths.size(); ++at) {
      const int64_t L = config.eval.lengths[at];
      if (mode != RopeEval::plain && rope_eval_is_plain(mode, model.config().train_len, L) &&
          at < plain.size()) {
        r.eval.push_back(plain[at]);
        r.eval.back().seconds = 0;  // not evaluated again
        continue;
      }
      model.set_rope_eval(mode, L);
      EvalConfig one = config.eval;
      one.lengths = {L};
      // Score the same characters at every length: the prefix fitting the longest length.
      one.max_tokens =
          std::min<int64_t>(config.eval.max_tokens, static_cast<int64_t>(corpus.test.size()) - 1) / longest *
          longest;
      r.eval.push_back(evaluate(model, corpus.test, one).front());
      if (mode == RopeEval::plain) plain.push_back(r.eval.back());
    }
  };
  return run_workload(config, work, callbacks);
}

WallTimePrediction predict_wall_time(const Corpus& corpus, const ExperimentConfig& config,
                                     int64_t probe_steps) {
  validate_text(corpus, config);
  if (probe_steps < 1)
    throw Error("lab: probe_steps = " + std::to_string(probe_steps) + " is invalid: must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const int64_t longest = *std::max_element(config.eval.lengths.begin(), config.eval.lengths.end());
  const int64_t usable =
      std::min<int64_t>(config.eval.max_tokens, static_cast<int64_t>(corpus.test.size()) - 1);
  const double scored = static_cast<double>(usable / longest * longest);  // characters per length
  WallTimePrediction p;
  double per_seed = 0;
  for (const EncodingSpec& encoding : config.encodings) {
    ModelConfig mc = config.model;
    mc.vocab_size = corpus.vocab_size();
    mc.encoding = encoding;
    Model model(mc, config.seed);
    TrainConfig tc = config.train;
    tc.steps = 1;  // untimed: first allocations
    train(model, corpus.train, tc);
    tc.steps = probe_steps;
    WallTimePrediction::Encoding e;
    e.label = encoding.name();
    e.ms_per_step = train(model, corpus.train, tc).ms_per_step;
    double scaled = 0;  // the lengths the RoPE scalings evaluate again (past the training length)
    for (int64_t L : config.eval.lengths) {
      EvalConfig one = config.eval;
      one.lengths = {L};
      one.max_tokens = std::max<int64_t>(1, config.eval.batch_tokens / L) * L;  // one batch
      if (one.max_tokens > usable) one.max_tokens = usable / L * L;
      const auto te = std::chrono::steady_clock::now();
      const EvalResult r = evaluate(model, corpus.test, one).front();
      const double seconds = since(te) * scored / static_cast<double>(std::max<int64_t>(1, r.tokens));
      e.eval_seconds += seconds;
      if (!rope_eval_is_plain(RopeEval::linear, mc.train_len, L)) scaled += seconds;
    }
    if (encoding.has(EncodingKind::rope))
      e.eval_seconds += scaled * static_cast<double>(config.rope_evals.size());
    per_seed += static_cast<double>(config.train.steps) * e.ms_per_step * 1e-3 + e.eval_seconds;
    p.encodings.push_back(e);
  }
  p.seconds = per_seed * static_cast<double>(config.seeds);
  p.probe_seconds = since(t0);
  return p;
}

const std::vector<ScalePreset>& scale_presets() {
  static const std::vector<ScalePreset> presets = {
      {"small", 64, 2, 4, 256, 64, 500, 3e-3,
       "about 0.1M parameters, 2,048 tokens per step: the default protocol"},
      {"medium", 128, 4, 4, 512, 128, 2000, 2e-3, "about 0.8M parameters, 4,096 tokens per step"},
      {"large", 256, 6, 8, 1024, 256, 3000, 1e-3, "about 4.7M parameters, 8,192 tokens per step"},
  };
  return presets;
}

const ScalePreset& scale_preset(const std::string& name) {
  std::string names;
  for (const ScalePreset& p : scale_presets()) {
    if (name == p.name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw Error("--scale = '" + name + "' is invalid: expected one of " + names);
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
    row.seed_bits_per_char = c.values[0];
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

}  // namespace posenc::lab
