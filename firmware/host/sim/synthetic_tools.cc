#include "synthetic_tools.h"

#include <chrono>
#include <string>
#include <thread>

#include "cJSON.h"

using mcp::Property;
using mcp::ToolResult;

namespace sim {
namespace {

struct Template {
  const char* module;
  const char* action;
  const char* description;
  int kind;  // which parameter set
};

const Template kTemplates[] = {
    {"light", "set_color",
     "Set the colour of RGB light strip %d. Use it when the user asks for a colour or a mood lighting; "
     "brightness is kept unless given.",
     0},
    {"thermostat", "set_target",
     "Set the target temperature of thermostat zone %d in degrees Celsius. The heater or cooler starts at once "
     "and the zone reaches the target within minutes.",
     1},
    {"sensor", "read",
     "Read the latest measurement of environment sensor %d: temperature, humidity or air quality. Returns the "
     "value with its unit and the time of measurement.",
     2},
    {"relay", "switch",
     "Switch power relay %d on or off. The relay drives a mains socket; confirm with the user before turning off "
     "anything that may be running.",
     3},
    {"timer", "start",
     "Start countdown timer %d. When it ends the device rings and sends notifications/state_changed with "
     "source \"timer\".",
     4},
};

std::vector<Property> PropertiesFor(int kind) {
  switch (kind) {
    case 0:
      return {Property::String("color", "Colour name").OneOf({"red", "green", "blue", "white", "warm", "cool"}),
              Property::Integer("brightness", "Brightness in percent").Range(0, 100).Default(80),
              Property::Integer("transition_ms", "Fade duration in milliseconds").Range(0, 10000).Default(300)};
    case 1:
      return {Property::Number("celsius", "Target temperature").Range(5, 35),
              Property::String("mode", "Operating mode").OneOf({"heat", "cool", "auto"}).Default("auto")};
    case 2:
      return {Property::String("quantity", "What to read").OneOf({"temperature", "humidity", "co2", "pm25"})};
    case 3:
      return {Property::Boolean("on", "true to switch on"),
              Property::Boolean("confirm", "Set when the user confirmed switching off").Default(false)};
    default:
      return {Property::Integer("seconds", "Duration in seconds").Range(1, 86400),
              Property::String("label", "A name spoken when the timer rings").Default("timer")};
  }
}

}  // namespace

void AddSyntheticTools(mcp::McpServer& server, int count, uint32_t latency_ms) {
  const int templates = static_cast<int>(sizeof kTemplates / sizeof kTemplates[0]);
  for (int i = 0; i < count; ++i) {
    const Template& t = kTemplates[i % templates];
    const int number = i / templates + 1;
    const std::string name = std::string("self.") + t.module + "_" + std::to_string(number) + "." + t.action;
    char description[400];
    snprintf(description, sizeof description, t.description, number);
    mcp::ToolAnnotations notes;
    notes.read_only = t.kind == 2 ? mcp::Hint::kTrue : mcp::Hint::kFalse;
    server.AddTool(name, description, PropertiesFor(t.kind),
                   [name, latency_ms](const mcp::Arguments&) {
                     if (latency_ms) std::this_thread::sleep_for(std::chrono::milliseconds(latency_ms));
                     cJSON* result = cJSON_CreateObject();
                     cJSON_AddStringToObject(result, "tool", name.c_str());
                     cJSON_AddBoolToObject(result, "ok", true);
                     return ToolResult::Json(result);
                   },
                   notes);
  }
}

}  // namespace sim
