#include "cuda_kernels.cuh"

#include <algorithm>
#include <type_traits>

#include "copy_descriptors.h"
#include "forward_pack.h"
#include "reference_model.h"
#include "cuda_copy_kernels.cuh"
#include "cuda_model_kernels.cuh"

namespace kvtier {

namespace {

// digestKernel reduces whole warps, then one warp's worth of warp sums.
static_assert(kThreads % 32 == 0 && kThreads / 32 <= 32, "kThreads must be whole warps, at most 32 of them");
// Kernels take these by value: plain bytes, well inside the parameter limit.
static_assert(std::is_trivially_copyable<KvGeometry>::value, "KvGeometry is passed to kernels by value");
static_assert(std::is_trivially_copyable<DeviceForwardBatch>::value, "DeviceForwardBatch is passed to kernels by value");
static_assert(sizeof(KvGeometry) + sizeof(DeviceForwardBatch) + 16 <= 4096, "kernel parameters exceed 4 KiB");
static_assert(std::is_trivially_copyable<CopyDescriptor>::value && sizeof(CopyDescriptor) == 24,
              "CopyDescriptor is read by the copy kernel as plain bytes");
static_assert(kCopyTileBytes % 16 == 0, "tiles must keep 16-byte alignment");

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

constexpr unsigned kBusyThreads = 256;
// Iterations between two looks at the abort flag (a read across the link,
// by one thread per CTA): about a millisecond of work on current GPUs.
constexpr uint64_t kBusyCheckEvery = 1ull << 18;

__global__ void busyKernel(uint64_t iterations, const volatile int* abortFlag, uint32_t* sink) {
  __shared__ int aborted;
  uint32_t x = threadIdx.x + blockIdx.x * blockDim.x;
  for (uint64_t done = 0; done < iterations;) {
    const uint64_t end = done + kBusyCheckEvery < iterations ? done + kBusyCheckEvery : iterations;
    for (; done < end; done++) x = x * 1664525u + 1013904223u;
    // The flag is a read across the host link (0.15-0.4 ms beside busy
    // copies): never after the last chunk, where it would only lengthen a
    // finished step.
    if (done >= iterations) break;
    if (threadIdx.x == 0) aborted = *abortFlag;
    __syncthreads();
    const bool stop = aborted != 0;
    __syncthreads();
    if (stop) return;
  }
  if (x == 0x2a2a2a2au) *sink = x;  // keeps the arithmetic from being optimized away
}

}  // namespace

cudaError_t loadKernels() {
  cudaFuncAttributes attributes{};
  cudaError_t status = cudaFuncGetAttributes(&attributes, spinKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, chainKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, writeKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, digestKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, busyKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, copyKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, stageKernel);
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, publishDigestsKernel);
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

cudaError_t launchBusy(cudaStream_t stream, unsigned grid, uint64_t iterations, const volatile int* abortFlag,
                       uint32_t* sink) {
  cudaGetLastError();
  busyKernel<<<grid, kBusyThreads, 0, stream>>>(iterations, abortFlag, sink);
  return cudaGetLastError();
}

cudaError_t calibrateBusy(cudaStream_t stream, unsigned grid, const volatile int* abortFlag, uint32_t* sink,
                          double* iterationsPerNs) {
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  cudaError_t status = cudaEventCreate(&start);
  if (status == cudaSuccess) status = cudaEventCreate(&end);
  // The first launch (warm-up) is not timed. Then longer runs until one
  // takes at least 2 ms, so launch overhead is a small part of the time.
  uint64_t iterations = 1ull << 12;
  if (status == cudaSuccess) status = launchBusy(stream, grid, iterations, abortFlag, sink);
  float ms = 0;
  while (status == cudaSuccess) {
    iterations *= 4;
    status = cudaEventRecord(start, stream);
    if (status == cudaSuccess) status = launchBusy(stream, grid, iterations, abortFlag, sink);
    if (status == cudaSuccess) status = cudaEventRecord(end, stream);
    if (status == cudaSuccess) status = cudaEventSynchronize(end);
    if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, start, end);
    if (status != cudaSuccess || ms >= 2.0f || iterations >= (1ull << 32)) break;
  }
  if (status == cudaSuccess) *iterationsPerNs = static_cast<double>(iterations) / (std::max(ms, 1e-3f) * 1e6);
  if (start != nullptr) cudaEventDestroy(start);
  if (end != nullptr) cudaEventDestroy(end);
  return status;
}

cudaError_t launchCopy(cudaStream_t stream, const void* tiles, uint64_t numTiles) {
  cudaGetLastError();
  if (numTiles > 0) {
    copyKernel<<<copyGridSize(numTiles), kCopyThreads, 0, stream>>>(static_cast<const CopyDescriptor*>(tiles),
                                                                    numTiles);
  }
  return cudaGetLastError();
}

cudaError_t launchStage(cudaStream_t stream, uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  cudaGetLastError();
  if (bytes > 0) stageKernel<<<stageGridSize(bytes), 256, 0, stream>>>(dst, src, bytes);
  return cudaGetLastError();
}

cudaError_t launchPublishDigests(cudaStream_t stream, const uint32_t* digests, uint32_t* out, uint32_t n) {
  cudaGetLastError();
  if (n > 0) publishDigestsKernel<<<(n + 255) / 256, 256, 0, stream>>>(digests, out, n);
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
