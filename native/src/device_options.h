// JS option objects to native settings: the device configuration, fault
// settings and transfer directions, each checked with messages that name the
// field and the value.
#pragma once

#include <napi.h>

#include <string>

#include "fault_injector.h"
#include "kv_geometry.h"
#include "transfer_plan.h"

namespace kvtier {

// Field types and ranges only; makeDeviceGeometry checks how they combine.
DeviceConfig readDeviceConfig(const Napi::Object& options);

FaultSettings readFaultSettings(const Napi::Value& value, uint64_t numGpuBlocks);

Direction readDirection(const Napi::Value& value, const std::string& name);

}  // namespace kvtier
