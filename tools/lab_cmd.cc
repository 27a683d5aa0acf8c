// tools/lab_cmd.cc: running `posenc lab`: its options, the experiment's configuration from them,
// and a progress display while it trains one model per encoding on the same text or task
// (lab/experiment.h). The tables, verdicts, JSON and CSV that follow are lab_report.h's.
#include "lab_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "lab/experiment.h"
#include "lab/ops.h"
#include "lab_report.h"
#include "memory.h"
#include "posenc/error.h"

namespace posenc::tools {
namespace {

struct LabOptions {
  std::string corpus = lab::kDefaultCorpus;
  std::string encodings = "all", rope_evals = "linear,ntk,yarn", norm = "layer", progress = "auto", out, task;
  int64_t task_samples = 128;
  std::vector<int64_t> eval_lengths{64, 128, 256, 512, 1024};
  int64_t eval_tokens = 1 << 17, steps = 500, batch = 32, train_len = 64, layers = 2, d_model = 64, heads = 4,
          mlp = 256, warmup = 50, seeds = lab::kDefaultSeeds, threads = 0, binary_bits = 0;
  int64_t t5_buckets = 16, t5_max_distance = 32, max_distance = 32;
  double lr = 3e-3, weight_decay = 0.1, clip = 1.0, test_fraction = 0.05;
  uint64_t seed = 1;
  bool save_checkpoints = false, dry_run = false;
  std::string scale;  // a preset (lab::scale_presets); flags given explicitly win over it
};

// --scale NAME: the preset's sizes for every size flag not given on the command line.
void apply_scale(LabOptions& o, const CLI::App& cmd) {
  if (o.scale.empty()) return;
  const lab::ScalePreset& p = lab::scale_preset(o.scale);
  const auto unset = [&](const char* flag) { return cmd.get_option(flag)->count() == 0; };
  if (unset("--d-model")) o.d_model = p.d_model;
  if (unset("--layers")) o.layers = p.layers;
  if (unset("--heads")) o.heads = p.heads;
  if (unset("--mlp")) o.mlp = p.mlp;
  if (unset("--train-len")) o.train_len = p.train_len;
  if (unset("--steps")) o.steps = p.steps;
  if (unset("--warmup")) o.warmup = o.steps / 10;
  if (unset("--lr")) o.lr = p.lr;
  if (unset("--eval-lengths"))
    o.eval_lengths = {o.train_len, 2 * o.train_len, 4 * o.train_len, 8 * o.train_len, 16 * o.train_len};
  if (unset("--t5-max-distance")) o.t5_max_distance = std::max<int64_t>(1, o.train_len / 2);
  if (unset("--max-distance")) o.max_distance = std::max<int64_t>(1, o.train_len / 2);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A bar on a terminal, a line per 10% of the steps otherwise.
class Progress {
 public:
  explicit Progress(const std::string& mode) {
    if (mode == "auto")
      bar_ = isatty(STDERR_FILENO) != 0, quiet_ = false;
    else if (mode == "bar")
      bar_ = true;
    else if (mode == "lines")
      bar_ = false;
    else if (mode == "none")
      quiet_ = true;
    else
      throw Error("--progress = '" + mode + "' is invalid: expected auto, bar, lines or none");
  }
  void start(const std::string& label, uint64_t seed, int64_t index, int64_t total) {
    label_ = "[" + std::to_string(index + 1) + "/" + std::to_string(total) + "] " + label + " seed " +
             std::to_string(seed);
  }
  void step(const lab::StepReport& r) {
    if (quiet_) return;
    const double eta = r.seconds / static_cast<double>(r.step) * static_cast<double>(r.steps - r.step);
    char stats[160];
    std::snprintf(stats, sizeof stats, "step %4lld/%lld  loss %.3f  %6.0f tok/s  ETA %3.0fs",
                  static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss,
                  r.tokens_per_second, eta);
    if (bar_) {
      const int width = 24, filled = static_cast<int>(width * r.step / r.steps);
      std::fprintf(stderr, "\r%-28s [%s%s] %s", label_.c_str(),
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(width - filled), ' ').c_str(), stats);
      if (r.step == r.steps) std::fprintf(stderr, "\n");
    } else if (r.step == r.steps || r.step % std::max<int64_t>(1, r.steps / 10) == 0) {
      std::fprintf(stderr, "%s %s\n", label_.c_str(), stats);
    }
    std::fflush(stderr);
  }

 private:
  bool bar_ = false, quiet_ = false;
  std::string label_;
};

// --task-samples' limit: a million samples give the exact match to within 0.1%; more only take longer.
constexpr int64_t kMaxTaskSamples = 1000000;

// Each size flag in its range, before the corpus is read; what they ask for together is checked
// against the memory in experiment_config, and the lab's own rules in lab::validate.
void check_sizes(const LabOptions& o) {
  require_size("--steps", o.steps);
  require_size("--batch", o.batch);
  require_size("--train-len", o.train_len);
  for (int64_t L : o.eval_lengths) require_size("--eval-lengths", L);
  require_size("--eval-tokens", o.eval_tokens);
  require_size("--layers", o.layers);
  require_size("--d-model", o.d_model);
  require_size("--heads", o.heads);
  require_size("--mlp", o.mlp);
  require_size("--warmup", o.warmup, 0);
  require_size("--seeds", o.seeds);
  require_size("--threads", o.threads, 0, 1024, "0 = all cores");
  require_size("--binary-bits", o.binary_bits, 0, kMaxSize, "0 = enough for the longest evaluation length");
  require_size("--t5-buckets", o.t5_buckets);
  require_size("--t5-max-distance", o.t5_max_distance);
  require_size("--max-distance", o.max_distance, 0);
  require_size("--task-samples", o.task_samples, 1, kMaxTaskSamples);
}

lab::ExperimentConfig experiment_config(const LabOptions& o, const lab::Corpus& corpus) {
  lab::ExperimentConfig c;
  c.model.d_model = o.d_model;
  c.model.layers = o.layers;
  c.model.heads = o.heads;
  c.model.mlp = o.mlp;
  c.model.train_len = o.train_len;
  if (o.norm != "layer" && o.norm != "rms")
    throw Error("--norm = '" + o.norm + "' is invalid: expected layer or rms");
  c.model.norm = o.norm == "layer" ? lab::ops::Norm::layer : lab::ops::Norm::rms;
  c.model.options.t5_buckets = o.t5_buckets;
  c.model.options.t5_max_distance = o.t5_max_distance;
  c.model.options.max_distance = o.max_distance;
  int64_t longest = 1;
  for (int64_t L : o.eval_lengths) longest = std::max(longest, L);
  c.model.options.binary_bits =
      o.binary_bits > 0 ? o.binary_bits
                        : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::log2(longest))));
  c.model.vocab_size = corpus.vocab_size();
  c.train.steps = o.steps;
  c.train.batch = o.batch;
  c.train.optimizer.lr = o.lr;
  c.train.optimizer.warmup = o.warmup;
  c.train.optimizer.weight_decay = o.weight_decay;
  c.train.optimizer.clip = o.clip;
  c.eval.lengths = o.eval_lengths;
  c.eval.max_tokens = o.eval_tokens;
  c.seeds = o.seeds;
  c.seed = o.seed;
  c.encodings.clear();
  if (o.encodings == "all")
    c.encodings = lab::default_lab_encodings();
  else
    for (const std::string& e : split_list(o.encodings)) c.encodings.push_back(lab::EncodingSpec::parse(e));
  c.rope_evals.clear();
  if (o.rope_evals != "none")
    for (const std::string& m : split_list(o.rope_evals)) {
      const lab::RopeEval mode = lab::parse_rope_eval(m);
      if (mode != lab::RopeEval::plain) c.rope_evals.push_back(mode);
    }
  if (!o.out.empty() && o.save_checkpoints) c.checkpoint_dir = o.out + "/checkpoints";
  if (!o.task.empty()) {
    c.task = lab::parse_task(o.task);
    c.model.vocab_size = lab::task_vocab_size();
  }
  c.task_samples = o.task_samples;
  // The memory first: the estimate needs only sizes in range (check_sizes), and names the flags
  // where lab::validate would name a size derived from them (rope's max_position_embeddings from
  // --train-len, binary's bits from --eval-lengths).
  std::string lengths;
  for (int64_t L : o.eval_lengths) lengths += (lengths.empty() ? "" : ",") + std::to_string(L);
  require_memory("posenc lab with --layers " + std::to_string(o.layers) + " --d-model " +
                     std::to_string(o.d_model) + " --heads " + std::to_string(o.heads) + " --mlp " +
                     std::to_string(o.mlp) + " --batch " + std::to_string(o.batch) + " --train-len " +
                     std::to_string(o.train_len) + " --eval-lengths " + lengths + " --steps " +
                     std::to_string(o.steps) + " --seeds " + std::to_string(o.seeds) + " --t5-buckets " +
                     std::to_string(o.t5_buckets) + " --max-distance " + std::to_string(o.max_distance),
                 lab::estimated_memory_bytes(c));
  lab::validate(c);
  return c;
}

