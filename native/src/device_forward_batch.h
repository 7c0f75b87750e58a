// The device pointers of one forward batch as the model kernels read it.
// Plain C++ so the packing code and the CPU check of the kernels share it.
#pragma once

#include <cstdint>

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

}  // namespace kvtier
