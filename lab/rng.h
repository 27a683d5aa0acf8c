// lab/rng.h: the lab's random numbers, defined here bit for bit (std::normal_distribution differs
// between standard libraries), so a seed gives the same model and data order everywhere.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace posenc::lab {

// SplitMix64 (Steele, Lea, Flood 2014) with Box-Muller normals.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // A stream of its own for each (seed, name): a tensor's initial values do not depend on which
  // other tensors the model has, so every encoding starts from the same shared weights.
  Rng(uint64_t seed, std::string_view name) : state_(seed) {
    for (unsigned char c : name) state_ = (state_ ^ c) * 0x100000001b3ull;
  }
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }                     // [0, 1)
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }  // [0, n)
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace posenc::lab
