#include "mcp/jsonrpc.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "cJSON.h"

namespace mcp {
namespace jsonrpc {
namespace {

bool IsValidId(const cJSON* id) { return cJSON_IsString(id) || cJSON_IsNumber(id); }

// Prints `root` and deletes it. With a size hint, prints straight into one
// right-sized buffer instead of cJSON's doubling one (matters for big pages).
std::string PrintAndDelete(cJSON* root, size_t size_hint) {
  std::string out;
  if (root == nullptr) return out;
  if (size_hint > 0) {
    out.resize(size_hint + 8);  // cJSON asks for a few spare bytes
    if (cJSON_PrintPreallocated(root, &out[0], static_cast<int>(out.size()), false)) {
      out.resize(strlen(out.c_str()));
      cJSON_Delete(root);
      return out;
    }
    out.clear();
    out.shrink_to_fit();
  }
  char* printed = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (printed != nullptr) {
    out = printed;
    cJSON_free(printed);
  }
  return out;
}

// A numeric id printed so that it reads back as the same number: cJSON's own
// printer rounds integers above 2^31 to 15 significant digits.
cJSON* NumberId(double value) {
  char text[32];
  if (std::floor(value) == value && std::fabs(value) < 9007199254740992.0) {
    snprintf(text, sizeof text, "%.0f", value);
  } else {
    snprintf(text, sizeof text, "%.17g", value);
  }
  return cJSON_CreateRaw(text);
}

cJSON* Envelope(const cJSON* id) {
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "jsonrpc", "2.0");
  cJSON* copy = cJSON_IsString(id)   ? cJSON_CreateString(id->valuestring)
                : cJSON_IsNumber(id) ? NumberId(id->valuedouble)
                                     : cJSON_CreateNull();
  cJSON_AddItemToObject(root, "id", copy);
  return root;
}

}  // namespace

Message Message::Parse(const char* text, size_t length) {
  Message m;
  m.root_ = cJSON_ParseWithLength(text, length);
  if (m.root_ == nullptr) {
    m.Invalid(kParseError, "Parse error");
    return m;
  }
  if (!cJSON_IsObject(m.root_)) {
    m.Invalid(kInvalidRequest, "Invalid Request: not a JSON object");
    return m;
  }
  const cJSON* version = cJSON_GetObjectItemCaseSensitive(m.root_, "jsonrpc");
  const cJSON* id = cJSON_GetObjectItemCaseSensitive(m.root_, "id");
  if (IsValidId(id)) m.id_ = id;  // usable in an error reply even if the rest is wrong
  if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0) {
    m.Invalid(kInvalidRequest, "Invalid Request: jsonrpc must be \"2.0\"");
    return m;
  }
  const cJSON* method = cJSON_GetObjectItemCaseSensitive(m.root_, "method");
  if (method != nullptr) {
    if (!cJSON_IsString(method)) {
      m.Invalid(kInvalidRequest, "Invalid Request: method must be a string");
      return m;
    }
    const cJSON* params = cJSON_GetObjectItemCaseSensitive(m.root_, "params");
    if (params != nullptr && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
      m.Invalid(kInvalidRequest, "Invalid Request: params must be an object or an array");
      return m;
    }
    if (id != nullptr && !IsValidId(id)) {
      m.Invalid(kInvalidRequest, "Invalid Request: id must be a string or a number");
      return m;
    }
    m.method_ = method->valuestring;
    m.params_ = params;
    m.kind_ = id ? Kind::kRequest : Kind::kNotification;
    return m;
  }
  const cJSON* result = cJSON_GetObjectItemCaseSensitive(m.root_, "result");
  const cJSON* error = cJSON_GetObjectItemCaseSensitive(m.root_, "error");
  if (result != nullptr && error == nullptr && IsValidId(id)) {
    m.kind_ = Kind::kResponse;
    return m;
  }
  if (error != nullptr && result == nullptr && cJSON_IsObject(error) && (IsValidId(id) || cJSON_IsNull(id))) {
    m.id_ = id;
    m.kind_ = Kind::kError;
    return m;
  }
  m.Invalid(kInvalidRequest, "Invalid Request: neither a request, a notification nor a response");
  return m;
}

void Message::Invalid(int code, const char* reason) {
  kind_ = Kind::kInvalid;
  code_ = code;
  reason_ = reason;
  method_ = nullptr;
  params_ = nullptr;
}

Message::Message(Message&& other) noexcept { *this = std::move(other); }

Message& Message::operator=(Message&& other) noexcept {
  if (this != &other) {
    cJSON_Delete(root_);
    root_ = other.root_;
    id_ = other.id_;
    params_ = other.params_;
    method_ = other.method_;
    reason_ = other.reason_;
    code_ = other.code_;
    kind_ = other.kind_;
    other.root_ = nullptr;
  }
  return *this;
}

Message::~Message() { cJSON_Delete(root_); }

std::string Result(const cJSON* id, cJSON* result, size_t result_size) {
  cJSON* root = Envelope(id);
  cJSON_AddItemToObject(root, "result", result ? result : cJSON_CreateObject());
  size_t hint = 0;
  if (result_size > 0) hint = result_size + 48 + (id && cJSON_IsString(id) ? 6 * strlen(id->valuestring) : 32);
  return PrintAndDelete(root, hint);
}

std::string Error(const cJSON* id, int code, const std::string& message, cJSON* data) {
  cJSON* root = Envelope(id);
  cJSON* error = cJSON_AddObjectToObject(root, "error");
  cJSON_AddNumberToObject(error, "code", code);
  cJSON_AddStringToObject(error, "message", message.c_str());
  if (data) cJSON_AddItemToObject(error, "data", data);
  return PrintAndDelete(root, 0);
}

std::string Notification(const char* method, cJSON* params) {
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "jsonrpc", "2.0");
  cJSON_AddStringToObject(root, "method", method);
  if (params) cJSON_AddItemToObject(root, "params", params);
  return PrintAndDelete(root, 0);
}

std::string IdKey(const cJSON* id) {
  if (id == nullptr) return {};
  if (cJSON_IsString(id)) return std::string("s:") + id->valuestring;
  if (!cJSON_IsNumber(id)) return {};
  cJSON* number = NumberId(id->valuedouble);
  std::string key = std::string("n:") + number->valuestring;
  cJSON_Delete(number);
  return key;
}

}  // namespace jsonrpc
}  // namespace mcp
