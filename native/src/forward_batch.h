// One forward step's packed batch, copied out of the JS typed arrays so the
// stream that runs it owns its data.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_geometry.h"

namespace kvtier {

struct ForwardBatchData {
  uint32_t numRequests = 0;
  std::vector<int32_t> blockTableOffsets;  // numRequests + 1
  std::vector<int32_t> blockTables;
  std::vector<int32_t> startPositions;  // numRequests
  std::vector<int32_t> tokenOffsets;    // numRequests + 1
  std::vector<int32_t> tokens;
  std::vector<uint8_t> sample;  // numRequests

  uint64_t numTokens() const { return tokens.size(); }
  // Positions 0 .. contextEnd(r) - 1 exist once request r's new tokens are written.
  int64_t contextEnd(uint32_t r) const {
    return static_cast<int64_t>(startPositions[r]) + (tokenOffsets[r + 1] - tokenOffsets[r]);
  }
};

// Throws std::invalid_argument naming the array, index and value: lengths,
// monotonic offsets, at least one token per request, positions inside the
// block table, block ids in range, tokens in [0, vocabSize).
void validateForwardBatch(const KvGeometry& kv, uint32_t vocabSize, const ForwardBatchData& batch);

}  // namespace kvtier
