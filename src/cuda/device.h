// src/cuda/device.h: host-side checks and launch helpers of the CUDA backend (src/cuda/device.cc), with no
// CUDA types, for the front ends.
#pragma once
#include <string_view>

#include "posenc/tensor.h"

namespace posenc::cuda {

// The view's memory must be device (or managed) memory of the current CUDA device: a host pointer in a
// view marked Device::cuda would fault in the kernel. Empty views pass.
void check_device_memory(std::string_view op, std::string_view name, const ViewShape& v, const void* data);

// Throws posenc::Error "<op>: <what> failed: <CUDA's message>" if the last launch on this thread failed.
void check_launch(std::string_view op, const char* what);

}  // namespace posenc::cuda
