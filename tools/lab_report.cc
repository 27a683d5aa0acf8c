// tools/lab_report.cc: see lab_report.h.
#include "lab_report.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "claims.h"
#include "files.h"
#include "posenc/error.h"

namespace posenc::tools {
namespace {

using Json = nlohmann::ordered_json;

std::string cell(const lab::Stat& s, int64_t seeds, const char* format, double scale) {
  if (s.n == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, s.mean * scale);
  std::string out = buf;
  if (seeds > 1) {
    std::snprintf(buf, sizeof buf, format, s.ci95 * scale);
    out += std::string("±") + buf;
  }
  return out;
}

// What the ± of the tables is, said once above them.
void interval_note(std::ostream& os, int64_t seeds) {
  if (seeds < 2) {
    os << "one seed: no interval (--seeds N for mean ± the 95% interval of the mean over N seeds)\n";
    return;
  }
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "mean ± half-width of the 95%% confidence interval of the mean over %lld seeds "
                "(Student's t: %.3f x std / sqrt(%lld))\n",
                static_cast<long long>(seeds), lab::student_t95(seeds - 1), static_cast<long long>(seeds));
  os << buf;
}

void footer(std::ostream& os, double seconds) {
  os << "\n"
     << today() << ", " << machine_line() << ", " << std::fixed << std::setprecision(0) << seconds << " s\n";
}

// What every results.json starts with: the tool, when and where, and the whole configuration.
Json header_json(const LabReportContext& x) {
  const lab::ExperimentConfig& c = x.config;
  Json j;
  j["tool"] = "posenc lab 0.1.0";
  j["date"] = today();
  j["machine"] = machine_line();
  j["threads"] = x.threads;
  j["wall_seconds"] = x.seconds;
  j["model"] = Json::parse(c.model.to_json());
  j["model"].erase("encoding");
  const lab::OptimizerConfig& opt = c.train.optimizer;
  j["train"] = {{"steps", c.train.steps},
                {"batch", c.train.batch},
                {"lr", opt.lr},
                {"warmup", opt.warmup},
                {"min_lr_ratio", opt.min_lr_ratio},
                {"weight_decay", opt.weight_decay},
                {"betas", {opt.beta1, opt.beta2}},
                {"clip", opt.clip}};
  j["eval"] = {{"lengths", c.eval.lengths}, {"max_tokens", c.eval.max_tokens}};
  j["seeds"] = c.seeds;
  return j;
}

// One run's fields shared by text and task results; `eval_json` adds its evaluations.
Json runs_json(const std::vector<lab::RunResult>& runs,
               const std::function<Json(const lab::RunResult&)>& eval_json) {
  Json out = Json::array();
  for (const lab::RunResult& r : runs) {
    Json run = {{"label", r.label},
                {"encoding", r.encoding.name()},
                {"rope_eval", lab::rope_eval_name(r.rope_eval)},
                {"seed", r.seed},
                {"params", r.num_params},
                {"train_seconds", r.train.seconds},
                {"train_tokens_per_second", r.train.tokens_per_second},
                {"ms_per_step", r.train.ms_per_step},
                {"final_train_loss", r.train.final_loss},
                {"train_losses", r.train.losses}};
    if (!r.checkpoint.empty()) run["checkpoint"] = r.checkpoint;
    run["eval"] = eval_json(r);
    out.push_back(run);
  }
  return out;
}

Json stat_json(int64_t length, const lab::Stat& s) {
  return s.n ? Json({{"length", length}, {"mean", s.mean}, {"std", s.std}, {"ci95", s.ci95}, {"n", s.n}})
             : Json({{"length", length}, {"n", 0}});
}

// The summary: per row, each named metric by length, then the training speed.
Json summary_json(const std::vector<std::pair<std::string, const MetricTable*>>& metrics,
                  const std::vector<int64_t>& lengths) {
  Json out = Json::array();
  const MetricTable& first = *metrics.front().second;
  for (size_t r = 0; r < first.rows.size(); ++r) {
    Json s = {{"label", first.rows[r].label}};
    for (const auto& [name, table] : metrics)
      for (size_t i = 0; i < table->rows[r].values.size(); ++i)
        s[name].push_back(stat_json(lengths[i], table->rows[r].values[i]));
    s["train_tokens_per_second"] = first.rows[r].tokens_per_second.mean;
    s["ms_per_step"] = first.rows[r].ms_per_step.mean;
    out.push_back(s);
  }
  return out;
}

// <out>/results.json and <out>/results.csv (nothing without --out), each whole or not at all.
void write_results(std::ostream& os, const std::string& out_dir, const Json& json,
                   const std::function<void(std::ostream&)>& write_csv) {
  if (out_dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) throw Error("--out: cannot create the directory '" + out_dir + "': " + error.message());
  const std::string json_path = out_dir + "/results.json", csv_path = out_dir + "/results.csv";
  std::ostringstream csv;
  write_csv(csv);
  lab::write_file("--out", json_path, json.dump(2) + "\n");
  lab::write_file("--out", csv_path, csv.str());
  os << "wrote " << json_path << " and " << csv_path << "\n";
}

// The CSV columns every row starts with and ends with.
void csv_run_prefix(std::ostream& out, const lab::RunResult& r, int64_t length) {
  out << '"' << r.label << "\"," << r.encoding.name() << ',' << lab::rope_eval_name(r.rope_eval) << ','
      << r.seed << ',' << length << ',';
}
void csv_run_suffix(std::ostream& out, const lab::RunResult& r) {
  out << ',' << r.train.tokens_per_second << ',' << r.train.ms_per_step << '\n';
}

}  // namespace

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

