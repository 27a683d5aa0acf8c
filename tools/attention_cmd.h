// tools/attention_cmd.h: `posenc attention`: run the fused attention on random inputs.
#pragma once
#include <CLI/CLI.hpp>

namespace posenc::tools {
void add_attention_command(CLI::App& app);
}  // namespace posenc::tools
