#include "cuda_kernels.cuh"

#include <type_traits>

#include "reference_model.h"
#include "cuda_model_kernels.cuh"

namespace kvtier {

namespace {

// digestKernel reduces whole warps, then one warp's worth of warp sums.
static_assert(kThreads % 32 == 0 && kThreads / 32 <= 32, "kThreads must be whole warps, at most 32 of them");
// Kernels take these by value: plain bytes, well inside the parameter limit.
static_assert(std::is_trivially_copyable<KvGeometry>::value, "KvGeometry is passed to kernels by value");
static_assert(std::is_trivially_copyable<DeviceForwardBatch>::value, "DeviceForwardBatch is passed to kernels by value");
static_assert(sizeof(KvGeometry) + sizeof(DeviceForwardBatch) + 16 <= 4096, "kernel parameters exceed 4 KiB");

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinKernel(uint64_t ns, const volatile int* abortFlag) {
  const uint64_t start = globalTimerNs();
  while (globalTimerNs() - start < ns) {
    if (*abortFlag != 0) return;
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t loadKernels() {
  cudaFuncAttributes attributes{};
  cudaError_t status = cudaFuncGetAttributes(&attributes, spinKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, chainKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, writeKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, digestKernel);
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

// cudaGetLastError reports the last failure of any runtime call on this
// thread, so one a caller already turned into an exception is cleared first
// rather than blamed on the launch. (Sticky errors are reported again anyway.)
cudaError_t launchSpin(cudaStream_t stream, uint64_t ns, const volatile int* abortFlag) {
  cudaGetLastError();
  spinKernel<<<1, 1, 0, stream>>>(ns, abortFlag);
  return cudaGetLastError();
}

cudaError_t launchForward(cudaStream_t stream, const KvGeometry& kv, uint32_t modelSeed, uint16_t* cache,
                          const DeviceForwardBatch& batch) {
  cudaGetLastError();
  if (batch.numTokens > 0) {
    chainKernel<<<1, 1, 0, stream>>>(kv, modelSeed, cache, batch);
    writeKernel<<<batch.numTokens, kThreads, 0, stream>>>(kv, cache, batch);
  }
  if (batch.numPairs > 0) {
    digestKernel<<<static_cast<unsigned>(batch.numPairs), kThreads, 0, stream>>>(kv, cache, batch);
  }
  return cudaGetLastError();
}

}  // namespace kvtier
