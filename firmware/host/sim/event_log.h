// The simulator's stdout: one JSON object per line, flushed at once, from any
// thread. {"event":..., "device":..., ...}
#pragma once

#include <string>

struct cJSON;

namespace sim {

// Consumes `fields` (an object, may be null) and adds "event" and "device" first.
void Emit(const char* event, const std::string& device, cJSON* fields = nullptr);

}  // namespace sim