void run_lab(const LabOptions& o) {
  check_sizes(o);
  if (o.threads > 0) lab::ops::set_threads(static_cast<int>(o.threads));
  const auto t0 = std::chrono::steady_clock::now();
  const bool task = !o.task.empty();
  const lab::Corpus corpus = task ? lab::Corpus{} : lab::load_corpus(o.corpus, o.test_fraction);
  const lab::ExperimentConfig config = experiment_config(o, corpus);
  std::cout << "posenc lab: " << config.encodings.size() << " encodings x " << config.seeds << " seed(s), ";
  if (task)
    std::cout << "synthetic task '" << o.task
              << "' (fresh samples each step, loss on the answers only; vocabulary " << lab::task_vocab_size()
              << ")\n";
  else
    std::cout << corpus.origin << " (" << corpus.train.size() << " train / " << corpus.test.size()
              << " test characters, vocabulary " << corpus.vocab_size() << ")\n";
  std::cout << "model: " << config.model.layers << " layers, d_model " << config.model.d_model << ", "
            << config.model.heads << " heads, mlp " << config.model.mlp << ", "
            << (o.norm == "layer" ? "LayerNorm" : "RMSNorm") << "; train length " << o.train_len << ", batch "
            << o.batch << ", " << o.steps << " steps, AdamW lr " << o.lr << "\n"
            << "t5: " << o.t5_buckets << " buckets (" << o.t5_buckets / 2 << " exact), max distance "
            << o.t5_max_distance
            << (o.t5_max_distance <= o.train_len ? " (<= train length: every bucket is trained)"
                                                 : " (> train length: far buckets stay untrained)")
            << "; relative/shaw clip at " << o.max_distance << "; binary codes with "
            << config.model.options.binary_bits << " bits (sized for the longest evaluation length)\n";
  if (!o.scale.empty()) {
    const lab::ScalePreset& p = lab::scale_preset(o.scale);
    std::cout << "scale: " << p.name << " (" << p.about << "); flags given explicitly win over it\n";
  }
  if (!task) {
    // The prediction, before the run: a few measured steps and evaluation batches per encoding.
    const lab::WallTimePrediction p = lab::predict_wall_time(corpus, config);
    char line[200];
    std::snprintf(line, sizeof line,
                  "predicted wall time: %.0f s (%.1f min) for %zu encodings x %lld seed(s), from step and "
                  "evaluation times measured in %.1f s\n",
                  p.seconds, p.seconds / 60, config.encodings.size(), static_cast<long long>(config.seeds),
                  p.probe_seconds);
    std::cout << line;
    if (o.dry_run) {
      std::cout << "encoding              ms/step   evaluation s (per seed)\n";
      for (const auto& e : p.encodings) {
        std::snprintf(line, sizeof line, "%-20s %9.1f %12.1f\n", e.label.c_str(), e.ms_per_step,
                      e.eval_seconds);
        std::cout << line;
      }
    }
    std::cout << std::flush;
  } else if (o.dry_run) {
    std::cout << "--dry-run: no prediction for a task (it is made for the text comparison)\n";
  }
  if (o.dry_run) return;
  Progress progress(o.progress);
  lab::ExperimentCallbacks callbacks;
  callbacks.on_train_start = [&](const std::string& label, uint64_t seed, int64_t i, int64_t n) {
    progress.start(label, seed, i, n);
  };
  callbacks.on_step = [&](const lab::StepReport& r) { progress.step(r); };
  const std::vector<lab::RunResult> runs =
      task ? lab::run_task_experiment(config, callbacks) : lab::run_experiment(corpus, config, callbacks);
  const LabReportContext context{
      config,
      o.eval_lengths,
      o.train_len,
      o.seeds,
      o.threads,
      o.task,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (task)
    report_task(std::cout, context, runs, o.out);
  else
    report_text(std::cout, context, corpus, runs, o.out);
}

}  // namespace

