// lab/experiment.h: the comparison `posenc lab` runs: one model per encoding (and seed) trained
// on the same text with the same initial shared weights and the same data order, then evaluated
// at growing lengths; RoPE models are also evaluated with scaled rotations, without retraining.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "corpus.h"
#include "model.h"
#include "tasks.h"
#include "trainer.h"

namespace posenc::lab {

// Seeds per encoding when none are asked for: enough for a 95% interval of the mean (two degrees of
// freedom), the fewest that let the report call an ordering only where the intervals separate.
inline constexpr int64_t kDefaultSeeds = 3;

struct ExperimentConfig {
  ModelConfig model;  // vocab_size and encoding are set per run
  TrainConfig train;
  EvalConfig eval;
  std::vector<EncodingSpec> encodings = default_lab_encodings();
  std::vector<RopeEval> rope_evals{RopeEval::linear, RopeEval::ntk, RopeEval::yarn};  // besides plain
  int64_t seeds = kDefaultSeeds;  // runs per encoding; run s uses seed + s for weights and data order
  uint64_t seed = 1;
  std::string checkpoint_dir;  // non-empty: save <dir>/<encoding>-seed<k>.safetensors
  // A synthetic task instead of the text (run_task_experiment): trained on fresh samples of
  // train_len, scored by exact match on task_samples samples per evaluation length.
  std::optional<Task> task;
  int64_t task_samples = 128;
};
void validate(const ExperimentConfig& config);
// The most memory one run of the experiment holds (lab/model.h's estimate, for the largest
// model of its encodings at the larger of a training step and an evaluation forward), plus the
// training losses every run keeps; counted in double, so no product of sizes overflows.
double estimated_memory_bytes(const ExperimentConfig& config);

// The wall time a run of `config` on `corpus` will take, predicted from measured costs: per encoding,
// `probe_steps` training steps (after one untimed step) and one evaluation batch at each length, on
// a throwaway model, scaled to the run's steps, evaluated characters, RoPE variants and seeds.
struct WallTimePrediction {
  struct Encoding {
    std::string label;
    double ms_per_step = 0;
    double eval_seconds = 0;  // one model's evaluation at every length (every RoPE variant included)
  };
  std::vector<Encoding> encodings;
  double seconds = 0;        // the whole run
  double probe_seconds = 0;  // what the measuring took
};
WallTimePrediction predict_wall_time(const Corpus& corpus, const ExperimentConfig& config,
                                     int64_t probe_steps = 3);

// Sizes of the same protocol (`posenc lab --scale NAME`): the model, the training length (the
// evaluation lengths are 1x-16x of it, the relative clip and T5's max distance half of it), the steps
// with 10% warm-up, and a peak learning rate lowered with the width.
struct ScalePreset {
  const char* name;
  int64_t d_model, layers, heads, mlp, train_len, steps;  // warm-up: 10% of the steps
  double lr;
  const char* about;  // parameters, and the reason for the size
};
const std::vector<ScalePreset>& scale_presets();           // small (the default protocol), medium, large
const ScalePreset& scale_preset(const std::string& name);  // throws posenc::Error naming --scale

struct RunResult {
  std::string label;  // "rope", "rope (yarn)"
  EncodingSpec encoding;
  RopeEval rope_eval = RopeEval::plain;
  uint64_t seed = 0;
  int64_t num_params = 0;
  TrainResult train;                      // shared by the evaluation variants of one trained model
  std::vector<EvalResult> eval;           // text runs
  std::vector<TaskEvalResult> task_eval;  // task runs
  std::string checkpoint;                 // path, if saved
};

struct ExperimentCallbacks {
  std::function<void(const std::string& label, uint64_t seed, int64_t index, int64_t total)> on_train_start;
  std::function<void(const StepReport&)> on_step;
  std::function<void(const RunResult&)> on_run_done;
};

std::vector<RunResult> run_experiment(const Corpus& corpus, const ExperimentConfig& config,
                                      const ExperimentCallbacks& callbacks = {});
// The same comparison on config.task (which must be set): every model sees the same training
// samples for a seed and is scored on the same evaluation samples.
std::vector<RunResult> run_task_experiment(const ExperimentConfig& config,
                                           const ExperimentCallbacks& callbacks = {});

// t such that P(|T| <= t) = 0.95 for Student's t with `dof` >= 1 degrees of freedom (4.303 for 2):
// a table to 30, the Cornish-Fisher expansion past it (within 1e-4 of the exact quantile).
double student_t95(int64_t dof);

// Mean, sample standard deviation and the half-width of the 95% confidence interval of the mean
// over seeds: t95(n - 1) * std / sqrt(n) (Student's t; 0 with one value, which has no interval).
struct Stat {
  double mean = 0, std = 0, ci95 = 0;
  int64_t n = 0;
  double low() const { return mean - ci95; }
  double high() const { return mean + ci95; }
};
Stat stat_of(const std::vector<double>& values);

struct SummaryRow {
  std::string label;
  std::vector<Stat> bits_per_char;                      // per evaluation length; n = 0 where it cannot run
  std::vector<std::vector<double>> seed_bits_per_char;  // per length: each seed's figure, in seed order
  std::vector<std::string> errors;         // per length: the library's message where it cannot run
  std::vector<Stat> unseen_bits_per_char;  // per length: positions >= train_len only (n = 0 at 1x)
  Stat tokens_per_second, ms_per_step;
};
std::vector<SummaryRow> summarize(const std::vector<RunResult>& runs, const std::vector<int64_t>& lengths);

struct TaskSummaryRow {
  std::string label;
  std::vector<Stat> exact_match, token_accuracy;  // per evaluation length; n = 0 where it cannot run
  std::vector<std::string> errors;
  Stat tokens_per_second, ms_per_step;
};
std::vector<TaskSummaryRow> summarize_tasks(const std::vector<RunResult>& runs,
                                            const std::vector<int64_t>& lengths);

}  // namespace posenc::lab
