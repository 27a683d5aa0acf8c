// tools/inspect_cmd.h: `posenc inspect CONFIG.json`: a model's per-layer positional plan.
#pragma once
#include <CLI/CLI.hpp>

namespace posenc::tools {
void add_inspect_command(CLI::App& app);
}  // namespace posenc::tools
