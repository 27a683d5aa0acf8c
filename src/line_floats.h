// src/line_floats.h: float storage that starts on a 64-byte cache line (a large std::vector<float> starts 16
// bytes past one with glibc), so that rows padded to whole lines are whole lines: a vector load or store
// never straddles two of them. Used by the CPU attention's packed tiles and by the lab's trainer.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace posenc {

template <typename T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <typename U>
  LineAllocator(const LineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* ptr, size_t) { ::operator delete (ptr, std::align_val_t{64}); }
  bool operator==(const LineAllocator&) const { return true; }
  bool operator!=(const LineAllocator&) const { return false; }
};
using LineFloats = std::vector<float, LineAllocator<float>>;

}  // namespace posenc
