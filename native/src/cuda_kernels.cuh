// The reference model and the emulated compute as CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_forward_batch.h"
#include "kv_geometry.h"

namespace kvtier {

// Loads every kernel's code now. With lazy loading (the default since CUDA
// 12.2) a kernel is loaded at its first launch, which can wait for the work
// already running on the device (an injected delay of minutes, say) while
// the JS thread blocks; and a GPU this build has no code for is reported when
// the device opens rather than at its first forward.
cudaError_t loadKernels();

// Busy-waits `ns` on the stream (globaltimer), or until *abortFlag is set.
// One thread: for injected delays, which must not take SMs from anything.
cudaError_t launchSpin(cudaStream_t stream, uint64_t ns, const volatile int* abortFlag);

// The emulated compute: `grid` CTAs of 256 threads each run `iterations` of
// dependent integer arithmetic (or stop once *abortFlag is set). A fixed
// amount of work rather than a fixed time, spread over every SM as a real
// forward is, so whatever shares the SMs with it (copy kernels) shows up as
// a longer step. `sink` is one device word it may write.
cudaError_t launchBusy(cudaStream_t stream, unsigned grid, uint64_t iterations, const volatile int* abortFlag,
                       uint32_t* sink);

// Times launchBusy alone on `stream` (which must be idle) and returns its
// rate in iterations per nanosecond, for turning an emulated compute time
// into work. Blocks until the calibration runs are done (a few ms).
cudaError_t calibrateBusy(cudaStream_t stream, unsigned grid, const volatile int* abortFlag, uint32_t* sink,
                          double* iterationsPerNs);

// One transfer job's tiles (CopyDescriptor, see copy_descriptors.h), read by
// the kernel from mapped pinned memory at `tiles`.
cudaError_t launchCopy(cudaStream_t stream, const void* tiles, uint64_t numTiles);

// The forward's packed inputs, from mapped pinned memory to device memory.
cudaError_t launchStage(cudaStream_t stream, uint8_t* dst, const uint8_t* src, uint64_t bytes);

// The forward's digests, from device memory to mapped pinned memory.
cudaError_t launchPublishDigests(cudaStream_t stream, const uint32_t* digests, uint32_t* out, uint32_t n);

// Chain states (one thread, batch order), then every element of every new
// position, then the digests read back from the cache.
cudaError_t launchForward(cudaStream_t stream, const KvGeometry& kv, uint32_t modelSeed, uint16_t* cache,
                          const DeviceForwardBatch& batch);

}  // namespace kvtier
