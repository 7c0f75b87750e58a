#include "forward_pack.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kvtier {

namespace {

// Lays typed arrays out back to back, each 8-byte aligned.
class Packer {
 public:
  template <typename T>
  size_t reserve(size_t count) {
    const size_t offset = (size_ + 7) & ~size_t{7};
    size_ = offset + count * sizeof(T);
    return offset;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

size_t roundUp16(size_t n) { return (n + 15) & ~size_t{15}; }

template <typename T>
void put(uint8_t* image, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(image + offset, values.data(), values.size() * sizeof(T));
}

}  // namespace

ForwardLayout layoutForward(const ForwardBatchData& b) {
  ForwardLayout l;
  l.numRequests = b.numRequests;
  l.numTokens = static_cast<uint32_t>(b.numTokens());
  for (uint32_t r = 0; r < b.numRequests; r++) {
    if (!b.sample[r]) continue;
    l.sampledRequests.push_back(static_cast<int32_t>(r));
    l.pairOffsets.push_back(l.pairOffsets.back() + b.contextEnd(r));
  }
  if (l.numPairs() > 0x7fffffffull) throw std::invalid_argument("forward: the sampled contexts exceed 2^31 positions");
  Packer image;
  l.tableOffsets = image.reserve<int32_t>(b.blockTableOffsets.size());
  l.tables = image.reserve<int32_t>(b.blockTables.size());
  l.starts = image.reserve<int32_t>(b.startPositions.size());
  l.tokenOffsets = image.reserve<int32_t>(b.tokenOffsets.size());
  l.tokens = image.reserve<int32_t>(b.tokens.size());
  l.sampled = image.reserve<int32_t>(l.sampledRequests.size());
  l.pairs = image.reserve<int64_t>(l.pairOffsets.size());
  l.digests = image.reserve<uint32_t>(b.numRequests);
  l.stagedBytes = roundUp16(image.size());
  Packer scratch;
  l.tokenBlocks = l.stagedBytes + scratch.reserve<uint32_t>(l.numTokens);
  l.tokenSlots = l.stagedBytes + scratch.reserve<uint32_t>(l.numTokens);
  l.deviceBytes = l.stagedBytes + roundUp16(scratch.size());
  return l;
}

void packForward(const ForwardLayout& l, const ForwardBatchData& b, uint8_t* image) {
  std::memset(image, 0, l.stagedBytes);  // padding and the digests' accumulators
  put(image, l.tableOffsets, b.blockTableOffsets);
  put(image, l.tables, b.blockTables);
  put(image, l.starts, b.startPositions);
  put(image, l.tokenOffsets, b.tokenOffsets);
  put(image, l.tokens, b.tokens);
  put(image, l.sampled, l.sampledRequests);
  put(image, l.pairs, l.pairOffsets);
}

DeviceForwardBatch bindForward(const ForwardLayout& l, uint8_t* device) {
  DeviceForwardBatch d{};
  d.numRequests = l.numRequests;
  d.numTokens = l.numTokens;
  d.numSampled = static_cast<uint32_t>(l.sampledRequests.size());
  d.numPairs = l.numPairs();
  d.blockTableOffsets = reinterpret_cast<const int32_t*>(device + l.tableOffsets);
  d.blockTables = reinterpret_cast<const int32_t*>(device + l.tables);
  d.startPositions = reinterpret_cast<const int32_t*>(device + l.starts);
  d.tokenOffsets = reinterpret_cast<const int32_t*>(device + l.tokenOffsets);
  d.tokens = reinterpret_cast<const int32_t*>(device + l.tokens);
  d.sampledRequests = reinterpret_cast<const int32_t*>(device + l.sampled);
  d.pairOffsets = reinterpret_cast<const int64_t*>(device + l.pairs);
  d.digests = reinterpret_cast<uint32_t*>(device + l.digests);
  d.tokenBlocks = reinterpret_cast<uint32_t*>(device + l.tokenBlocks);
  d.tokenSlots = reinterpret_cast<uint32_t*>(device + l.tokenSlots);
  return d;
}

unsigned stageGridSize(size_t stagedBytes) {
  const size_t vectors = stagedBytes / 16;
  return static_cast<unsigned>(std::clamp<size_t>((vectors + 255) / 256, 1, 32));
}

}  // namespace kvtier
