// tools/encode.h: `posenc encode <encoding>`: tabulate an encoding for given positions.
#pragma once
#include <CLI/CLI.hpp>

namespace posenc::tools {
void add_encode_command(CLI::App& app);
void add_list_command(CLI::App& app);
}  // namespace posenc::tools
