#include "host_model.h"

namespace kvtier {

namespace {

uint32_t readChainState(const KvGeometry& kv, const uint16_t* cache, uint64_t block, uint32_t slot) {
  const uint64_t at = kv.elementIndex(block, 0, 0, 0, slot, 0);
  return static_cast<uint32_t>(cache[at]) | (static_cast<uint32_t>(cache[at + 1]) << 16);
}

void writePosition(const KvGeometry& kv, uint16_t* cache, uint64_t block, uint32_t slot, uint32_t s) {
  for (uint32_t layer = 0; layer < kv.layers; layer++) {
    for (uint32_t k = 0; k < 2; k++) {
      for (uint32_t h = 0; h < kv.localHeads; h++) {
        uint16_t* row = cache + kv.elementIndex(block, layer, k, h, slot, 0);
        // Global element index, wrapping like the model's 32-bit arithmetic.
        const uint32_t base = ((layer * 2u + k) * kv.kvHeads + kv.firstHead + h) * kv.headDim;
        for (uint32_t d = 0; d < kv.headDim; d++) row[d] = elementValue(s, layer, k, d, base + d);
      }
    }
  }
}

uint32_t positionSum(const KvGeometry& kv, const uint16_t* cache, uint64_t block, uint32_t slot) {
  uint32_t sum = 0;
  for (uint32_t layer = 0; layer < kv.layers; layer++) {
    for (uint32_t k = 0; k < 2; k++) {
      for (uint32_t h = 0; h < kv.localHeads; h++) {
        const uint16_t* row = cache + kv.elementIndex(block, layer, k, h, slot, 0);
        for (uint32_t d = 0; d < kv.headDim; d++) sum += row[d];
      }
    }
  }
  return sum;
}

}  // namespace

std::vector<uint32_t> runHostForward(const KvGeometry& kv, uint32_t modelSeed, uint16_t* cache,
                                     const ForwardBatchData& b) {
  const uint32_t bs = kv.blockSize;
  for (uint32_t r = 0; r < b.numRequests; r++) {
    const int32_t* table = b.blockTables.data() + b.blockTableOffsets[r];
    for (int32_t i = b.tokenOffsets[r]; i < b.tokenOffsets[r + 1]; i++) {
      const uint32_t p = static_cast<uint32_t>(b.startPositions[r] + (i - b.tokenOffsets[r]));
      const uint32_t prev =
          p == 0 ? chainInit(modelSeed) : readChainState(kv, cache, table[(p - 1) / bs], (p - 1) % bs);
      const uint32_t s = chainNext(prev, static_cast<uint32_t>(b.tokens[i]), p);
      writePosition(kv, cache, table[p / bs], p % bs, s);
    }
  }
  // Every write of the batch is done before any digest: a request may read
  // blocks another request of this batch wrote.
  std::vector<uint32_t> digests(b.numRequests, 0);
  for (uint32_t r = 0; r < b.numRequests; r++) {
    if (!b.sample[r]) continue;
    const int32_t* table = b.blockTables.data() + b.blockTableOffsets[r];
    const int64_t end = b.contextEnd(r);
    uint32_t g = 0;
    for (int64_t p = 0; p < end; p++) {
      g += static_cast<uint32_t>(p + 1) * positionSum(kv, cache, table[p / bs], static_cast<uint32_t>(p % bs));
    }
    digests[r] = g;
  }
  return digests;
}

}  // namespace kvtier
