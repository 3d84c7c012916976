// A tool: name, description, typed parameters, annotations and a handler.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mcp/property.h"

struct cJSON;

namespace mcp {

// What a handler returns. Handlers report failure by value (no exceptions:
// ESP-IDF builds C++ without them); a failure becomes `isError: true`.
struct ToolResult {
  std::string text;
  bool is_error = false;

  static ToolResult Text(std::string text) { return {std::move(text), false}; }
  static ToolResult Error(std::string text) { return {std::move(text), true}; }
  static ToolResult Bool(bool value) { return {value ? "true" : "false", false}; }
  static ToolResult Int(int64_t value);
  // Prints `json` compactly into the text and deletes it.
  static ToolResult Json(cJSON* json);
};

using ToolHandler = std::function<ToolResult(const Arguments&)>;

// A hint left unset is not emitted; clients then apply the MCP defaults.
enum class Hint : uint8_t { kUnset, kFalse, kTrue };

struct ToolAnnotations {
  bool user_only = false;  // emitted as "audience": ["user"]
  Hint read_only = Hint::kUnset;
  Hint destructive = Hint::kUnset;
};

class Tool {
 public:
  Tool(std::string name, std::string description, std::vector<Property> properties, ToolHandler handler,
       ToolAnnotations annotations = {});

  const std::string& name() const { return name_; }
  bool user_only() const { return annotations_.user_only; }

  // Empty when the tool is well formed, else why it is not.
  std::string Problem() const;

  // {"name","description","inputSchema":{...},"annotations":{...}}; caller deletes.
  cJSON* ToJson() const;

  // Validates `arguments` (an object or null) against the properties. On
  // failure returns false and sets `argument` and `why`.
  bool BindArguments(const cJSON* arguments, Arguments* out, std::string* argument, std::string* why) const;

  ToolResult Run(const Arguments& args) const;

 private:
  std::string name_;
  std::string description_;
  std::vector<Property> properties_;
  ToolHandler handler_;
  ToolAnnotations annotations_;
};

}  // namespace mcp
