// A device-side MCP server over any text link. Portable: cJSON and the C++
// standard library only; threads and locks come from mcp/platform.h.
//
//   mcp::McpServer server({"my-board", "1.0.0"});
//   server.AddTool("self.led.set", "Turn the LED on or off",
//                  {mcp::Property::Boolean("on")}, handler);
//   server.SetSender([&](const std::string& json) { link.SendMcp(json); });
//   link.OnMcp([&](const std::string& json) { server.ParseMessage(json); });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mcp/jsonrpc.h"
#include "mcp/property.h"
#include "mcp/tool.h"
#include "mcp/platform.h"

struct cJSON;

namespace mcp {

class ToolCatalog;

struct ServerOptions {
  std::string name = "voxgate-device";
  std::string version = "0.1.0";
  size_t page_budget = 8000;  // bytes of one tools/list result, as the reference firmware
  WorkerOptions worker;
};

// What the client sent in initialize's capabilities.vision.
struct Vision {
  std::string url;
  std::string token;
};

class McpServer {
 public:
  using Sender = std::function<void(const std::string& json)>;

  explicit McpServer(ServerOptions options = {});
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Where replies and notifications go. Called from the link thread (inline
  // replies) and from the worker (tool results).
  void SetSender(Sender sender);

  // False (and nothing registered) on a duplicate name or a malformed tool.
  // Adding or removing a tool after SetSender sends notifications/tools/list_changed.
  bool AddTool(std::string name, std::string description, std::vector<Property> properties, ToolHandler handler,
               ToolAnnotations annotations = {});
  // Listed only with tools/list `withUserTools: true`; annotated audience ["user"].
  bool AddUserOnlyTool(std::string name, std::string description, std::vector<Property> properties,
                       ToolHandler handler, ToolAnnotations annotations = {});
  bool RemoveTool(const std::string& name);

  // Handles one JSON-RPC message (the envelope's payload).
  void ParseMessage(const char* text, size_t length);
  void ParseMessage(const std::string& text) { ParseMessage(text.data(), text.size()); }

  // Sends a device-originated notification; consumes `params` (may be null).
  void Notify(const char* method, cJSON* params);

  Vision vision() const;
  void set_page_budget(size_t bytes);

  static const char* const kProtocolVersions[];  // supported, oldest first; the last is the latest

 private:
  bool Register(std::shared_ptr<const Tool> tool);
  void Send(const std::string& json);
  void HandleRequest(const jsonrpc::Message& message);
  void HandleNotification(const jsonrpc::Message& message);
  void Initialize(const jsonrpc::Message& message);
  void ListTools(const jsonrpc::Message& message);
  void CallTool(const jsonrpc::Message& message);
  void InvalidParams(const cJSON* id, const std::string& argument, const std::string& why);
  // True if the request was cancelled; forgets it either way.
  bool FinishPending(const std::string& key);

  ServerOptions options_;
  std::unique_ptr<ToolCatalog> catalog_;
  mutable Mutex mutex_;  // guards sender_, vision_, pending_, page budget
  Sender sender_;
  Vision vision_;
  std::unordered_map<std::string, bool> pending_;  // queued/running tool calls by id key -> cancelled
  std::unique_ptr<Worker> worker_;                // last: destroyed first, before what its jobs use
};

}  // namespace mcp
