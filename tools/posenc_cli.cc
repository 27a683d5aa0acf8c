// tools/posenc_cli.cc: the `posenc` command line tool.
//   posenc list                      every encoding and its variants
//   posenc encode <encoding> [...]   tabulate an encoding (table, csv, json, npy)
//   posenc attention [...]           the fused attention on random inputs: timings, --check
//   posenc analyze [...]             the four conditions of a good positional encoding (uniqueness,
//                                    neighbours, composability, generalization), for every encoding
//   posenc lab [...]                 train a small transformer per encoding, measure extrapolation
// Bad arguments print one line naming the argument and exit with status 2 (a file that cannot be
// read or written, --output /dev/full, included; a size out of its range or sizes that together
// need more than the machine's memory, tools/memory.h); a failed write to standard output prints
// one line and exits with status 1.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <iostream>

#include "analyze/analyze_cmd.h"
#include "attention_cmd.h"
#include "encode.h"
#include "inspect_cmd.h"
#include "lab_cmd.h"
#include "posenc/error.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for Transformers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "posenc 0.1.0");
  posenc::tools::add_list_command(app);
  posenc::tools::add_encode_command(app);
  posenc::tools::add_attention_command(app);
  posenc::analyze::add_analyze_command(app);
  posenc::tools::add_lab_command(app);
  posenc::tools::add_inspect_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {  // a safety net: the commands check sizes against the memory first
    std::cerr << "posenc: error: out of memory: the arguments ask for more memory than is free\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << "\n";
    return 1;
  }
  // std::cout shares stdout's buffer (sync_with_stdio): a full disk or a closed pipe shows up here.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    std::cerr << "posenc: error: writing to standard output failed"
              << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
    return 1;
  }
  return 0;
}
