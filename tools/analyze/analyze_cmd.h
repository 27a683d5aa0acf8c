// tools/analyze/analyze_cmd.h: the `posenc analyze` subcommand (the analysis is analyze.h's).
#pragma once
#include <CLI/CLI.hpp>

namespace posenc::analyze {
void add_analyze_command(CLI::App& app);
}  // namespace posenc::analyze
