#include "board_tools.h"

#include "cJSON.h"

using mcp::Hint;
using mcp::Property;
using mcp::ToolAnnotations;
using mcp::ToolResult;

namespace {

const char* SignalLabel(int rssi) {
  if (rssi >= -60) return "strong";
  if (rssi >= -70) return "medium";
  return "weak";
}

ToolAnnotations ReadOnly() { return ToolAnnotations{false, Hint::kTrue, Hint::kFalse}; }
ToolAnnotations Setter() { return ToolAnnotations{false, Hint::kFalse, Hint::kFalse}; }

}  // namespace

cJSON* DeviceStatusJson(BoardHardware& board) {
  cJSON* status = cJSON_CreateObject();
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(status, "audio_speaker"), "volume", board.Volume());
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(status, "screen"), "brightness", board.Brightness());
  cJSON_AddBoolToObject(cJSON_AddObjectToObject(status, "led"), "on", board.LedOn());
  cJSON* network = cJSON_AddObjectToObject(status, "network");
  cJSON_AddStringToObject(network, "type", "wifi");
  int rssi = 0;
  if (board.WifiRssi(&rssi)) {
    cJSON_AddNumberToObject(network, "rssi", rssi);
    cJSON_AddStringToObject(network, "signal", SignalLabel(rssi));
  } else {
    cJSON_AddStringToObject(network, "signal", "disconnected");
  }
  cJSON* memory = cJSON_AddObjectToObject(status, "memory");
  cJSON_AddNumberToObject(memory, "free_heap", board.FreeHeapBytes());
  cJSON_AddNumberToObject(memory, "min_free_heap", board.MinFreeHeapBytes());
  cJSON_AddNumberToObject(status, "uptime_s", static_cast<double>(board.UptimeMs() / 1000));
  return status;
}

void RegisterBoardTools(mcp::McpServer& server, BoardHardware& board) {
  BoardHardware* hw = &board;
  server.AddTool("self.get_device_status",
                 "Current state of the device: speaker volume, screen brightness, LED, Wi-Fi signal (RSSI), free "
                 "heap and uptime. Call it before changing a setting relative to its current value.",
                 {}, [hw](const mcp::Arguments&) { return ToolResult::Json(DeviceStatusJson(*hw)); }, ReadOnly());

  server.AddTool("self.audio_speaker.set_volume",
                 "Set the speaker volume in percent. If the current volume is unknown, call "
                 "self.get_device_status first. The value is kept across reboots.",
                 {Property::Integer("volume", "Volume in percent, 0 (mute) to 100").Range(0, 100)},
                 [hw](const mcp::Arguments& args) {
                   return hw->SetVolume(static_cast<int>(args.GetInt("volume")))
                              ? ToolResult::Bool(true)
                              : ToolResult::Error("could not store the volume");
                 },
                 Setter());

  server.AddTool("self.screen.set_brightness", "Set the screen backlight brightness in percent.",
                 {Property::Integer("brightness", "Brightness in percent, 0 (off) to 100").Range(0, 100)},
                 [hw](const mcp::Arguments& args) {
                   return hw->SetBrightness(static_cast<int>(args.GetInt("brightness")))
                              ? ToolResult::Bool(true)
                              : ToolResult::Error("backlight driver failed");
                 },
                 Setter());

  server.AddTool("self.led.set", "Turn the status LED on or off.",
                 {Property::Boolean("on", "true to light the LED, false to turn it off")},
                 [hw](const mcp::Arguments& args) {
                   return hw->SetLed(args.GetBool("on")) ? ToolResult::Bool(true)
                                                         : ToolResult::Error("LED driver failed");
                 },
                 Setter());

  server.AddUserOnlyTool("self.reboot", "Restart the device. It reconnects by itself after about ten seconds.", {},
                         [hw](const mcp::Arguments&) {
                           hw->ScheduleReboot(1000);  // let the reply leave first
                           return ToolResult::Text("rebooting in 1 s");
                         },
                         ToolAnnotations{true, Hint::kFalse, Hint::kTrue});
}

void NotifyButtonPressed(mcp::McpServer& server, const char* button) {
  cJSON* params = cJSON_CreateObject();
  cJSON_AddStringToObject(params, "source", "button");
  cJSON_AddStringToObject(params, "button", button);
  cJSON_AddStringToObject(params, "state", "pressed");
  server.Notify("notifications/state_changed", params);
}