MetricTable bits_per_char_table(const std::vector<lab::SummaryRow>& rows, bool unseen_only,
                                int64_t train_len) {
  MetricTable t;
  t.title = unseen_only ? "the same, positions >= " + std::to_string(train_len) +
                              " only (never seen in training; more context cannot explain a change):"
                        : "bits per character on the test text (lower is better), by evaluation length:";
  t.first_length = unseen_only ? 1 : 0;
  t.speed = !unseen_only;
  for (const lab::SummaryRow& r : rows)
    t.rows.push_back({r.label, unseen_only ? r.unseen_bits_per_char : r.bits_per_char, r.errors,
                      r.tokens_per_second, r.ms_per_step});
  return t;
}

MetricTable exact_match_table(const std::vector<lab::TaskSummaryRow>& rows, const std::string& task,
                              int64_t samples) {
  MetricTable t;
  t.title = "exact match (%) on " + task + ", " + std::to_string(samples) +
            " samples per length (higher is better):";
  t.scale = 100.0, t.format = "%.1f", t.speed = true;
  for (const lab::TaskSummaryRow& r : rows)
    t.rows.push_back({r.label, r.exact_match, r.errors, r.tokens_per_second, r.ms_per_step});
  return t;
}

MetricTable token_accuracy_table(const std::vector<lab::TaskSummaryRow>& rows) {
  MetricTable t;
  t.title = "answer tokens right (%):";
  t.scale = 100.0, t.format = "%.1f";
  for (const lab::TaskSummaryRow& r : rows)
    t.rows.push_back({r.label, r.token_accuracy, r.errors, r.tokens_per_second, r.ms_per_step});
  return t;
}

void print_table(std::ostream& os, const MetricTable& t, const LabReportContext& x) {
  const int width = x.seeds > 1 ? 14 : 8;
  char buf[64];
  os << "\n" << t.title << "\nencoding            ";
  for (size_t i = t.first_length; i < x.lengths.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%gx",
                  static_cast<double>(x.lengths[i]) / static_cast<double>(x.train_len));
    os << std::setw(width) << buf;
  }
  os << (t.speed ? "   train tok/s   ms/step\n" : "\n");
  for (const MetricTable::Row& r : t.rows) {
    std::snprintf(buf, sizeof buf, "%-20s", r.label.c_str());
    os << buf;
    for (size_t i = t.first_length; i < r.values.size(); ++i)
      os << std::setw(width) << cell(r.values[i], x.seeds, t.format, t.scale);
    if (t.speed) {
      std::snprintf(buf, sizeof buf, "   %11.0f %9.1f", r.tokens_per_second.mean, r.ms_per_step.mean);
      os << buf;
    }
    os << "\n";
  }
}

void print_unavailable(std::ostream& os, const MetricTable& t, const LabReportContext& x) {
  for (const MetricTable::Row& r : t.rows)
    for (size_t i = 0; i < r.errors.size(); ++i)
      if (!r.errors[i].empty() && r.values[i].n == 0) {
        os << "n/a for " << r.label << " at " << x.lengths[i] << ": " << r.errors[i] << "\n";
        break;
      }
}