void add_lab_command(CLI::App& app) {
  auto o = std::make_shared<LabOptions>();
  CLI::App* cmd =
      app.add_subcommand("lab", "train a small transformer per encoding and measure length extrapolation");
  CLI::Option* corpus =
      cmd->add_option("--corpus", o->corpus,
                      "UTF-8 text to train on (default: the KJV prepared by scripts/prepare_corpus.sh)");
  cmd->add_option(
         "--task", o->task,
         "a synthetic task instead of the text: copy, reverse, recall or passkey (exact match by length)")
      ->excludes(corpus);
  cmd->add_option("--task-samples", o->task_samples, "task samples scored per evaluation length");
  cmd->add_option("--encodings", o->encodings,
                  "comma-separated encodings, '+' for hybrids (e.g. rope,alibi,learned+t5), or all");
  cmd->add_option("--rope-eval", o->rope_evals,
                  "evaluation-time RoPE scalings of rope models: linear,ntk,yarn or none");
  cmd->add_option("--steps", o->steps, "training steps");
  cmd->add_option("--batch", o->batch, "windows per step");
  cmd->add_option("--train-len", o->train_len, "training length (and the learned table's size)");
  cmd->add_option("--eval-lengths", o->eval_lengths, "evaluation lengths")->delimiter(',');
  cmd->add_option("--eval-tokens", o->eval_tokens, "test characters scored per length");
  cmd->add_option("--layers", o->layers, "transformer layers");
  cmd->add_option("--d-model", o->d_model, "model width");
  cmd->add_option("--heads", o->heads, "attention heads");
  cmd->add_option("--mlp", o->mlp, "MLP hidden width");
  cmd->add_option("--norm", o->norm, "layer or rms");
  cmd->add_option("--lr", o->lr, "AdamW peak learning rate");
  cmd->add_option("--warmup", o->warmup, "warm-up steps");
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay");
  cmd->add_option("--clip", o->clip, "gradient norm clip (0: off)");
  cmd->add_option("--seed", o->seed, "first seed (weights and data order)");
  cmd->add_option("--seeds", o->seeds, "seeds per encoding (mean ± the 95% interval of the mean)");
  cmd->add_option("--t5-buckets", o->t5_buckets, "T5 buckets (causal: half exact)");
  cmd->add_option("--t5-max-distance", o->t5_max_distance, "T5 max distance");
  cmd->add_option("--max-distance", o->max_distance, "clipping distance of relative and shaw");
  cmd->add_option("--binary-bits", o->binary_bits,
                  "bits of the binary code (0: enough for the longest evaluation length)");
  cmd->add_option("--test-fraction", o->test_fraction, "share of the text held out for evaluation");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)");
  cmd->add_option("--progress", o->progress, "auto, bar, lines or none");
  cmd->add_option("--out", o->out, "directory for results.json and results.csv");
  cmd->add_flag("--save-checkpoints", o->save_checkpoints,
                "also save each model as <out>/checkpoints/<encoding>-seed<k>.safetensors");
  std::string scales;
  for (const lab::ScalePreset& p : lab::scale_presets())
    scales += (scales.empty() ? "" : ", ") + std::string(p.name);
  cmd->add_option("--scale", o->scale,
                  "the same protocol at another size: " + scales +
                      " (model, training length, steps, learning rate; explicit flags win)");
  cmd->add_flag("--dry-run", o->dry_run, "print the predicted wall time per encoding and stop");
  cmd->callback([o, cmd] {
    apply_scale(*o, *cmd);
    run_lab(*o);
  });
}

}  // namespace posenc::tools
