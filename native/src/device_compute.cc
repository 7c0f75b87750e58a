// The forward step and direct (stream-unordered) block access.

#include <cstring>
#include <stdexcept>
#include <string>

#include "device_wrap.h"
#include "js_args.h"

namespace kvtier {

namespace {
// One minute: a step the clock prices longer is a mistake, not a model.
constexpr uint64_t kMaxForwardComputeNs = 60'000'000'000ull;
}  // namespace

Napi::Value DeviceWrap::forward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("forward");
  drain(env);
  if (forwardDeferred_) {
    throw std::runtime_error("forward: a forward is already running on this device (one at a time)");
  }
  const Napi::Object b = js::readObject(info[0], "forward: batch");
  ForwardWork work;
  ForwardBatchData& batch = work.batch;
  batch.numRequests = static_cast<uint32_t>(
      js::readUnsigned(b.Get("numRequests"), "forward: batch.numRequests", js::kMaxInt32 - 1));
  batch.blockTableOffsets = js::copyInt32Array(b.Get("blockTableOffsets"), "forward: batch.blockTableOffsets");
  batch.blockTables = js::copyInt32Array(b.Get("blockTables"), "forward: batch.blockTables");
  batch.startPositions = js::copyInt32Array(b.Get("startPositions"), "forward: batch.startPositions");
  batch.tokenOffsets = js::copyInt32Array(b.Get("tokenOffsets"), "forward: batch.tokenOffsets");
  batch.tokens = js::copyInt32Array(b.Get("tokens"), "forward: batch.tokens");
  const js::ByteView sample = js::readBytes(b.Get("sample"), "forward: batch.sample");
  batch.sample.assign(sample.data, sample.data + sample.length);
  const Napi::Object options =
      js::isPresent(info[1]) ? js::readObject(info[1], "forward: options") : Napi::Object::New(env);
  const std::vector<int64_t> after = js::readIdList(options.Get("after"), "forward: after");
  work.after = liveJobs(after, "forward: after");
  validateForwardBatch(geometry_.kv, config_.model.vocabSize, batch);
  // The step clock prices the step in JS; without it, the model's flat cost per token.
  const Napi::Value computeNs = options.Get("computeNs");
  work.computeNs = js::isPresent(computeNs)
                       ? js::readUnsigned(computeNs, "forward: computeNs", kMaxForwardComputeNs)
                       : batch.numTokens() * config_.model.computeNsPerToken / config_.tp;
  work.modelSeed = config_.model.modelSeed;
  backend_->submitForward(std::move(work));
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  forwardDeferred_ = deferred;
  updateLiveness(env);
  return deferred.Promise();
}

Napi::Value DeviceWrap::lastForwardDeviceMs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("lastForwardDeviceMs");
  drain(env);
  return lastForwardMs_ < 0 ? env.Null() : Napi::Number::New(env, lastForwardMs_);
}

Napi::Value DeviceWrap::lastForwardDeviceSpan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("lastForwardDeviceSpan");
  drain(env);
  if (lastForwardMs_ < 0) return env.Null();
  Napi::Object span = Napi::Object::New(env);
  span.Set("startMs", lastForwardStartMs_);
  span.Set("elapsedMs", lastForwardMs_);
  span.Set("submitMs", lastForwardSubmitMs_);
  span.Set("enqueueMs", lastForwardEnqueueMs_);
  return span;
}

uint32_t DeviceWrap::readBlockId(const Napi::Value& value, const char* operation, uint64_t limit,
                                 const char* limitName) const {
  const std::string name = std::string(operation) + ": blockId";
  const int64_t id = js::readInteger(value, name, 0, static_cast<int64_t>(js::kMaxInt32));
  if (static_cast<uint64_t>(id) >= limit) {
    throw std::invalid_argument(name + " = " + std::to_string(id) + " is out of range [0, " + std::to_string(limit) +
                                ") (" + limitName + ")");
  }
  return static_cast<uint32_t>(id);
}

Napi::Value DeviceWrap::readGpuBlock(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("readGpuBlock");
  const uint32_t id = readBlockId(info[0], "readGpuBlock", geometry_.kv.numGpuBlocks, "numGpuBlocks");
  const KvGeometry& kv = geometry_.kv;
  Napi::Buffer<uint8_t> image = Napi::Buffer<uint8_t>::New(env, kv.imageBytes());
  for (uint32_t s = 0; s < kv.segments; s++) {
    backend_->readGpu(kv.segmentByteOffset(id, s), image.Data() + s * kv.segmentBytes(), kv.segmentBytes());
  }
  return image;
}

Napi::Value DeviceWrap::writeGpuBlock(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("writeGpuBlock");
  const uint32_t id = readBlockId(info[0], "writeGpuBlock", geometry_.kv.numGpuBlocks, "numGpuBlocks");
  const js::ByteView data = js::readBytes(info[1], "writeGpuBlock: data");
  const KvGeometry& kv = geometry_.kv;
  if (data.length != kv.imageBytes()) {
    throw std::invalid_argument("writeGpuBlock: data.length = " + std::to_string(data.length) +
                                " must equal bytesPerGpuBlock = " + std::to_string(kv.imageBytes()));
  }
  for (uint32_t s = 0; s < kv.segments; s++) {
    backend_->writeGpu(kv.segmentByteOffset(id, s), data.data + s * kv.segmentBytes(), kv.segmentBytes());
  }
  return env.Undefined();
}

Napi::Value DeviceWrap::readCpuBlock(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("readCpuBlock");
  const CpuTierGeometry& cpu = geometry_.cpu;
  const uint32_t id = readBlockId(info[0], "readCpuBlock", cpu.numCpuBlocks, "numCpuBlocks");
  Napi::Buffer<uint8_t> image = Napi::Buffer<uint8_t>::New(env, geometry_.bytesPerCpuBlock);
  forEachCpuSegment(id, [&](const uint8_t* segment, uint64_t at) { std::memcpy(image.Data() + at, segment, cpu.segmentBytes); });
  return image;
}

Napi::Value DeviceWrap::writeCpuBlock(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  requireOpen("writeCpuBlock");
  const CpuTierGeometry& cpu = geometry_.cpu;
  const uint32_t id = readBlockId(info[0], "writeCpuBlock", cpu.numCpuBlocks, "numCpuBlocks");
  const js::ByteView data = js::readBytes(info[1], "writeCpuBlock: data");
  if (data.length != geometry_.bytesPerCpuBlock) {
    throw std::invalid_argument("writeCpuBlock: data.length = " + std::to_string(data.length) +
                                " must equal bytesPerCpuBlock = " + std::to_string(geometry_.bytesPerCpuBlock));
  }
  forEachCpuSegment(id, [&](uint8_t* segment, uint64_t at) { std::memcpy(segment, data.data + at, cpu.segmentBytes); });
  return env.Undefined();
}

}  // namespace kvtier
