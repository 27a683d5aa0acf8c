// posenc/error.h: the one exception type of the library.
#pragma once
#include <stdexcept>
#include <string>

namespace posenc {

// Thrown for every invalid argument, shape, configuration or file. The message names the
// operation, the argument and the offending value, e.g.
//   "rope: rotary_dim = 7 is invalid: must be even"
// Nothing is written to any output before an Error is thrown.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace posenc
