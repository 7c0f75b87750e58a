// CUDA error checks and event creation shared by the CUDA backend's parts.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvtier {

inline std::string cudaMessage(const char* what, cudaError_t error) {
  return std::string(what) + " failed: " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(cudaMessage(what, error));
}

inline cudaEvent_t createEvent() {
  cudaEvent_t event = nullptr;
  // Blocking sync: completion threads sleep instead of spinning a core.
  check(cudaEventCreateWithFlags(&event, cudaEventBlockingSync), "cudaEventCreateWithFlags");
  return event;
}

}  // namespace kvtier
