// tests/test_util.h: helpers shared by every test: random data, comparisons that report the
// worst element, a loop over every compiled SIMD target, and central finite differences.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "src/cpu/bf16_dot.h"

namespace posenc::test {

// Tolerances per dtype, relative to the magnitude of the values compared (not one global number).
struct Tolerance {
  double atol, rtol;
};
inline constexpr Tolerance kF32Elementwise{2e-6, 2e-6};  // a few fp32 ulps of O(1) values
inline constexpr Tolerance kF32Reduction{1e-5, 1e-5};    // fp32 dot products / sums of O(100) terms
inline constexpr Tolerance kF64{1e-12, 1e-12};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}
inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Every actual[i] within atol + rtol * |expected[i]|; reports the worst offender.
template <typename A, typename E>
::testing::AssertionResult all_close(const std::vector<A>& actual, const std::vector<E>& expected,
                                     Tolerance tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
    const double excess = std::abs(a - e) - (tol.atol + tol.rtol * std::abs(e));
    if (!(excess <= 0) && (std::isnan(excess) || excess > worst || worst == 0)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_i = i;
    }
  }
  if (worst == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_i << ": actual " << static_cast<double>(actual[worst_i]) << " expected "
         << static_cast<double>(expected[worst_i]) << " (atol " << tol.atol << ", rtol " << tol.rtol << ")";
}

// call() must throw posenc::Error (or a subclass of std::exception) whose message contains needle.
template <typename Fn>
void expect_error(Fn&& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning: " << needle;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Runs fn(target_name) once per SIMD target compiled in and supported by this CPU.
// The AVX-512 target runs twice where the CPU has vdpbf16ps: with the bf16 dot path of the attention
// forward (src/cpu/bf16_dot.h) and without it, so both are tested on such a machine.
inline void for_each_cpu_target(const std::function<void(const std::string&)>& fn) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    // HWY_AVX3 and better x86 targets (lower bits) use the bf16 dot path (src/cpu/attention.cc).
    const bool on = cpu::bf16_dot_available();  // off with POSENC_BF16_DOT=0: then it stays off
    const bool bf16_dots = on && HWY_ARCH_X86 && target <= HWY_AVX3;
    for (int pass = 0; pass < (bf16_dots ? 2 : 1); ++pass) {
      cpu::set_bf16_dot_enabled(pass == 1 || (on && !bf16_dots));
      const std::string name = pass == 1 ? std::string(hwy::TargetName(target)).append("+BF16DOT")
                                         : std::string(hwy::TargetName(target));
      SCOPED_TRACE(name);
      fn(name);
    }
    cpu::set_bf16_dot_enabled(on);
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the best target
}

// Central differences of loss at the given coordinates of params, step h.
inline std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& loss,
                                             std::vector<double> params, const std::vector<size_t>& coords,
                                             double h = 1e-4) {
  std::vector<double> g(coords.size());
  for (size_t n = 0; n < coords.size(); ++n) {
    const size_t i = coords[n];
    const double saved = params[i];
    params[i] = saved + h;
    const double up = loss(params);
    params[i] = saved - h;
    const double down = loss(params);
    params[i] = saved;
    g[n] = (up - down) / (2 * h);
  }
  return g;
}

// A spread of coordinates: all of them if few, else `count` chosen deterministically.
inline std::vector<size_t> sample_coords(size_t n, size_t count = 64, uint32_t seed = 7) {
  std::vector<size_t> c;
  if (n <= count) {
    for (size_t i = 0; i < n; ++i) c.push_back(i);
    return c;
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> dist(0, n - 1);
  for (size_t i = 0; i < count; ++i) c.push_back(dist(rng));
  return c;
}

template <typename T>
double dot(const std::vector<T>& a, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * w[i];
  return s;
}

template <typename T>
std::vector<T> gather(const std::vector<T>& v, const std::vector<size_t>& idx) {
  std::vector<T> out;
  for (size_t i : idx) out.push_back(v[i]);
  return out;
}

}  // namespace posenc::test
