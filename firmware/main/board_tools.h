// The board's MCP tools, defined once for the device and the host simulator.
#pragma once

#include "board_hardware.h"
#include "mcp/mcp_server.h"

// self.get_device_status, self.audio_speaker.set_volume,
// self.screen.set_brightness, self.led.set and user-only self.reboot.
void RegisterBoardTools(mcp::McpServer& server, BoardHardware& board);

// notifications/state_changed {"source":"button","button":<name>,"state":"pressed"}
void NotifyButtonPressed(mcp::McpServer& server, const char* button);

// Builds the status JSON (also used by the device's status log line).
cJSON* DeviceStatusJson(BoardHardware& board);
