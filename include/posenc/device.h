// posenc/device.h: where posenc's kernels run.
//
// Every view carries a device (posenc/tensor.h). An op whose tensors are all on Device::cuda runs on the
// GPU when posenc was built with its CUDA backend (CMake POSENC_CUDA), on the CUDA stream set below for
// the calling thread; the call only queues kernels (no synchronization, no copies to the host), so its
// errors are those of the arguments, found on the host before anything is queued. Tensors of one call on
// different devices, or CUDA tensors in a build without the backend, are refused by name.
//
//   posenc::CudaStreamGuard guard(stream);   // cudaStream_t, e.g. torch.cuda.current_stream()
//   rope.forward_qk(q, k, positions);        // q, k, positions: views with device = Device::cuda
#pragma once

namespace posenc {

// True when this build has the CUDA backend.
bool cuda_built();
// The number of CUDA devices the runtime sees (0 without the backend, a driver or a GPU).
int cuda_device_count();

// The CUDA stream (a cudaStream_t, passed as void* to keep CUDA's headers out of posenc's) on which the
// calling thread's posenc calls queue their kernels. Null (the default) is CUDA's legacy default stream.
void set_cuda_stream(void* stream);
void* cuda_stream();

// Sets the calling thread's stream for a scope and restores the previous one after it.
class CudaStreamGuard {
 public:
  explicit CudaStreamGuard(void* stream) : previous_(cuda_stream()) { set_cuda_stream(stream); }
  ~CudaStreamGuard() { set_cuda_stream(previous_); }
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

 private:
  void* previous_;
};

}  // namespace posenc
