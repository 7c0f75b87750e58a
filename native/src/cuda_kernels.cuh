// The reference model and the emulated compute as CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kv_geometry.h"

namespace kvtier {

// Device pointers of one packed forward batch (see ForwardBatchData).
struct DeviceForwardBatch {
  uint32_t numRequests;
  uint32_t numTokens;
  uint32_t numSampled;
  uint64_t numPairs;  // (sampled request, position) pairs the digests read
  const int32_t* blockTableOffsets;
  const int32_t* blockTables;
  const int32_t* startPositions;
  const int32_t* tokenOffsets;
  const int32_t* tokens;
  const int32_t* sampledRequests;  // numSampled
  const int64_t* pairOffsets;      // numSampled + 1
  uint32_t* tokenBlocks;           // numTokens, scratch
  uint32_t* tokenSlots;            // numTokens, scratch
  uint32_t* digests;               // numRequests, zeroed before launch
};

// Loads every kernel's code now. With lazy loading (the default since CUDA
// 12.2) a kernel is loaded at its first launch, which can wait for the work
// already running on the device (an injected delay of minutes, say) while
// the JS thread blocks; and a GPU this build has no code for is reported when
// the device opens rather than at its first forward.
cudaError_t loadKernels();

// Busy-waits `ns` on the stream (globaltimer), or until *abortFlag is set.
cudaError_t launchSpin(cudaStream_t stream, uint64_t ns, const volatile int* abortFlag);

// Chain states (one thread, batch order), then every element of every new
// position, then the digests read back from the cache.
cudaError_t launchForward(cudaStream_t stream, const KvGeometry& kv, uint32_t modelSeed, uint16_t* cache,
                          const DeviceForwardBatch& batch);

}  // namespace kvtier
