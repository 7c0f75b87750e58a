#include "forward_batch.h"

#include <stdexcept>
#include <string>

namespace kvtier {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument("forward: " + message); }

void checkLength(const char* name, size_t actual, size_t expected, const char* expectedName) {
  if (actual != expected) {
    fail(std::string("batch.") + name + ".length = " + str(static_cast<int64_t>(actual)) + " must be " +
         expectedName + " = " + str(static_cast<int64_t>(expected)));
  }
}

// offsets[0] == 0, non-decreasing, offsets[n] == total.
void checkOffsets(const char* name, const std::vector<int32_t>& offsets, size_t total, const char* totalName) {
  if (offsets[0] != 0) fail(std::string("batch.") + name + "[0] = " + str(offsets[0]) + " must be 0");
  for (size_t i = 1; i < offsets.size(); i++) {
    if (offsets[i] < offsets[i - 1]) {
      fail(std::string("batch.") + name + "[" + str(static_cast<int64_t>(i)) + "] = " + str(offsets[i]) +
           " is less than " + name + "[" + str(static_cast<int64_t>(i - 1)) + "] = " + str(offsets[i - 1]));
    }
  }
  if (static_cast<size_t>(offsets.back()) != total) {
    fail(std::string("batch.") + name + "[numRequests] = " + str(offsets.back()) + " must equal " + totalName +
         " = " + str(static_cast<int64_t>(total)));
  }
}

}  // namespace

void validateForwardBatch(const KvGeometry& kv, uint32_t vocabSize, const ForwardBatchData& b) {
  const size_t n = b.numRequests;
  checkLength("blockTableOffsets", b.blockTableOffsets.size(), n + 1, "numRequests + 1");
  checkLength("tokenOffsets", b.tokenOffsets.size(), n + 1, "numRequests + 1");
  checkLength("startPositions", b.startPositions.size(), n, "numRequests");
  checkLength("sample", b.sample.size(), n, "numRequests");
  checkOffsets("blockTableOffsets", b.blockTableOffsets, b.blockTables.size(), "blockTables.length");
  checkOffsets("tokenOffsets", b.tokenOffsets, b.tokens.size(), "tokens.length");

  for (size_t i = 0; i < b.blockTables.size(); i++) {
    const int32_t id = b.blockTables[i];
    if (id < 0 || static_cast<uint64_t>(id) >= kv.numGpuBlocks) {
      fail("batch.blockTables[" + str(static_cast<int64_t>(i)) + "] = " + str(id) + " is out of range [0, " +
           str(static_cast<int64_t>(kv.numGpuBlocks)) + ") (numGpuBlocks)");
    }
  }
  for (size_t i = 0; i < b.tokens.size(); i++) {
    const int32_t token = b.tokens[i];
    if (token < 0 || static_cast<uint32_t>(token) >= vocabSize) {
      fail("batch.tokens[" + str(static_cast<int64_t>(i)) + "] = " + str(token) + " is out of range [0, " +
           str(vocabSize) + ") (vocabSize)");
    }
  }
  for (uint32_t r = 0; r < n; r++) {
    const int32_t numNew = b.tokenOffsets[r + 1] - b.tokenOffsets[r];
    if (numNew < 1) fail("request " + str(r) + " has no new tokens (every request computes at least one)");
    if (b.startPositions[r] < 0) {
      fail("batch.startPositions[" + str(r) + "] = " + str(b.startPositions[r]) + " must be non-negative");
    }
    const int64_t tableBlocks = b.blockTableOffsets[r + 1] - b.blockTableOffsets[r];
    const int64_t capacity = tableBlocks * kv.blockSize;
    if (b.contextEnd(r) > capacity) {
      fail("request " + str(r) + " writes positions up to " + str(b.contextEnd(r) - 1) + " but its block table holds " +
           str(tableBlocks) + " blocks of " + str(kv.blockSize) + " tokens");
    }
  }
}

}  // namespace kvtier
