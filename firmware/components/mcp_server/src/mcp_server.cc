#include "mcp/mcp_server.h"

#include <cstring>

#include "cJSON.h"
#include "tool_catalog.h"

namespace mcp {
namespace {

using CjsonPtr = std::shared_ptr<cJSON>;

CjsonPtr Share(cJSON* json) { return CjsonPtr(json, cJSON_Delete); }

cJSON* ToolCallResult(const ToolResult& result) {
  cJSON* root = cJSON_CreateObject();
  cJSON* item = cJSON_CreateObject();
  cJSON_AddStringToObject(item, "type", "text");
  cJSON_AddStringToObject(item, "text", result.text.c_str());
  cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "content"), item);
  cJSON_AddBoolToObject(root, "isError", result.is_error);
  return root;
}

}  // namespace

const char* const McpServer::kProtocolVersions[] = {"2024-11-05", "2025-03-26", "2025-06-18", nullptr};

McpServer::McpServer(ServerOptions options)
    : options_(std::move(options)), catalog_(new ToolCatalog()), worker_(Worker::Create(options_.worker)) {}

McpServer::~McpServer() { worker_.reset(); }

void McpServer::SetSender(Sender sender) {
  ScopedLock lock(mutex_);
  sender_ = std::move(sender);
}

void McpServer::Send(const std::string& json) {
  Sender sender;
  {
    ScopedLock lock(mutex_);
    sender = sender_;
  }
  if (sender && !json.empty()) sender(json);
}

bool McpServer::AddTool(std::string name, std::string description, std::vector<Property> properties,
                        ToolHandler handler, ToolAnnotations annotations) {
  return Register(std::make_shared<const Tool>(std::move(name), std::move(description), std::move(properties),
                                               std::move(handler), annotations));
}

bool McpServer::AddUserOnlyTool(std::string name, std::string description, std::vector<Property> properties,
                                ToolHandler handler, ToolAnnotations annotations) {
  annotations.user_only = true;
  return AddTool(std::move(name), std::move(description), std::move(properties), std::move(handler), annotations);
}

bool McpServer::Register(std::shared_ptr<const Tool> tool) {
  if (!catalog_->Add(std::move(tool)).empty()) return false;
  Notify("notifications/tools/list_changed", nullptr);
  return true;
}

bool McpServer::RemoveTool(const std::string& name) {
  if (!catalog_->Remove(name)) return false;
  Notify("notifications/tools/list_changed", nullptr);
  return true;
}

void McpServer::Notify(const char* method, cJSON* params) {
  {
    ScopedLock lock(mutex_);
    if (!sender_) {  // nobody to tell yet (tools registered at boot)
      cJSON_Delete(params);
      return;
    }
  }
  Send(jsonrpc::Notification(method, params));
}

Vision McpServer::vision() const {
  ScopedLock lock(mutex_);
  return vision_;
}

void McpServer::set_page_budget(size_t bytes) {
  ScopedLock lock(mutex_);
  options_.page_budget = bytes;
}

void McpServer::ParseMessage(const char* text, size_t length) {
  jsonrpc::Message message = jsonrpc::Message::Parse(text, length);
  switch (message.kind()) {
    case jsonrpc::Kind::kInvalid:
      Send(jsonrpc::Error(message.id(), message.code(), message.reason()));
      break;
    case jsonrpc::Kind::kRequest:
      HandleRequest(message);
      break;
    case jsonrpc::Kind::kNotification:
      HandleNotification(message);
      break;
    case jsonrpc::Kind::kResponse:
    case jsonrpc::Kind::kError:
      break;  // the device sends no requests, so no reply is awaited
  }
}

void McpServer::HandleRequest(const jsonrpc::Message& message) {
  const char* method = message.method();
  if (message.params() != nullptr && !cJSON_IsObject(message.params())) {
    InvalidParams(message.id(), "", "params must be an object");
  } else if (strcmp(method, "tools/call") == 0) {
    CallTool(message);
  } else if (strcmp(method, "tools/list") == 0) {
    ListTools(message);
  } else if (strcmp(method, "initialize") == 0) {
    Initialize(message);
  } else if (strcmp(method, "ping") == 0) {
    Send(jsonrpc::Result(message.id(), cJSON_CreateObject()));
  } else {
    Send(jsonrpc::Error(message.id(), jsonrpc::kMethodNotFound, std::string("Method not found: ") + method));
  }
}

void McpServer::HandleNotification(const jsonrpc::Message& message) {
  // notifications/initialized needs nothing; unknown notifications are ignored.
  if (strcmp(message.method(), "notifications/cancelled") != 0 || !cJSON_IsObject(message.params())) return;
  const cJSON* request_id = cJSON_GetObjectItemCaseSensitive(message.params(), "requestId");
  if (!cJSON_IsString(request_id) && !cJSON_IsNumber(request_id)) return;
  ScopedLock lock(mutex_);
  auto it = pending_.find(jsonrpc::IdKey(request_id));
  if (it != pending_.end()) it->second = true;
}

