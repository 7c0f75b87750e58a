// The CUDA backend, compiled by nvcc into the kvtier_cuda addon only. This
// header is plain C++ so the node-addon-api side never sees CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend.h"

namespace kvtier {

std::unique_ptr<Backend> createCudaBackend(const DeviceConfig& config, const DeviceGeometry& geometry,
                                           CompletionSink& sink);

// Visible CUDA devices; 0 when there is no driver or no device.
int cudaDeviceCountOrZero();

struct CudaDeviceProperties {
  std::string name;
  uint64_t totalMemoryBytes = 0;
  int computeMajor = 0;
  int computeMinor = 0;
  int driverVersion = 0;   // CUDA API version the driver supports, e.g. 13000
  int runtimeVersion = 0;  // the runtime linked into the addon
};

// Throws std::runtime_error when the device cannot be queried.
CudaDeviceProperties cudaDeviceProperties(int deviceIndex);

}  // namespace kvtier
