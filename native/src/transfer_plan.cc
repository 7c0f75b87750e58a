#include "transfer_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvtier {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

void checkIds(const char* name, const int32_t* ids, size_t count, uint64_t limit, const char* limitName) {
  for (size_t i = 0; i < count; i++) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= limit) {
      throw std::invalid_argument(std::string("submitTransfer: ") + name + "[" + std::to_string(i) +
                                  "] = " + str(ids[i]) + " is out of range [0, " + std::to_string(limit) +
                                  ") (" + limitName + ")");
    }
  }
}

void checkDistinct(const char* name, const int32_t* ids, size_t count) {
  std::vector<int32_t> sorted(ids, ids + count);
  std::sort(sorted.begin(), sorted.end());
  const auto duplicate = std::adjacent_find(sorted.begin(), sorted.end());
  if (duplicate != sorted.end()) {
    throw std::invalid_argument(std::string("submitTransfer: ") + name + " lists block " + str(*duplicate) +
                                " more than once (it is a destination)");
  }
}

}  // namespace

const char* directionName(Direction direction) {
  return direction == Direction::GpuToCpu ? "gpuToCpu" : "cpuToGpu";
}

void validateTransfer(const DeviceGeometry& geometry, const TransferRequest& r) {
  const uint64_t f = geometry.cpu.offloadFactor;
  checkIds("gpuBlockIds", r.gpuIds, r.gpuCount, geometry.kv.numGpuBlocks, "numGpuBlocks");
  checkIds("cpuBlockIds", r.cpuIds, r.cpuCount, geometry.cpu.numCpuBlocks, "numCpuBlocks");
  const uint64_t subBlocks = static_cast<uint64_t>(r.cpuCount) * f;
  if (r.direction == Direction::GpuToCpu) {
    if (r.firstSubBlock != 0) {
      throw std::invalid_argument("submitTransfer: firstSubBlock = " + std::to_string(r.firstSubBlock) +
                                  " must be 0 for a gpuToCpu store");
    }
    if (r.gpuCount != subBlocks) {
      throw std::invalid_argument("submitTransfer: gpuBlockIds.length = " + std::to_string(r.gpuCount) +
                                  " must equal cpuBlockIds.length * offloadFactor = " + std::to_string(r.cpuCount) +
                                  " * " + std::to_string(f) + " for a gpuToCpu store");
    }
    checkDistinct("cpuBlockIds", r.cpuIds, r.cpuCount);
  } else {
    if (r.firstSubBlock >= f) {
      throw std::invalid_argument("submitTransfer: firstSubBlock = " + std::to_string(r.firstSubBlock) +
                                  " is out of range [0, offloadFactor = " + std::to_string(f) + ")");
    }
    if (r.cpuCount == 0 || r.gpuCount != subBlocks - r.firstSubBlock) {
      throw std::invalid_argument("submitTransfer: gpuBlockIds.length = " + std::to_string(r.gpuCount) +
                                  " must equal cpuBlockIds.length * offloadFactor - firstSubBlock = " +
                                  std::to_string(r.cpuCount) + " * " + std::to_string(f) + " - " +
                                  std::to_string(r.firstSubBlock) + " for a cpuToGpu load");
    }
    checkDistinct("gpuBlockIds", r.gpuIds, r.gpuCount);
  }
}

uint64_t subBlockOf(const TransferRequest& r, uint64_t f, size_t index) {
  const uint64_t k = index + r.firstSubBlock;
  return static_cast<uint64_t>(r.cpuIds[k / f]) * f + k % f;
}

TransferPlan planTransfer(const DeviceGeometry& geometry, const TransferRequest& r,
                          const std::vector<uint8_t>& poisoned) {
  const KvGeometry& kv = geometry.kv;
  const CpuTierGeometry& cpu = geometry.cpu;
  const uint64_t f = cpu.offloadFactor;
  const uint64_t segmentBytes = kv.segmentBytes();
  const uint64_t subBlocksPerChunk = cpu.cpuBlocksPerChunk * f;
  auto isPoisoned = [&](size_t i) { return !poisoned.empty() && poisoned[i] != 0; };

  TransferPlan plan;
  size_t i = 0;
  while (i < r.gpuCount) {
    const uint64_t gpuStart = static_cast<uint64_t>(r.gpuIds[i]);
    const uint64_t subStart = subBlockOf(r, f, i);
    if (isPoisoned(i)) {
      // One region per block: poison fills never need to be fast.
      for (uint32_t s = 0; s < kv.segments; s++) {
        const CpuTierGeometry::Location at = cpu.locate(subStart, s);
        plan.poison.push_back(CopyRegion{kv.segmentByteOffset(gpuStart, s), at.chunk, at.offset, segmentBytes});
      }
      i++;
      continue;
    }
    size_t end = i + 1;
    while (end < r.gpuCount && !isPoisoned(end) &&
           static_cast<uint64_t>(r.gpuIds[end]) == gpuStart + (end - i) &&
           subBlockOf(r, f, end) == subStart + (end - i) &&
           (subStart + (end - i)) / subBlocksPerChunk == subStart / subBlocksPerChunk) {
      end++;
    }
    const uint64_t blocks = end - i;
    for (uint32_t s = 0; s < kv.segments; s++) {
      const CpuTierGeometry::Location at = cpu.locate(subStart, s);
      plan.copies.push_back(
          CopyRegion{kv.segmentByteOffset(gpuStart, s), at.chunk, at.offset, blocks * segmentBytes});
    }
    plan.copiedBytes += blocks * geometry.bytesPerGpuBlock;
    i = end;
  }
  // Copies in source address order: memory streams far better when the
  // reads walk forward (the prefetchers follow them) than when they jump.
  if (r.direction == Direction::GpuToCpu) {
    std::sort(plan.copies.begin(), plan.copies.end(),
              [](const CopyRegion& a, const CopyRegion& b) { return a.gpuOffset < b.gpuOffset; });
  } else {
    std::sort(plan.copies.begin(), plan.copies.end(), [](const CopyRegion& a, const CopyRegion& b) {
      return a.cpuChunk != b.cpuChunk ? a.cpuChunk < b.cpuChunk : a.cpuOffset < b.cpuOffset;
    });
  }
  return plan;
}

}  // namespace kvtier
