// The text frame around every message: {"session_id","type",...}; MCP rides
// as {"session_id":"..","type":"mcp","payload":{JSON-RPC}} both ways.
#pragma once

#include <string>

struct cJSON;

namespace voxgate {

enum class FrameError : unsigned char { kNone, kNotJson, kNotObject, kBadEnvelope, kTooDeep };

// Nesting bound checked before parsing: cJSON parses recursively, so the depth
// of a frame is stack on the task that parses it (its own limit is 1000 levels,
// far beyond a device task's stack). A JSON-RPC message in its envelope needs
// about 6 levels; tool arguments are flat.
constexpr int kMaxFrameDepth = 32;

// True if arrays and objects in `text` nest deeper than `limit` (brackets inside strings do not count).
bool JsonDeeperThan(const char* text, size_t length, int limit);

// A parsed incoming frame; owns its cJSON tree. Move-only.
class Envelope {
 public:
  static Envelope Parse(const char* text, size_t length);
  static Envelope Parse(const std::string& text) { return Parse(text.data(), text.size()); }

  Envelope(Envelope&& other) noexcept;
  Envelope& operator=(Envelope&& other) noexcept;
  Envelope(const Envelope&) = delete;
  Envelope& operator=(const Envelope&) = delete;
  ~Envelope();

  bool ok() const { return error_ == FrameError::kNone; }
  FrameError error() const { return error_; }
  const std::string& type() const { return type_; }
  // session_id absent or null -> has_session_id() false.
  bool has_session_id() const { return has_session_id_; }
  const std::string& session_id() const { return session_id_; }
  // The `payload` object, or nullptr (always an object for type "mcp").
  const cJSON* payload() const { return payload_; }
  const cJSON* root() const { return root_; }

 private:
  Envelope() = default;

  cJSON* root_ = nullptr;
  const cJSON* payload_ = nullptr;
  std::string type_;
  std::string session_id_;
  bool has_session_id_ = false;
  FrameError error_ = FrameError::kNone;
};

// {"session_id":<session_id>,"type":"mcp","payload":<payload_json>}. The
// payload must be valid JSON text (the MCP server only produces such).
std::string WrapMcp(const std::string& session_id, const std::string& payload_json);

}  // namespace voxgate
