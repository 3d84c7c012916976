// Extra tools with realistic names, descriptions and schemas, so a simulated
// device has a catalog large enough to need several tools/list pages.
#pragma once

#include <cstdint>

#include "mcp/mcp_server.h"

namespace sim {

// Adds `count` tools; each handler waits `latency_ms` before answering.
void AddSyntheticTools(mcp::McpServer& server, int count, uint32_t latency_ms);

}  // namespace sim
