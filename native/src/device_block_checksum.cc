// Direct CPU-tier block access for the remote tier: one pass moves a block
// between the tier and a caller's buffer (a remote value, at its payload's
// offset) and checksums it, instead of a copy into a fresh buffer, a second
// copy into the value and a separate checksum pass.

#include <stdexcept>
#include <string>

#include "crc32c.h"
#include "device_wrap.h"
#include "js_args.h"

namespace kvtier {

uint64_t DeviceWrap::readBlockOffset(const Napi::Value& value, const char* operation, const char* bufferName,
                                     size_t length) const {
  const std::string name = std::string(operation) + ": offset";
  const uint64_t offset = js::isPresent(value) ? js::readUnsigned(value, name, js::kMaxSafeInteger) : 0;
  const uint64_t block = geometry_.bytesPerCpuBlock;
  if (offset > length || length - offset < block) {
    throw std::invalid_argument(name + " = " + std::to_string(offset) + " leaves no room for bytesPerCpuBlock = " +
                                std::to_string(block) + " in " + bufferName + ".length = " + std::to_string(length));
  }
  return offset;
}

// readCpuBlockInto(blockId, target, offset = 0): copies the block's bytes to
// target[offset, offset + bytesPerCpuBlock); returns their CRC-32C.
Napi::Value DeviceWrap::readCpuBlockInto(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("readCpuBlockInto");
  const CpuTierGeometry& cpu = geometry_.cpu;
  const uint32_t id = readBlockId(info[0], "readCpuBlockInto", cpu.numCpuBlocks, "numCpuBlocks");
  const js::MutableByteView target = js::readMutableBytes(info[1], "readCpuBlockInto: target");
  const uint64_t offset = readBlockOffset(info[2], "readCpuBlockInto", "target", target.length);
  uint8_t* out = target.data + offset;
  uint32_t state = kCrc32cStart;
  forEachCpuSegment(id, [&](const uint8_t* segment, uint64_t at) {
    state = crc32cCopy(out + at, segment, cpu.segmentBytes, state);
  });
  return Napi::Number::New(env, crc32cFinish(state));
}

// writeCpuBlockFrom(blockId, source, offset = 0): copies
// source[offset, offset + bytesPerCpuBlock) into the block; returns the
// CRC-32C of those bytes. The caller compares it with the checksum it
// expected and does not use the block when they differ.
Napi::Value DeviceWrap::writeCpuBlockFrom(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("writeCpuBlockFrom");
  const CpuTierGeometry& cpu = geometry_.cpu;
  const uint32_t id = readBlockId(info[0], "writeCpuBlockFrom", cpu.numCpuBlocks, "numCpuBlocks");
  const js::ByteView source = js::readBytes(info[1], "writeCpuBlockFrom: source");
  const uint64_t offset = readBlockOffset(info[2], "writeCpuBlockFrom", "source", source.length);
  const uint8_t* in = source.data + offset;
  uint32_t state = kCrc32cStart;
  forEachCpuSegment(id, [&](uint8_t* segment, uint64_t at) {
    state = crc32cCopy(segment, in + at, cpu.segmentBytes, state, CopyStores::kStreaming);
  });
  return Napi::Number::New(env, crc32cFinish(state));
}

}  // namespace kvtier
