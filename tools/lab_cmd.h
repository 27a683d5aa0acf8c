// tools/lab_cmd.h: `posenc lab`: train one small transformer per encoding, measure extrapolation.
#pragma once
#include <CLI/CLI.hpp>

namespace posenc::tools {
void add_lab_command(CLI::App& app);
}  // namespace posenc::tools
