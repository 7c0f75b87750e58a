#include "kv_geometry.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace kvtier {

namespace {

constexpr uint64_t kDefaultChunkBytes = 1ull << 30;
// Far above any real memory size; keeps every byte offset well inside 64 bits.
constexpr uint64_t kMaxBytes = 1ull << 50;

std::string str(uint64_t v) { return std::to_string(v); }

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// a * b, or an error naming `what` when it exceeds kMaxBytes.
uint64_t checkedProduct(uint64_t a, uint64_t b, const std::string& what) {
  if (a != 0 && b > kMaxBytes / a) throw std::invalid_argument(what + " is too large (over 2^50 bytes)");
  const uint64_t product = a * b;
  require(product <= kMaxBytes, what + " is too large (over 2^50 bytes)");
  return product;
}

}  // namespace

uint64_t CpuTierGeometry::chunkCpuBlocks(uint64_t chunk) const {
  const uint64_t first = chunk * cpuBlocksPerChunk;
  return std::min(cpuBlocksPerChunk, numCpuBlocks - first);
}

uint64_t CpuTierGeometry::chunkBytes(uint64_t chunk) const {
  return chunkCpuBlocks(chunk) * offloadFactor * segments * segmentBytes;
}

uint64_t CpuTierGeometry::totalBytes() const { return numCpuBlocks * offloadFactor * segments * segmentBytes; }

CpuTierGeometry::Location CpuTierGeometry::locate(uint64_t subBlock, uint32_t segment) const {
  const uint64_t subBlocksPerChunk = cpuBlocksPerChunk * offloadFactor;
  const uint64_t chunk = subBlock / subBlocksPerChunk;
  const uint64_t local = subBlock % subBlocksPerChunk;
  const uint64_t chunkSubBlocks = chunkCpuBlocks(chunk) * offloadFactor;
  return Location{static_cast<uint32_t>(chunk), (segment * chunkSubBlocks + local) * segmentBytes};
}

DeviceGeometry makeDeviceGeometry(const DeviceConfig& c) {
  const ModelConfig& m = c.model;
  require(c.tp >= 1, "tp = " + str(c.tp) + " must be at least 1");
  require(c.rank < c.tp, "rank = " + str(c.rank) + " is out of range for tp = " + str(c.tp));
  require(m.layers >= 1, "model.layers = " + str(m.layers) + " must be at least 1");
  require(m.kvHeads >= 1, "model.kvHeads = " + str(m.kvHeads) + " must be at least 1");
  require(m.kvHeads % c.tp == 0,
          "model.kvHeads = " + str(m.kvHeads) + " is not divisible by tp = " + str(c.tp));
  require(m.headDim >= 2, "model.headDim = " + str(m.headDim) + " must be at least 2 (the chain state needs 2 dims)");
  require(m.vocabSize >= 2, "model.vocabSize = " + str(m.vocabSize) + " must be at least 2");
  require(c.blockSize >= 1, "blockSize = " + str(c.blockSize) + " must be at least 1");
  require(c.numGpuBlocks >= 1, "numGpuBlocks = " + str(c.numGpuBlocks) + " must be at least 1");
  require(c.numGpuBlocks <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()),
          "numGpuBlocks = " + str(c.numGpuBlocks) + " exceeds 2^31 - 1");
  require(c.offloadFactor >= 1, "offloadFactor = " + str(c.offloadFactor) + " must be at least 1");
  require(c.numCpuBlocks * c.offloadFactor <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()),
          "numCpuBlocks * offloadFactor = " + str(c.numCpuBlocks) + " * " + str(c.offloadFactor) +
              " exceeds 2^31 - 1 sub-blocks");

  DeviceGeometry g{};
  KvGeometry& kv = g.kv;
  kv.layers = m.layers;
  kv.kvHeads = m.kvHeads;
  kv.headDim = m.headDim;
  kv.blockSize = c.blockSize;
  kv.localHeads = m.kvHeads / c.tp;
  kv.firstHead = c.rank * kv.localHeads;
  kv.segments = c.layout == KvLayout::PerLayer ? m.layers : 1;
  kv.numGpuBlocks = c.numGpuBlocks;
  kv.elementsPerToken = checkedProduct(static_cast<uint64_t>(m.layers) * 2 * kv.localHeads, m.headDim,
                                       "elements per token");
  kv.imageElements = checkedProduct(kv.elementsPerToken, c.blockSize, "bytesPerGpuBlock");
  kv.segmentElements = kv.imageElements / kv.segments;

  g.bytesPerGpuBlock = checkedProduct(kv.imageElements, 2, "bytesPerGpuBlock");
  g.bytesPerCpuBlock = checkedProduct(g.bytesPerGpuBlock, c.offloadFactor, "bytesPerCpuBlock");
  g.gpuBytes = checkedProduct(g.bytesPerGpuBlock, c.numGpuBlocks, "numGpuBlocks * bytesPerGpuBlock");
  g.cpuBytes = checkedProduct(g.bytesPerCpuBlock, c.numCpuBlocks, "numCpuBlocks * bytesPerCpuBlock");

  uint64_t chunkBytes = c.cpuChunkBytes;
  if (chunkBytes == 0) {
    chunkBytes = std::max(kDefaultChunkBytes, g.bytesPerCpuBlock);
  } else {
    require(chunkBytes >= g.bytesPerCpuBlock, "cpuChunkBytes = " + str(chunkBytes) +
                                                  " is smaller than one CPU block (bytesPerCpuBlock = " +
                                                  str(g.bytesPerCpuBlock) + ")");
  }
  CpuTierGeometry& cpu = g.cpu;
  cpu.numCpuBlocks = c.numCpuBlocks;
  cpu.offloadFactor = c.offloadFactor;
  cpu.cpuBlocksPerChunk = chunkBytes / g.bytesPerCpuBlock;
  cpu.numChunks = (c.numCpuBlocks + cpu.cpuBlocksPerChunk - 1) / cpu.cpuBlocksPerChunk;
  cpu.segments = kv.segments;
  cpu.segmentBytes = kv.segmentBytes();
  return g;
}

}  // namespace kvtier
