// tools/lab_cmd.cc: `posenc lab`: the seeds' extrapolation table, measured. Trains one model per
// encoding on the same text (lab/experiment.h), prints bits/char at 1x..16x the training length,
// the positions past it on their own, training speed, and verdicts against the published claims;
// writes everything as JSON and CSV.
#include "lab_cmd.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lab/experiment.h"
#include "lab/ops.h"
#include "posenc/error.h"

namespace posenc::tools {
namespace {

struct LabOptions {
  std::string corpus = lab::kDefaultCorpus;
  std::string encodings = "all", rope_evals = "linear,ntk,yarn", norm = "layer", progress = "auto", out, task;
  int64_t task_samples = 128;
  std::vector<int64_t> eval_lengths{64, 128, 256, 512, 1024};
  int64_t eval_tokens = 1 << 17, steps = 500, batch = 32, train_len = 64, layers = 2, d_model = 64, heads = 4,
          mlp = 256, warmup = 50, seeds = 1, threads = 0, binary_bits = 0;
  int64_t t5_buckets = 16, t5_max_distance = 32, max_distance = 32;
  double lr = 3e-3, weight_decay = 0.1, clip = 1.0, test_fraction = 0.05;
  uint64_t seed = 1;
  bool save_checkpoints = false;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string machine_line() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " logical CPUs";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

// A bar on a terminal, a line per 10% of the steps otherwise.
class Progress {
 public:
  explicit Progress(const std::string& mode) {
    if (mode == "auto") bar_ = isatty(STDERR_FILENO) != 0, quiet_ = false;
    else if (mode == "bar") bar_ = true;
    else if (mode == "lines") bar_ = false;
    else if (mode == "none") quiet_ = true;
    else throw Error("--progress = '" + mode + "' is invalid: expected auto, bar, lines or none");
  }
  void start(const std::string& label, uint64_t seed, int64_t index, int64_t total) {
    label_ = "[" + std::to_string(index + 1) + "/" + std::to_string(total) + "] " + label + " seed " + std::to_string(seed);
  }
  void step(const lab::StepReport& r) {
    if (quiet_) return;
    const double eta = r.seconds / static_cast<double>(r.step) * static_cast<double>(r.steps - r.step);
    char stats[160];
    std::snprintf(stats, sizeof stats, "step %4lld/%lld  loss %.3f  %6.0f tok/s  ETA %3.0fs", static_cast<long long>(r.step),
                  static_cast<long long>(r.steps), r.loss, r.tokens_per_second, eta);
    if (bar_) {
      const int width = 24, filled = static_cast<int>(width * r.step / r.steps);
      std::fprintf(stderr, "\r%-28s [%s%s] %s", label_.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
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

std::string cell(const lab::Stat& s, int64_t seeds, const char* format = "%.3f") {
  if (s.n == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, s.mean);
  std::string out = buf;
  if (seeds > 1) {
    std::snprintf(buf, sizeof buf, format, s.std);
    out += std::string("±") + buf;
  }
  return out;
}

lab::ExperimentConfig experiment_config(const LabOptions& o, const lab::Corpus& corpus) {
  lab::ExperimentConfig c;
  c.model.d_model = o.d_model;
  c.model.layers = o.layers;
  c.model.heads = o.heads;
  c.model.mlp = o.mlp;
  c.model.train_len = o.train_len;
  if (o.norm != "layer" && o.norm != "rms") throw Error("--norm = '" + o.norm + "' is invalid: expected layer or rms");
  c.model.norm = o.norm == "layer" ? lab::ops::Norm::layer : lab::ops::Norm::rms;
  c.model.options.t5_buckets = o.t5_buckets;
  c.model.options.t5_max_distance = o.t5_max_distance;
  c.model.options.max_distance = o.max_distance;
  int64_t longest = 1;
  for (int64_t L : o.eval_lengths) longest = std::max(longest, L);
  c.model.options.binary_bits = o.binary_bits > 0 ? o.binary_bits : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::log2(longest))));
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
  if (o.encodings == "all") c.encodings = lab::default_lab_encodings();
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
  if (o.task_samples < 1) throw Error("--task-samples = " + std::to_string(o.task_samples) + " is invalid: must be >= 1");
  lab::validate(c);
  return c;
}

void print_tables(std::ostream& os, const std::vector<lab::SummaryRow>& rows, const LabOptions& o) {
  char buf[64];
  os << "\nbits per character on the test text (lower is better), by evaluation length:\n";
  os << "encoding            ";
  for (int64_t L : o.eval_lengths) {
    std::snprintf(buf, sizeof buf, "%gx", static_cast<double>(L) / static_cast<double>(o.train_len));
    os << std::setw(o.seeds > 1 ? 14 : 8) << buf;
  }
  os << "   train tok/s   ms/step\n";
  for (const lab::SummaryRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%-20s", r.label.c_str());
    os << buf;
    for (const lab::Stat& stat : r.bits_per_char) os << std::setw(o.seeds > 1 ? 14 : 8) << cell(stat, o.seeds);
    std::snprintf(buf, sizeof buf, "   %11.0f %9.1f\n", r.tokens_per_second.mean, r.ms_per_step.mean);
    os << buf;
  }
  os << "\nthe same, positions >= " << o.train_len << " only (never seen in training; more context cannot explain a change):\n";
  os << "encoding            ";
  for (size_t i = 1; i < o.eval_lengths.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%gx", static_cast<double>(o.eval_lengths[i]) / static_cast<double>(o.train_len));
    os << std::setw(o.seeds > 1 ? 14 : 8) << buf;
  }
  os << "\n";
  for (const lab::SummaryRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%-20s", r.label.c_str());
    os << buf;
    for (size_t i = 1; i < r.unseen_bits_per_char.size(); ++i) os << std::setw(o.seeds > 1 ? 14 : 8) << cell(r.unseen_bits_per_char[i], o.seeds);
    os << "\n";
  }
  for (const lab::SummaryRow& r : rows)
    for (size_t i = 0; i < r.errors.size(); ++i)
      if (!r.errors[i].empty() && r.bits_per_char[i].n == 0) {
        os << "n/a for " << r.label << " at " << o.eval_lengths[i] << ": " << r.errors[i] << "\n";
        break;
      }
}

// What every results.json starts with: the tool, when and where, and the whole configuration.
nlohmann::ordered_json header_json(const LabOptions& o, const lab::ExperimentConfig& c, double seconds) {
  nlohmann::ordered_json j;
  j["tool"] = "posenc lab 0.1.0";
  j["date"] = today();
  j["machine"] = machine_line();
  j["threads"] = o.threads;
  j["wall_seconds"] = seconds;
  lab::ModelConfig model = c.model;
  j["model"] = nlohmann::ordered_json::parse(model.to_json());
  j["model"].erase("encoding");
  j["train"] = {{"steps", c.train.steps}, {"batch", c.train.batch}, {"lr", c.train.optimizer.lr}, {"warmup", c.train.optimizer.warmup},
                {"min_lr_ratio", c.train.optimizer.min_lr_ratio}, {"weight_decay", c.train.optimizer.weight_decay},
                {"betas", {c.train.optimizer.beta1, c.train.optimizer.beta2}}, {"clip", c.train.optimizer.clip}};
  j["eval"] = {{"lengths", c.eval.lengths}, {"max_tokens", c.eval.max_tokens}};
  j["seeds"] = c.seeds;
  return j;
}

// One run's fields shared by text and task results.
nlohmann::ordered_json run_json(const lab::RunResult& r) {
  nlohmann::ordered_json run = {{"label", r.label}, {"encoding", r.encoding.name()}, {"rope_eval", lab::rope_eval_name(r.rope_eval)},
                                {"seed", r.seed}, {"params", r.num_params}, {"train_seconds", r.train.seconds},
                                {"train_tokens_per_second", r.train.tokens_per_second}, {"ms_per_step", r.train.ms_per_step},
                                {"final_train_loss", r.train.final_loss}, {"train_losses", r.train.losses}};
  if (!r.checkpoint.empty()) run["checkpoint"] = r.checkpoint;
  return run;
}

nlohmann::ordered_json stat_json(int64_t length, const lab::Stat& s) {
  return s.n ? nlohmann::ordered_json({{"length", length}, {"mean", s.mean}, {"std", s.std}, {"n", s.n}})
             : nlohmann::ordered_json({{"length", length}, {"n", 0}});
}

nlohmann::ordered_json results_json(const LabOptions& o, const lab::ExperimentConfig& c, const lab::Corpus& corpus,
                                    const std::vector<lab::RunResult>& runs, const std::vector<lab::SummaryRow>& rows,
                                    const std::vector<std::string>& verdict_lines, double seconds) {
  nlohmann::ordered_json j = header_json(o, c, seconds);
  j["corpus"] = {{"path", corpus.origin}, {"fingerprint_fnv1a64", corpus.fingerprint}, {"bytes", corpus.bytes},
                 {"vocab_size", corpus.vocab_size()}, {"train_chars", corpus.train.size()}, {"test_chars", corpus.test.size()}};
  j["runs"] = nlohmann::ordered_json::array();
  for (const lab::RunResult& r : runs) {
    nlohmann::ordered_json run = run_json(r);
    run["eval"] = nlohmann::ordered_json::array();
    for (const lab::EvalResult& e : r.eval) {
      nlohmann::ordered_json ej = {{"length", e.length}, {"ok", e.ok}};
      if (e.ok) {
        ej["bits_per_char"] = e.bits_per_char;
        ej["buckets"] = nlohmann::ordered_json::array();
        for (const lab::BucketResult& b : e.buckets)
          ej["buckets"].push_back({{"begin", b.begin}, {"end", b.end}, {"bits_per_char", b.bits_per_char}, {"tokens", b.tokens}});
      } else {
        ej["error"] = e.error;
      }
      ej["windows"] = e.windows;
      ej["seconds"] = e.seconds;
      run["eval"].push_back(ej);
    }
    j["runs"].push_back(run);
  }
  j["summary"] = nlohmann::ordered_json::array();
  for (const lab::SummaryRow& r : rows) {
    nlohmann::ordered_json s = {{"label", r.label}};
    for (size_t i = 0; i < r.bits_per_char.size(); ++i) s["bits_per_char"].push_back(stat_json(c.eval.lengths[i], r.bits_per_char[i]));
    s["train_tokens_per_second"] = r.tokens_per_second.mean;
    s["ms_per_step"] = r.ms_per_step.mean;
    j["summary"].push_back(s);
  }
  j["verdicts"] = verdict_lines;
  return j;
}

void write_csv(const std::string& path, const std::vector<lab::RunResult>& runs) {
  std::ofstream out(path);
  if (!out) throw Error("--out: cannot write '" + path + "'");
  out << "label,encoding,rope_eval,seed,length,begin,end,bits_per_char,tokens,train_tokens_per_second,ms_per_step\n";
  for (const lab::RunResult& r : runs)
    for (const lab::EvalResult& e : r.eval) {
      auto row = [&](int64_t begin, int64_t end, const std::string& bits, int64_t tokens) {
        out << '"' << r.label << "\"," << r.encoding.name() << ',' << lab::rope_eval_name(r.rope_eval) << ',' << r.seed << ',' << e.length
            << ',' << begin << ',' << end << ',' << bits << ',' << tokens << ',' << r.train.tokens_per_second << ','
            << r.train.ms_per_step << '\n';
      };
      if (!e.ok) {
        row(0, e.length, "", 0);
        continue;
      }
      row(0, e.length, std::to_string(e.bits_per_char), e.tokens);
      for (const lab::BucketResult& b : e.buckets) row(b.begin, b.end, std::to_string(b.bits_per_char), b.tokens);
    }
}

// The synthetic-task tables: exact match (every answer token right) and per-token accuracy, in %.
void print_task_tables(std::ostream& os, const std::vector<lab::TaskSummaryRow>& rows, const LabOptions& o) {
  char buf[64];
  auto table = [&](const char* title, std::vector<lab::Stat> lab::TaskSummaryRow::*column, bool speed) {
    os << "\n" << title << "\nencoding            ";
    for (int64_t L : o.eval_lengths) {
      std::snprintf(buf, sizeof buf, "%gx", static_cast<double>(L) / static_cast<double>(o.train_len));
      os << std::setw(o.seeds > 1 ? 14 : 8) << buf;
    }
    os << (speed ? "   train tok/s   ms/step\n" : "\n");
    for (const lab::TaskSummaryRow& r : rows) {
      std::snprintf(buf, sizeof buf, "%-20s", r.label.c_str());
      os << buf;
      for (const lab::Stat& stat : r.*column) {
        lab::Stat percent = stat;
        percent.mean *= 100, percent.std *= 100;
        os << std::setw(o.seeds > 1 ? 14 : 8) << cell(percent, o.seeds, "%.1f");
      }
      if (speed) {
        std::snprintf(buf, sizeof buf, "   %11.0f %9.1f", r.tokens_per_second.mean, r.ms_per_step.mean);
        os << buf;
      }
      os << "\n";
    }
  };
  table(("exact match (%) on " + o.task + ", " + std::to_string(o.task_samples) + " samples per length (higher is better):").c_str(),
        &lab::TaskSummaryRow::exact_match, true);
  table("answer tokens right (%):", &lab::TaskSummaryRow::token_accuracy, false);
  for (const lab::TaskSummaryRow& r : rows)
    for (size_t i = 0; i < r.errors.size(); ++i)
      if (!r.errors[i].empty() && r.exact_match[i].n == 0) {
        os << "n/a for " << r.label << " at " << o.eval_lengths[i] << ": " << r.errors[i] << "\n";
        break;
      }
}

nlohmann::ordered_json task_results_json(const LabOptions& o, const lab::ExperimentConfig& c, const std::vector<lab::RunResult>& runs,
                                         const std::vector<lab::TaskSummaryRow>& rows, double seconds) {
  nlohmann::ordered_json j = header_json(o, c, seconds);
  j["task"] = {{"name", o.task}, {"samples", c.task_samples}, {"vocabulary", lab::task_alphabet()}};
  j["runs"] = nlohmann::ordered_json::array();
  for (const lab::RunResult& r : runs) {
    nlohmann::ordered_json run = run_json(r);
    run["eval"] = nlohmann::ordered_json::array();
    for (const lab::TaskEvalResult& e : r.task_eval) {
      nlohmann::ordered_json ej = {{"length", e.length}, {"ok", e.ok}};
      if (e.ok) ej["exact_match"] = e.exact_match, ej["token_accuracy"] = e.token_accuracy;
      else ej["error"] = e.error;
      ej["samples"] = e.samples;
      ej["answers"] = e.answers;
      ej["seconds"] = e.seconds;
      run["eval"].push_back(ej);
    }
    j["runs"].push_back(run);
  }
  j["summary"] = nlohmann::ordered_json::array();
  for (const lab::TaskSummaryRow& r : rows) {
    nlohmann::ordered_json s = {{"label", r.label}};
    for (size_t i = 0; i < r.exact_match.size(); ++i) {
      s["exact_match"].push_back(stat_json(c.eval.lengths[i], r.exact_match[i]));
      s["token_accuracy"].push_back(stat_json(c.eval.lengths[i], r.token_accuracy[i]));
    }
    s["train_tokens_per_second"] = r.tokens_per_second.mean;
    s["ms_per_step"] = r.ms_per_step.mean;
    j["summary"].push_back(s);
  }
  return j;
}

void write_task_csv(const std::string& path, const std::vector<lab::RunResult>& runs) {
  std::ofstream out(path);
  if (!out) throw Error("--out: cannot write '" + path + "'");
  out << "label,encoding,rope_eval,seed,length,exact_match,token_accuracy,samples,answers,train_tokens_per_second,ms_per_step\n";
  for (const lab::RunResult& r : runs)
    for (const lab::TaskEvalResult& e : r.task_eval)
      out << '"' << r.label << "\"," << r.encoding.name() << ',' << lab::rope_eval_name(r.rope_eval) << ',' << r.seed << ',' << e.length
          << ',' << (e.ok ? std::to_string(e.exact_match) : "") << ',' << (e.ok ? std::to_string(e.token_accuracy) : "") << ','
          << e.samples << ',' << e.answers << ',' << r.train.tokens_per_second << ',' << r.train.ms_per_step << '\n';
}

void write_results(const LabOptions& o, const nlohmann::ordered_json& json,
                   const std::function<void(const std::string& csv_path)>& write_csv_file) {
  if (o.out.empty()) return;
  std::filesystem::create_directories(o.out);
  const std::string json_path = o.out + "/results.json", csv_path = o.out + "/results.csv";
  std::ofstream out(json_path);
  if (!out) throw Error("--out: cannot write '" + json_path + "'");
  out << json.dump(2) << "\n";
  write_csv_file(csv_path);
  std::cout << "wrote " << json_path << " and " << csv_path << "\n";
}

void run_lab(const LabOptions& o) {
  if (o.threads < 0) throw Error("--threads = " + std::to_string(o.threads) + " is invalid: must be >= 0 (0: all cores)");
  if (o.threads > 0) lab::ops::set_threads(static_cast<int>(o.threads));
  const auto t0 = std::chrono::steady_clock::now();
  const bool task = !o.task.empty();
  const lab::Corpus corpus = task ? lab::Corpus{} : lab::load_corpus(o.corpus, o.test_fraction);
  const lab::ExperimentConfig config = experiment_config(o, corpus);
  std::cout << "posenc lab: " << config.encodings.size() << " encodings x " << config.seeds << " seed(s), ";
  if (task)
    std::cout << "synthetic task '" << o.task << "' (fresh samples each step, loss on the answers only; vocabulary "
              << lab::task_vocab_size() << ")\n";
  else
    std::cout << corpus.origin << " (" << corpus.train.size() << " train / " << corpus.test.size() << " test characters, vocabulary "
              << corpus.vocab_size() << ")\n";
  std::cout << "model: " << config.model.layers << " layers, d_model " << config.model.d_model << ", " << config.model.heads
            << " heads, mlp " << config.model.mlp << ", " << (o.norm == "layer" ? "LayerNorm" : "RMSNorm") << "; train length "
            << o.train_len << ", batch " << o.batch << ", " << o.steps << " steps, AdamW lr " << o.lr << "\n"
            << "t5: " << o.t5_buckets << " buckets (" << o.t5_buckets / 2 << " exact), max distance " << o.t5_max_distance
            << (o.t5_max_distance <= o.train_len ? " (<= train length: every bucket is trained)" : " (> train length: far buckets stay untrained)")
            << "; relative/shaw clip at " << o.max_distance << "; binary codes with " << config.model.options.binary_bits
            << " bits (sized for the longest evaluation length)\n";
  Progress progress(o.progress);
  lab::ExperimentCallbacks callbacks;
  callbacks.on_train_start = [&](const std::string& label, uint64_t seed, int64_t i, int64_t n) { progress.start(label, seed, i, n); };
  callbacks.on_step = [&](const lab::StepReport& r) { progress.step(r); };
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto footer = [&](double seconds) {
    std::cout << "\n" << today() << ", " << machine_line() << ", " << std::fixed << std::setprecision(0) << seconds << " s\n";
  };
  if (task) {
    const std::vector<lab::RunResult> runs = lab::run_task_experiment(config, callbacks);
    const std::vector<lab::TaskSummaryRow> rows = lab::summarize_tasks(runs, o.eval_lengths);
    print_task_tables(std::cout, rows, o);
    const double seconds = elapsed();
    footer(seconds);
    write_results(o, task_results_json(o, config, runs, rows, seconds), [&](const std::string& path) { write_task_csv(path, runs); });
    return;
  }
  const std::vector<lab::RunResult> runs = lab::run_experiment(corpus, config, callbacks);
  const std::vector<lab::SummaryRow> rows = lab::summarize(runs, o.eval_lengths);
  const std::vector<std::string> verdict_lines = lab::verdicts(rows, o.eval_lengths, o.train_len);
  print_tables(std::cout, rows, o);
  std::cout << "\nagainst the claims (seeds' table; Press et al. 2022, WikiText-103):\n";
  for (const std::string& line : verdict_lines) std::cout << "  " << line << "\n";
  const double seconds = elapsed();
  footer(seconds);
  write_results(o, results_json(o, config, corpus, runs, rows, verdict_lines, seconds), [&](const std::string& path) { write_csv(path, runs); });
}

}  // namespace

void add_lab_command(CLI::App& app) {
  auto o = std::make_shared<LabOptions>();
  CLI::App* cmd = app.add_subcommand("lab", "train a small transformer per encoding and measure length extrapolation");
  CLI::Option* corpus = cmd->add_option("--corpus", o->corpus, "UTF-8 text to train on (default: the KJV prepared by scripts/prepare_corpus.sh)");
  cmd->add_option("--task", o->task, "a synthetic task instead of the text: copy, reverse, recall or passkey (exact match by length)")->excludes(corpus);
  cmd->add_option("--task-samples", o->task_samples, "task samples scored per evaluation length");
  cmd->add_option("--encodings", o->encodings, "comma-separated encodings, '+' for hybrids (e.g. rope,alibi,learned+t5), or all");
  cmd->add_option("--rope-eval", o->rope_evals, "evaluation-time RoPE scalings of rope models: linear,ntk,yarn or none");
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
  cmd->add_option("--seeds", o->seeds, "seeds per encoding (mean ± std)");
  cmd->add_option("--t5-buckets", o->t5_buckets, "T5 buckets (causal: half exact)");
  cmd->add_option("--t5-max-distance", o->t5_max_distance, "T5 max distance");
  cmd->add_option("--max-distance", o->max_distance, "clipping distance of relative and shaw");
  cmd->add_option("--binary-bits", o->binary_bits, "bits of the binary code (0: enough for the longest evaluation length)");
  cmd->add_option("--test-fraction", o->test_fraction, "share of the text held out for evaluation");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)");
  cmd->add_option("--progress", o->progress, "auto, bar, lines or none");
  cmd->add_option("--out", o->out, "directory for results.json and results.csv");
  cmd->add_flag("--save-checkpoints", o->save_checkpoints, "also save each model as <out>/checkpoints/<encoding>-seed<k>.safetensors");
  cmd->callback([o] { run_lab(*o); });
}

}  // namespace posenc::tools
