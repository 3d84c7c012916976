// JSON-RPC 2.0: classifying incoming text and building outgoing messages.
// Every outgoing message is a cJSON tree printed by cJSON, so it is always
// valid JSON with correct escaping.
#pragma once

#include <cstddef>
#include <string>

struct cJSON;

namespace mcp {
namespace jsonrpc {

enum Code : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
  kServerBusy = -32000,  // implementation-defined: the tool queue is full
};

enum class Kind : unsigned char { kInvalid, kRequest, kNotification, kResponse, kError };

// A parsed and classified message. Owns the cJSON tree; move-only.
class Message {
 public:
  static Message Parse(const char* text, size_t length);
  static Message Parse(const std::string& text) { return Parse(text.data(), text.size()); }

  Message(Message&& other) noexcept;
  Message& operator=(Message&& other) noexcept;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  ~Message();

  bool ok() const { return kind_ != Kind::kInvalid; }
  Kind kind() const { return kind_; }
  // For an invalid message: kParseError or kInvalidRequest, and why.
  int code() const { return code_; }
  const char* reason() const { return reason_; }
  // The id as received (string or number); nullptr for notifications, and for
  // invalid messages whose id is unusable. A JSON null for error responses
  // that carry `"id": null`.
  const cJSON* id() const { return id_; }
  // Method of a request or notification, else nullptr.
  const char* method() const { return method_; }
  // Params object or array, or nullptr when absent.
  const cJSON* params() const { return params_; }

 private:
  Message() = default;
  void Invalid(int code, const char* reason);

  cJSON* root_ = nullptr;
  const cJSON* id_ = nullptr;
  const cJSON* params_ = nullptr;
  const char* method_ = nullptr;
  const char* reason_ = "";
  int code_ = 0;
  Kind kind_ = Kind::kInvalid;
};

// {"jsonrpc":"2.0","id":<id>,"result":<result>}; consumes `result`. A
// `result_size` hint (its printed length) lets large pages print into one
// right-sized buffer.
std::string Result(const cJSON* id, cJSON* result, size_t result_size = 0);
// {"jsonrpc":"2.0","id":<id or null>,"error":{"code","message"[,"data"]}}; consumes `data`.
std::string Error(const cJSON* id, int code, const std::string& message, cJSON* data = nullptr);
// {"jsonrpc":"2.0","method":<method>[,"params":<params>]}; consumes `params`.
std::string Notification(const char* method, cJSON* params);

// Canonical text of an id, used as a map key ("7" vs "\"7\"" stay distinct).
std::string IdKey(const cJSON* id);

}  // namespace jsonrpc
}  // namespace mcp
