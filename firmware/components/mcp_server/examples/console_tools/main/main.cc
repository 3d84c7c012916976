// mcp_server example: two tools, one JSON-RPC message per console line.
#include <cstdio>
#include <string>

#include "cJSON.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "mcp/mcp_server.h"

namespace {

int g_counter = 0;

}  // namespace

extern "C" void app_main() {
  static mcp::McpServer server(mcp::ServerOptions{"console-tools", "0.1.0", 8000, {}});

  server.AddTool("self.counter.add", "Add a number to the counter and return the new value.",
                 {mcp::Property::Integer("by", "How much to add").Range(-100, 100)},
                 [](const mcp::Arguments& args) {
                   g_counter += static_cast<int>(args.GetInt("by"));
                   return mcp::ToolResult::Text(std::to_string(g_counter));
                 });
  server.AddTool("self.uptime", "Seconds since boot.", {}, [](const mcp::Arguments&) {
    return mcp::ToolResult::Text(std::to_string(xTaskGetTickCount() / configTICK_RATE_HZ));
  });

  // Replies and notifications: here to the console, in a product to the gateway link.
  server.SetSender([](const std::string& json) { printf("%s\n", json.c_str()); });

  std::string line;
  for (;;) {
    const int c = getchar();  // non-blocking on the default console: EOF when nothing arrived
    if (c == EOF) {
      vTaskDelay(pdMS_TO_TICKS(20));
    } else if (c == '\n' || c == '\r') {
      if (!line.empty()) server.ParseMessage(line);
      line.clear();
    } else if (line.size() < 4096) {
      line.push_back(static_cast<char>(c));
    }
  }
}
