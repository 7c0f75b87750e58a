#include "device_options.h"

#include <stdexcept>

#include "js_args.h"

namespace kvtier {

namespace {

ModelConfig readModel(const Napi::Value& value) {
  const Napi::Object o = js::readObject(value, "model");
  ModelConfig m;
  m.name = js::readString(o.Get("name"), "model.name");
  m.layers = static_cast<uint32_t>(js::readUnsigned(o.Get("layers"), "model.layers", 1 << 16));
  m.kvHeads = static_cast<uint32_t>(js::readUnsigned(o.Get("kvHeads"), "model.kvHeads", 1 << 16));
  m.headDim = static_cast<uint32_t>(js::readUnsigned(o.Get("headDim"), "model.headDim", 1 << 16));
  m.vocabSize = static_cast<uint32_t>(js::readUnsigned(o.Get("vocabSize"), "model.vocabSize", js::kMaxInt32));
  m.modelSeed = static_cast<uint32_t>(js::readUnsigned(o.Get("modelSeed"), "model.modelSeed", 0xffffffffull));
  const Napi::Value perToken = o.Get("computeNsPerToken");
  m.computeNsPerToken =
      js::isPresent(perToken) ? js::readUnsigned(perToken, "model.computeNsPerToken", 60'000'000'000ull) : 0;
  return m;
}

HostLink readHostLink(const Napi::Value& value) {
  HostLink link;
  if (!js::isPresent(value)) return link;
  const Napi::Object o = js::readObject(value, "hostLink");
  link.oneWayBytesPerSecond = js::readNumber(o.Get("oneWayBytesPerSecond"), "hostLink.oneWayBytesPerSecond", 1, 1e15);
  link.bothWaysBytesPerSecond =
      js::readNumber(o.Get("bothWaysBytesPerSecond"), "hostLink.bothWaysBytesPerSecond", 1, 1e15);
  link.jobLatencyNs = js::readNumber(o.Get("jobLatencyUs"), "hostLink.jobLatencyUs", 0, 1e6) * 1e3;
  link.regionOverheadNs = js::readNumber(o.Get("regionOverheadNs"), "hostLink.regionOverheadNs", 0, 1e9);
  return link;
}

}  // namespace

DeviceConfig readDeviceConfig(const Napi::Object& o) {
  DeviceConfig c;
  c.backend = js::readString(o.Get("backend"), "backend");
  if (c.backend != "host" && c.backend != "cuda") {
    throw std::invalid_argument("backend = '" + c.backend + "' must be 'host' or 'cuda'");
  }
  c.rank = static_cast<uint32_t>(js::readUnsigned(o.Get("rank"), "rank", 1 << 16));
  c.tp = static_cast<uint32_t>(js::readUnsigned(o.Get("tp"), "tp", 1 << 16));
  const Napi::Value deviceIndex = o.Get("deviceIndex");
  c.deviceIndex = js::isPresent(deviceIndex)
                      ? static_cast<uint32_t>(js::readUnsigned(deviceIndex, "deviceIndex", 1 << 16))
                      : 0;
  c.model = readModel(o.Get("model"));
  c.blockSize = static_cast<uint32_t>(js::readUnsigned(o.Get("blockSize"), "blockSize", 1 << 20));
  const std::string layout = js::readString(o.Get("layout"), "layout");
  if (layout == "cross-layer") {
    c.layout = KvLayout::CrossLayer;
  } else if (layout == "per-layer") {
    c.layout = KvLayout::PerLayer;
  } else {
    throw std::invalid_argument("layout = '" + layout + "' must be 'cross-layer' or 'per-layer'");
  }
  c.numGpuBlocks = js::readUnsigned(o.Get("numGpuBlocks"), "numGpuBlocks", js::kMaxInt32);
  c.numCpuBlocks = js::readUnsigned(o.Get("numCpuBlocks"), "numCpuBlocks", js::kMaxInt32);
  c.offloadFactor = js::readUnsigned(o.Get("offloadFactor"), "offloadFactor", 1 << 16);
  const Napi::Value chunk = o.Get("cpuChunkBytes");
  if (js::isPresent(chunk)) {
    c.cpuChunkBytes = js::readUnsigned(chunk, "cpuChunkBytes", js::kMaxSafeInteger);
    if (c.cpuChunkBytes == 0) throw std::invalid_argument("cpuChunkBytes = 0 must be positive");
  }
  const Napi::Value copyMethod = o.Get("copyMethod");
  if (js::isPresent(copyMethod)) c.copyMethod = parseCopyMethod(js::readString(copyMethod, "copyMethod"));
  c.hostLink = readHostLink(o.Get("hostLink"));
  return c;
}

FaultSettings readFaultSettings(const Napi::Value& value, uint64_t numGpuBlocks) {
  const Napi::Object o = js::readObject(value, "setFaults: faults");
  FaultSettings s;
  const Napi::Value blocks = o.Get("loadFailBlocks");
  if (js::isPresent(blocks)) {
    if (!blocks.IsArray()) throw std::invalid_argument("setFaults: loadFailBlocks must be an array of GPU block ids");
    const Napi::Array array = blocks.As<Napi::Array>();
    for (uint32_t i = 0; i < array.Length(); i++) {
      const std::string name = "setFaults: loadFailBlocks[" + std::to_string(i) + "]";
      s.loadFailBlocks.push_back(
          static_cast<int32_t>(js::readInteger(array.Get(i), name, 0, static_cast<int64_t>(numGpuBlocks) - 1)));
    }
  }
  auto number = [&](const char* key, double max, double fallback) {
    const Napi::Value v = o.Get(key);
    return js::isPresent(v) ? js::readNumber(v, std::string("setFaults: ") + key, 0, max) : fallback;
  };
  s.loadFailProbability = number("loadFailProbability", 1, 0);
  s.storeFailProbability = number("storeFailProbability", 1, 0);
  s.delayMs = number("delayMs", 3'600'000, 0);
  s.delayJitterMs = number("delayJitterMs", 3'600'000, 0);
  s.jobErrorProbability = number("jobErrorProbability", 1, 0);
  const Napi::Value limit = o.Get("loadFailLimit");
  s.loadFailLimit = js::isPresent(limit) ? js::readInteger(limit, "setFaults: loadFailLimit", 0,
                                                           static_cast<int64_t>(js::kMaxSafeInteger))
                                         : -1;
  const Napi::Value seed = o.Get("seed");
  s.seed = js::isPresent(seed) ? js::readUnsigned(seed, "setFaults: seed", js::kMaxSafeInteger) : 0;
  return s;
}

Direction readDirection(const Napi::Value& value, const std::string& name) {
  const std::string text = js::readString(value, name);
  if (text == "gpuToCpu") return Direction::GpuToCpu;
  if (text == "cpuToGpu") return Direction::CpuToGpu;
  throw std::invalid_argument(name + " = '" + text + "' must be 'gpuToCpu' or 'cpuToGpu'");
}

}  // namespace kvtier
