// Peak heap of answering one tools/list request over a 60-tool catalog.
// Every allocation is counted: C++ operator new/delete are replaced and cJSON
// gets counting malloc/free hooks. Prints key=value lines for measure.sh.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "cJSON.h"
#include "mcp/mcp_server.h"
#include "synthetic_tools.h"

namespace {

std::atomic<long> g_current{0};
std::atomic<long> g_peak{0};

constexpr size_t kHeader = 16;  // keeps returned blocks 16-byte aligned

void* CountedAlloc(size_t size) {
  auto* block = static_cast<unsigned char*>(malloc(size + kHeader));
  if (block == nullptr) return nullptr;
  *reinterpret_cast<size_t*>(block) = size;
  const long now = g_current += static_cast<long>(size);
  long peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return block + kHeader;
}

void CountedFree(void* pointer) {
  if (pointer == nullptr) return;
  auto* block = static_cast<unsigned char*>(pointer) - kHeader;
  g_current -= static_cast<long>(*reinterpret_cast<size_t*>(block));
  free(block);
}

void ResetPeak() { g_peak = g_current.load(); }

}  // namespace

void* operator new(size_t size) {
  void* p = CountedAlloc(size ? size : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, size_t) noexcept { CountedFree(p); }
void operator delete[](void* p, size_t) noexcept { CountedFree(p); }

int main(int argc, char** argv) {
  const int tools = argc > 1 ? atoi(argv[1]) : 60;
  const size_t budget = argc > 2 ? static_cast<size_t>(atol(argv[2])) : 8000;
  cJSON_Hooks hooks = {CountedAlloc, CountedFree};
  cJSON_InitHooks(&hooks);

  const long before_server = g_current;
  mcp::McpServer server(mcp::ServerOptions{"measure", "1", budget, {}});
  const long after_server = g_current;
  sim::AddSyntheticTools(server, tools, 0);
  const long catalog = g_current - after_server;

  // The sender only notes the size: the reply string itself is the server's
  // allocation and is counted; nothing else is added inside the measurement.
  size_t reply_bytes = 0;
  server.SetSender([&](const std::string& json) { reply_bytes = json.size(); });
  const std::string request = R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"withUserTools":true}})";

  server.ParseMessage(request);  // warm-up: one-time allocations are not per-page cost
  const long baseline = g_current;
  ResetPeak();
  server.ParseMessage(request);
  const long peak = g_peak - baseline;

  std::string reply;
  server.SetSender([&](const std::string& json) { reply = json; });
  server.ParseMessage(request);
  cJSON* parsed = cJSON_Parse(reply.c_str());
  const int on_page = cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(parsed, "result"), "tools"));
  cJSON_Delete(parsed);

  printf("tools=%d\n", tools);
  printf("page_budget=%zu\n", budget);
  printf("server_bytes=%ld\n", after_server - before_server);
  printf("catalog_bytes=%ld\n", catalog);
  printf("page_reply_bytes=%zu\n", reply_bytes);
  printf("tools_on_page=%d\n", on_page);
  printf("page_peak_heap_bytes=%ld\n", peak);
  return 0;
}
