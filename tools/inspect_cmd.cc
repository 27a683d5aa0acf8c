// tools/inspect_cmd.cc: `posenc inspect CONFIG.json [--seq-len N] [--format table|json]`: the
// per-layer positional plan of a HuggingFace config.json (posenc/model.h), printed by
// posenc/model_report.h: the table groups identical layers; the JSON lists every layer. inv_freq and
// attention_factor are those at --seq-len (default: max_position_embeddings), which matters for
// dynamic and longrope.
#include "inspect_cmd.h"

#include <iostream>
#include <memory>

#include "memory.h"
#include "posenc/error.h"
#include "posenc/model.h"
#include "posenc/model_report.h"

namespace posenc::tools {
namespace {

struct InspectOptions {
  std::string path, format = "table";
  int64_t seq_len = 0;
};

void run_inspect(const InspectOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw Error("--format = '" + o.format + "' is invalid: expected table or json");
  require_size("--seq-len", o.seq_len, 0, kMaxSize, "0 = max_position_embeddings");
  const ModelPositions m = model_positions_from_hf_file(o.path);
  if (o.format == "json") {
    std::cout << model_report_json(m, o.seq_len) << "\n";  // warnings are in the document
    return;
  }
  for (const std::string& w : m.warnings) std::cerr << "posenc: warning: " << w << "\n";
  std::cout << model_report_table(m, o.seq_len);
}
}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "a model's per-layer positional plan from its HF config.json");
  cmd->add_option("config", opts->path, "config.json of a HuggingFace model")->required();
  cmd->add_option("--seq-len", opts->seq_len,
                  "length for inv_freq/attention_factor (default: max_position_embeddings)");
  cmd->add_option("--format", opts->format, "table or json");
  cmd->callback([opts] { run_inspect(*opts); });
}

}  // namespace posenc::tools
