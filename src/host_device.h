// src/host_device.h: POSENC_HD marks the per-element functions that the CPU backend, the CUDA backend and
// the host tests share (__host__ __device__ under nvcc, plain inline functions elsewhere), so that both
// backends round, reduce and rotate with the same code and the host tests check the GPU's element logic.
#pragma once

#if defined(__CUDACC__)
#define POSENC_HD __host__ __device__
#else
#define POSENC_HD
#endif
