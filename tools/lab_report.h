// tools/lab_report.h: what `posenc lab` prints and writes once its runs are done: the tables by
// evaluation length (bits per character for the text, exact match and token accuracy for a task),
// results.json and results.csv. Text and tasks share one metric table and one JSON layout; only
// their metrics differ.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "lab/experiment.h"

namespace posenc::tools {

// What the reports need to know of the command line besides the experiment's configuration.
struct LabReportContext {
  const lab::ExperimentConfig& config;
  std::vector<int64_t> lengths;  // evaluation lengths, as given
  int64_t train_len = 0, seeds = 1, threads = 0;
  std::string task;    // empty for the text
  double seconds = 0;  // wall time of the whole command
};

// One metric by evaluation length, per row (run label): a table of the text or of a task.
struct MetricTable {
  struct Row {
    std::string label;
    std::vector<lab::Stat> values;    // per evaluation length; n = 0 where the model cannot run
    std::vector<std::string> errors;  // per length: the library's message where it cannot run
    lab::Stat tokens_per_second, ms_per_step;
  };
  std::string title;        // the line above the table
  size_t first_length = 0;  // the first length shown (1: only lengths past training)
  double scale = 1.0;       // 100: percentages
  const char* format = "%.3f";
  bool speed = false;  // the train tok/s and ms/step columns
  std::vector<Row> rows;
};
MetricTable bits_per_char_table(const std::vector<lab::SummaryRow>& rows, bool unseen_only,
                                int64_t train_len);
MetricTable exact_match_table(const std::vector<lab::TaskSummaryRow>& rows, const std::string& task,
                              int64_t samples);
MetricTable token_accuracy_table(const std::vector<lab::TaskSummaryRow>& rows);
void print_table(std::ostream& os, const MetricTable& table, const LabReportContext& context);
// "n/a for <label> at <length>: <why>", the first length each row cannot run at.
void print_unavailable(std::ostream& os, const MetricTable& table, const LabReportContext& context);

// The text comparison's report: tables, verdicts against the published claims, footer, files.
void report_text(std::ostream& os, const LabReportContext& context, const lab::Corpus& corpus,
                 const std::vector<lab::RunResult>& runs, const std::string& out_dir);
// A task's report: exact match and token accuracy tables, footer, files.
void report_task(std::ostream& os, const LabReportContext& context, const std::vector<lab::RunResult>& runs,
                 const std::string& out_dir);

std::string machine_line();  // "<CPU model>, <n> logical CPUs"
std::string today();         // YYYY-MM-DD, UTC

}  // namespace posenc::tools