void McpServer::InvalidParams(const cJSON* id, const std::string& argument, const std::string& why) {
  cJSON* data = nullptr;
  std::string message = "Invalid params: ";
  if (!argument.empty()) {
    data = cJSON_CreateObject();
    cJSON_AddStringToObject(data, "argument", argument.c_str());
    cJSON_AddStringToObject(data, "reason", why.c_str());
    message += "'" + argument + "' ";
  }
  Send(jsonrpc::Error(id, jsonrpc::kInvalidParams, message + why, data));
}

void McpServer::Initialize(const jsonrpc::Message& message) {
  const cJSON* params = message.params();
  const cJSON* requested = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
  const cJSON* capabilities = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
  const cJSON* vision = cJSON_GetObjectItemCaseSensitive(capabilities, "vision");
  if (cJSON_IsObject(vision)) {
    const cJSON* url = cJSON_GetObjectItemCaseSensitive(vision, "url");
    const cJSON* token = cJSON_GetObjectItemCaseSensitive(vision, "token");
    ScopedLock lock(mutex_);
    vision_.url = cJSON_IsString(url) ? url->valuestring : "";
    vision_.token = cJSON_IsString(token) ? token->valuestring : "";
  }
  // Echo a supported version, else offer the latest.
  const char* version = nullptr;
  for (const char* const* v = kProtocolVersions; *v; ++v) {
    version = *v;
    if (cJSON_IsString(requested) && strcmp(requested->valuestring, *v) == 0) break;
  }
  cJSON* result = cJSON_CreateObject();
  cJSON_AddStringToObject(result, "protocolVersion", version);
  cJSON* tools = cJSON_AddObjectToObject(cJSON_AddObjectToObject(result, "capabilities"), "tools");
  cJSON_AddBoolToObject(tools, "listChanged", true);
  cJSON* info = cJSON_AddObjectToObject(result, "serverInfo");
  cJSON_AddStringToObject(info, "name", options_.name.c_str());
  cJSON_AddStringToObject(info, "version", options_.version.c_str());
  Send(jsonrpc::Result(message.id(), result));
}

void McpServer::ListTools(const jsonrpc::Message& message) {
  const cJSON* params = message.params();
  const cJSON* cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
  const cJSON* with_user = cJSON_GetObjectItemCaseSensitive(params, "withUserTools");
  if (cursor != nullptr && !cJSON_IsString(cursor) && !cJSON_IsNull(cursor)) {
    return InvalidParams(message.id(), "cursor", "must be a string");
  }
  if (with_user != nullptr && !cJSON_IsBool(with_user)) {
    return InvalidParams(message.id(), "withUserTools", "must be a boolean");
  }
  size_t budget;
  {
    ScopedLock lock(mutex_);
    budget = options_.page_budget;
  }
  std::string error;
  size_t size = 0;
  cJSON* page = catalog_->BuildPage(cJSON_IsString(cursor) ? cursor->valuestring : "", cJSON_IsTrue(with_user),
                                    budget, &size, &error);
  if (page == nullptr) return InvalidParams(message.id(), "cursor", error);
  Send(jsonrpc::Result(message.id(), page, size));
}

void McpServer::CallTool(const jsonrpc::Message& message) {
  const cJSON* params = message.params();
  const cJSON* name = cJSON_GetObjectItemCaseSensitive(params, "name");
  const cJSON* arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
  if (!cJSON_IsString(name)) {
    return InvalidParams(message.id(), "name", name ? "must be a string" : "is required");
  }
  if (arguments != nullptr && !cJSON_IsObject(arguments) && !cJSON_IsNull(arguments)) {
    return InvalidParams(message.id(), "arguments", "must be an object");
  }
  std::shared_ptr<const Tool> tool = catalog_->Find(name->valuestring);
  if (!tool) return InvalidParams(message.id(), "name", std::string("names no known tool: ") + name->valuestring);

  auto args = std::make_shared<Arguments>();
  std::string argument, why;
  if (!tool->BindArguments(cJSON_IsObject(arguments) ? arguments : nullptr, args.get(), &argument, &why)) {
    return InvalidParams(message.id(), argument, why);
  }

  const std::string key = jsonrpc::IdKey(message.id());
  CjsonPtr id = Share(cJSON_Duplicate(message.id(), false));  // the message dies before the call runs
  {
    ScopedLock lock(mutex_);
    pending_[key] = false;
  }
  const bool queued = worker_->Post([this, tool, args, id, key] {
    {
      ScopedLock lock(mutex_);
      auto it = pending_.find(key);
      if (it != pending_.end() && it->second) {  // cancelled before it started: drop, no reply
        pending_.erase(it);
        return;
      }
    }
    const ToolResult result = tool->Run(*args);
    if (FinishPending(key)) return;  // cancelled while running: the client no longer waits
    Send(jsonrpc::Result(id.get(), ToolCallResult(result)));
  });
  if (!queued) {
    FinishPending(key);
    Send(jsonrpc::Error(message.id(), jsonrpc::kServerBusy, "Server busy: too many tool calls in progress"));
  }
}

bool McpServer::FinishPending(const std::string& key) {
  ScopedLock lock(mutex_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return false;
  const bool cancelled = it->second;
  pending_.erase(it);
  return cancelled;
}

}  // namespace mcp
