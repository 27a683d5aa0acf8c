// src/device.cc: posenc/device.h, in every build (the CUDA runtime is asked only when the backend is built).
#include "posenc/device.h"

namespace posenc {
#if POSENC_WITH_CUDA
namespace cuda {
int device_count();  // src/cuda/device.cc
}
bool cuda_built() { return true; }
int cuda_device_count() { return cuda::device_count(); }
#else
bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
#endif

namespace {
thread_local void* current_stream = nullptr;
}
void set_cuda_stream(void* stream) { current_stream = stream; }
void* cuda_stream() { return current_stream; }

}  // namespace posenc
