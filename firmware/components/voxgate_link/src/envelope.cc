#include "voxgate/envelope.h"

#include <cstring>

#include "cJSON.h"

namespace voxgate {

bool JsonDeeperThan(const char* text, size_t length, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < length; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // an escaped character, maybe a quote
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

Envelope Envelope::Parse(const char* text, size_t length) {
  Envelope e;
  if (JsonDeeperThan(text, length, kMaxFrameDepth)) {
    e.error_ = FrameError::kTooDeep;
    return e;
  }
  e.root_ = length ? cJSON_ParseWithLength(text, length) : nullptr;
  if (e.root_ == nullptr) {
    e.error_ = FrameError::kNotJson;
    return e;
  }
  if (!cJSON_IsObject(e.root_)) {
    e.error_ = FrameError::kNotObject;
    return e;
  }
  const cJSON* type = cJSON_GetObjectItemCaseSensitive(e.root_, "type");
  const cJSON* session = cJSON_GetObjectItemCaseSensitive(e.root_, "session_id");
  const cJSON* payload = cJSON_GetObjectItemCaseSensitive(e.root_, "payload");
  if (!cJSON_IsString(type) || type->valuestring[0] == '\0' ||
      (session != nullptr && !cJSON_IsString(session) && !cJSON_IsNull(session)) ||
      (strcmp(type->valuestring, "mcp") == 0 && !cJSON_IsObject(payload))) {
    e.error_ = FrameError::kBadEnvelope;
    return e;
  }
  e.type_ = type->valuestring;
  e.has_session_id_ = cJSON_IsString(session);
  if (e.has_session_id_) e.session_id_ = session->valuestring;
  e.payload_ = cJSON_IsObject(payload) ? payload : nullptr;
  return e;
}

Envelope::Envelope(Envelope&& other) noexcept { *this = std::move(other); }

Envelope& Envelope::operator=(Envelope&& other) noexcept {
  if (this != &other) {
    cJSON_Delete(root_);
    root_ = other.root_;
    payload_ = other.payload_;
    type_ = std::move(other.type_);
    session_id_ = std::move(other.session_id_);
    has_session_id_ = other.has_session_id_;
    error_ = other.error_;
    other.root_ = nullptr;
    other.payload_ = nullptr;
  }
  return *this;
}

Envelope::~Envelope() { cJSON_Delete(root_); }

std::string WrapMcp(const std::string& session_id, const std::string& payload_json) {
  if (payload_json.empty()) return {};
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "session_id", session_id.c_str());
  cJSON_AddStringToObject(root, "type", "mcp");
  // The payload is already JSON: borrow it as a raw item rather than re-parse it.
  cJSON* raw = cJSON_CreateRaw("");
  cJSON_free(raw->valuestring);
  raw->valuestring = const_cast<char*>(payload_json.c_str());
  raw->type |= cJSON_IsReference;
  cJSON_AddItemToObject(root, "payload", raw);
  std::string out(payload_json.size() + 6 * session_id.size() + 64, '\0');
  if (cJSON_PrintPreallocated(root, &out[0], static_cast<int>(out.size()), false)) {
    out.resize(strlen(out.c_str()));
  } else {
    out.clear();
  }
  cJSON_Delete(root);
  return out;
}

}  // namespace voxgate
