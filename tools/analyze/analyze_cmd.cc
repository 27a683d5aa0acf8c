// tools/analyze/analyze_cmd.cc: `posenc analyze`: its flags, then analyze.h's table, JSON or CSV.
#include "analyze_cmd.h"

#include <iostream>
#include <memory>
#include <sstream>

#include "analyze.h"
#include "posenc/error.h"

namespace posenc::analyze {

void add_analyze_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto encodings = std::make_shared<std::string>("all");
  auto format = std::make_shared<std::string>("table");
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Measure the four conditions of a good positional encoding (uniqueness, neighbours, composability, "
      "generalization) and decay, for every encoding");
  cmd->add_option("--encodings,-e", *encodings, "all, or a comma-separated list of names (see `posenc list`)")
      ->capture_default_str();
  cmd->add_option("--length,-L", o->length, "L: positions [0, L) are the trained range")
      ->capture_default_str();
  cmd->add_option("--extrapolate-to", o->extrapolate_to, "L2: generalization is judged on [L, L2)")
      ->capture_default_str();
  cmd->add_option("--dim,-d", o->dim, "code width (model dim; head_dim for rope)")->capture_default_str();
  cmd->add_option("--horizon", o->horizon, "lags over which similarity must fall")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the untrained learned table")->capture_default_str();
  cmd->add_option("--format,-f", *format, "table, json or csv")->capture_default_str();
  cmd->callback([o, encodings, format] {
    if (*format != "table" && *format != "json" && *format != "csv")
      throw Error("--format = '" + *format + "' is invalid: expected table, json or csv");
    o->encodings.clear();
    if (*encodings != "all") {
      std::stringstream ss(*encodings);
      std::string name;
      while (std::getline(ss, name, ',')) o->encodings.push_back(name);
    }
    const std::vector<Report> reports = analyze(*o);
    if (*format == "json")
      std::cout << to_json(*o, reports).dump(2) << "\n";
    else if (*format == "csv")
      print_csv(reports, std::cout);
    else
      print_table(*o, reports, std::cout);
  });
}

}  // namespace posenc::analyze