void report_text(std::ostream& os, const LabReportContext& x, const lab::Corpus& corpus,
                 const std::vector<lab::RunResult>& runs, const std::string& out_dir) {
  const std::vector<lab::SummaryRow> rows = lab::summarize(runs, x.lengths);
  const std::vector<std::string> rule = lab::verdict_rule(x.seeds);
  const std::vector<std::string> verdict_lines = lab::verdicts(rows, x.lengths, x.train_len);
  const MetricTable bits = bits_per_char_table(rows, false, x.train_len);
  const MetricTable unseen = bits_per_char_table(rows, true, x.train_len);
  os << "\n";
  interval_note(os, x.seeds);
  print_table(os, bits, x);
  print_table(os, unseen, x);
  print_unavailable(os, bits, x);
  os << "\nagainst the claims (the seeds' table; Press et al. 2022, WikiText-103, appendix table 2):\n";
  for (const std::string& line : rule) os << "  " << line << "\n";
  os << "\n";
  for (const std::string& line : verdict_lines) os << "  " << line << "\n";
  footer(os, x.seconds);

  Json j = header_json(x);
  j["corpus"] = {{"path", corpus.origin},
                 {"fingerprint_fnv1a64", corpus.fingerprint},
                 {"bytes", corpus.bytes},
                 {"vocab_size", corpus.vocab_size()},
                 {"train_chars", corpus.train.size()},
                 {"test_chars", corpus.test.size()}};
  j["runs"] = runs_json(runs, [](const lab::RunResult& r) {
    Json evals = Json::array();
    for (const lab::EvalResult& e : r.eval) {
      Json ej = {{"length", e.length}, {"ok", e.ok}};
      if (e.ok) {
        ej["bits_per_char"] = e.bits_per_char;
        ej["buckets"] = Json::array();
        for (const lab::BucketResult& b : e.buckets)
          ej["buckets"].push_back(
              {{"begin", b.begin}, {"end", b.end}, {"bits_per_char", b.bits_per_char}, {"tokens", b.tokens}});
      } else {
        ej["error"] = e.error;
      }
      ej["windows"] = e.windows;
      ej["seconds"] = e.seconds;
      evals.push_back(ej);
    }
    return evals;
  });
  j["summary"] =
      summary_json({{"bits_per_char", &bits}, {"unseen_bits_per_char", &unseen}}, x.config.eval.lengths);
  j["verdict_rule"] = rule;
  j["verdicts"] = verdict_lines;
  write_results(os, out_dir, j, [&](std::ostream& out) {
    out << "label,encoding,rope_eval,seed,length,begin,end,bits_per_char,tokens,train_tokens_per_second,"
           "ms_per_step\n";
    for (const lab::RunResult& r : runs)
      for (const lab::EvalResult& e : r.eval) {
        auto row = [&](int64_t begin, int64_t end, const std::string& bits_text, int64_t tokens) {
          csv_run_prefix(out, r, e.length);
          out << begin << ',' << end << ',' << bits_text << ',' << tokens;
          csv_run_suffix(out, r);
        };
        if (!e.ok) {
          row(0, e.length, "", 0);
          continue;
        }
        row(0, e.length, std::to_string(e.bits_per_char), e.tokens);
        for (const lab::BucketResult& b : e.buckets)
          row(b.begin, b.end, std::to_string(b.bits_per_char), b.tokens);
      }
  });
}

void report_task(std::ostream& os, const LabReportContext& x, const std::vector<lab::RunResult>& runs,
                 const std::string& out_dir) {
  const std::vector<lab::TaskSummaryRow> rows = lab::summarize_tasks(runs, x.lengths);
  const MetricTable exact = exact_match_table(rows, x.task, x.config.task_samples);
  const MetricTable tokens = token_accuracy_table(rows);
  os << "\n";
  interval_note(os, x.seeds);
  print_table(os, exact, x);
  print_table(os, tokens, x);
  print_unavailable(os, exact, x);
  footer(os, x.seconds);

  Json j = header_json(x);
  j["task"] = {{"name", x.task}, {"samples", x.config.task_samples}, {"vocabulary", lab::task_alphabet()}};
  j["runs"] = runs_json(runs, [](const lab::RunResult& r) {
    Json evals = Json::array();
    for (const lab::TaskEvalResult& e : r.task_eval) {
      Json ej = {{"length", e.length}, {"ok", e.ok}};
      if (e.ok)
        ej["exact_match"] = e.exact_match, ej["token_accuracy"] = e.token_accuracy;
      else
        ej["error"] = e.error;
      ej["samples"] = e.samples;
      ej["answers"] = e.answers;
      ej["seconds"] = e.seconds;
      evals.push_back(ej);
    }
    return evals;
  });
  j["summary"] = summary_json({{"exact_match", &exact}, {"token_accuracy", &tokens}}, x.config.eval.lengths);
  write_results(os, out_dir, j, [&](std::ostream& out) {
    out << "label,encoding,rope_eval,seed,length,exact_match,token_accuracy,samples,answers,"
           "train_tokens_per_second,ms_per_step\n";
    for (const lab::RunResult& r : runs)
      for (const lab::TaskEvalResult& e : r.task_eval) {
        csv_run_prefix(out, r, e.length);
        out << (e.ok ? std::to_string(e.exact_match) : "") << ','
            << (e.ok ? std::to_string(e.token_accuracy) : "") << ',' << e.samples << ',' << e.answers;
        csv_run_suffix(out, r);
      }
  });
}

}  // namespace posenc::tools
