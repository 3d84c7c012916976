// Stack used by the device's task paths, measured the way FreeRTOS's
// uxTaskGetStackHighWaterMark does it: run the path on a thread whose stack
// was painted with a pattern, then find the deepest byte that changed.
// Host figures (x86-64, 8-byte pointers) are an upper guide for the 32-bit
// device; the device logs its own figures at debug level (tag "vx_stack").
// Prints key=value lines for measure.sh.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "board_tools.h"
#include "cJSON.h"
#include "fake_board.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp_server.h"
#include "synthetic_tools.h"
#include "voxgate/envelope.h"
#include "voxgate/protocol.h"

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned char kPaint = 0xa5;  // FreeRTOS paints with 0xa5 too

struct Job {
  std::function<void()> run;
};

void* Entry(void* job) {
  static_cast<Job*>(job)->run();
  return nullptr;
}

// Bytes of stack touched by a thread running `run` (the stack grows down).
size_t Touched(const std::function<void()>& run) {
  void* stack = nullptr;
  if (posix_memalign(&stack, 4096, kStackBytes) != 0) abort();
  memset(stack, kPaint, kStackBytes);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stack, kStackBytes);
  Job job{run};
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Entry, &job) != 0) abort();
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  const auto* bytes = static_cast<const unsigned char*>(stack);
  size_t untouched = 0;
  while (untouched < kStackBytes && bytes[untouched] == kPaint) ++untouched;
  free(stack);
  return kStackBytes - untouched;
}

// What `run` itself used: glibc keeps the thread's control block and TLS at the
// top of a caller-provided stack, so an empty run is the baseline.
size_t StackUsed(const std::function<void()>& run) {
  static const size_t baseline = Touched([] {});
  return Touched(run) - baseline;
}

// The link as the device's worker sees it: frames in, frames out (the send
// stops where esp_websocket_client_send_text / esp_mqtt_client_publish begin).
class MeasuredLink : public voxgate::Protocol {
 public:
  MeasuredLink() : Protocol(voxgate::Transport::kWebSocket) {}
  bool Start() override { return true; }
  void Stop() override {}
  void Open() { HandleOpen(voxgate::MonotonicMs()); }
  void Receive(const std::string& text) { HandleText(text.data(), text.size()); }
  size_t sent_bytes = 0;

 protected:
  bool SendText(const std::string& text) override {
    sent_bytes += text.size();
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int tools = argc > 1 ? atoi(argv[1]) : 60;
  sim::FakeBoard board;
  mcp::McpServer server(mcp::ServerOptions{"measure", "1", 8000, {}});
  RegisterBoardTools(server, board);
  sim::AddSyntheticTools(server, tools, 0);
  MeasuredLink link;
  voxgate::ProtocolEvents events;
  events.on_mcp = [&](const std::string& payload) { server.ParseMessage(payload); };
  link.SetEvents(events);
  server.SetSender([&](const std::string& json) { link.SendMcp(json); });
  link.Open();
  link.Receive(R"({"type":"hello","transport":"websocket","session_id":"s"})");

  // The link worker: envelope + JSON-RPC parse, one tools/list page built and sent.
  const std::string list = R"({"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":2,)"
                           R"("method":"tools/list","params":{"withUserTools":true}}})";
  link.Receive(list);  // warm-up (first-use allocations)
  const size_t list_stack = StackUsed([&] { link.Receive(list); });
  const std::string init = R"({"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"method":"initialize",)"
                           R"("params":{"protocolVersion":"2024-11-05",)"
                           R"("capabilities":{"vision":{"url":"http://gw/v","token":"t"}}}}})";
  const size_t init_stack = StackUsed([&] { link.Receive(init); });
  // The worst frame the link accepts: nested to the bound (voxgate::kMaxFrameDepth), parsed, its payload
  // printed and parsed again by the MCP server, and refused as invalid params.
  std::string deep = R"({"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":4,"method":"tools/call",)"
                     R"("params":{"name":"self.led.set","arguments":{"on":)";
  const int levels = voxgate::kMaxFrameDepth - 4;  // the envelope, payload, params and arguments objects
  deep += std::string(levels, '[') + std::string(levels, ']') + "}}}}";
  const size_t deep_stack = StackUsed([&] { link.Receive(deep); });
  // The tool worker: a handler runs, its result is wrapped and sent.
  const size_t call_stack = StackUsed([&] {
    cJSON* status = DeviceStatusJson(board);  // self.get_device_status's handler
    char* text = cJSON_PrintUnformatted(status);
    cJSON* result = cJSON_CreateObject();
    cJSON* item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "type", "text");
    cJSON_AddStringToObject(item, "text", text ? text : "");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(result, "content"), item);
    cJSON_AddBoolToObject(result, "isError", false);
    cJSON* id = cJSON_CreateNumber(3);
    link.SendMcp(mcp::jsonrpc::Result(id, result));
    cJSON_Delete(id);
    cJSON_free(text);
    cJSON_Delete(status);
  });
  // The button: a notification built and sent.
  const size_t notify_stack = StackUsed([&] { NotifyButtonPressed(server, "boot"); });

  printf("tools=%d\n", tools + 5);
  printf("link_worker_tools_list_bytes=%zu\n", list_stack);
  printf("link_worker_initialize_bytes=%zu\n", init_stack);
  printf("link_worker_deepest_frame_bytes=%zu (depth %d)\n", deep_stack, voxgate::kMaxFrameDepth);
  printf("tool_worker_status_result_bytes=%zu\n", call_stack);
  printf("button_notification_bytes=%zu\n", notify_stack);
  return 0;
}
