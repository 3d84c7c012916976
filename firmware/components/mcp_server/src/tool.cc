#include "mcp/tool.h"

#include <cinttypes>
#include <cstdio>
#if defined(__cpp_exceptions)
#include <exception>
#endif

#include "cJSON.h"

namespace mcp {

ToolResult ToolResult::Int(int64_t value) {
  char buf[24];
  snprintf(buf, sizeof buf, "%" PRId64, value);
  return Text(buf);
}

ToolResult ToolResult::Json(cJSON* json) {
  if (json == nullptr) return Error("tool produced no result");
  char* printed = cJSON_PrintUnformatted(json);
  cJSON_Delete(json);
  if (printed == nullptr) return Error("out of memory");
  ToolResult result = Text(printed);
  cJSON_free(printed);
  return result;
}

Tool::Tool(std::string name, std::string description, std::vector<Property> properties, ToolHandler handler,
           ToolAnnotations annotations)
    : name_(std::move(name)),
      description_(std::move(description)),
      properties_(std::move(properties)),
      handler_(std::move(handler)),
      annotations_(annotations) {}

std::string Tool::Problem() const {
  if (name_.empty()) return "tool name is empty";
  if (!handler_) return name_ + ": no handler";
  for (size_t i = 0; i < properties_.size(); ++i) {
    if (!properties_[i].valid()) return name_ + ": " + properties_[i].error();
    for (size_t j = 0; j < i; ++j) {
      if (properties_[j].name() == properties_[i].name()) return name_ + ": duplicate property " + properties_[i].name();
    }
  }
  return {};
}

cJSON* Tool::ToJson() const {
  cJSON* tool = cJSON_CreateObject();
  cJSON_AddStringToObject(tool, "name", name_.c_str());
  cJSON_AddStringToObject(tool, "description", description_.c_str());
  cJSON* schema = cJSON_AddObjectToObject(tool, "inputSchema");
  cJSON_AddStringToObject(schema, "type", "object");
  cJSON* props = cJSON_AddObjectToObject(schema, "properties");
  cJSON* required = nullptr;
  for (const auto& property : properties_) {
    property.AddSchemaTo(props);
    if (property.required()) {
      if (required == nullptr) required = cJSON_AddArrayToObject(schema, "required");
      cJSON_AddItemToArray(required, cJSON_CreateString(property.name().c_str()));
    }
  }
  if (annotations_.user_only || annotations_.read_only != Hint::kUnset ||
      annotations_.destructive != Hint::kUnset) {
    cJSON* notes = cJSON_AddObjectToObject(tool, "annotations");
    if (annotations_.user_only) {
      cJSON_AddItemToArray(cJSON_AddArrayToObject(notes, "audience"), cJSON_CreateString("user"));
    }
    if (annotations_.read_only != Hint::kUnset) {
      cJSON_AddBoolToObject(notes, "readOnlyHint", annotations_.read_only == Hint::kTrue);
    }
    if (annotations_.destructive != Hint::kUnset) {
      cJSON_AddBoolToObject(notes, "destructiveHint", annotations_.destructive == Hint::kTrue);
    }
  }
  return tool;
}

bool Tool::BindArguments(const cJSON* arguments, Arguments* out, std::string* argument, std::string* why) const {
  for (const auto& property : properties_) {
    const cJSON* json = arguments ? cJSON_GetObjectItemCaseSensitive(arguments, property.name().c_str()) : nullptr;
    if (json == nullptr) {
      if (property.required()) {
        *argument = property.name();
        *why = "is required";
        return false;
      }
      out->Set(property.name(), property.default_value());
      continue;
    }
    Value value;
    if (!property.Validate(json, &value, why)) {
      *argument = property.name();
      return false;
    }
    out->Set(property.name(), std::move(value));
  }
  return true;
}

ToolResult Tool::Run(const Arguments& args) const {
#if defined(__cpp_exceptions)
  // Host builds have exceptions; a throwing handler still yields isError.
  try {
    return handler_(args);
  } catch (const std::exception& e) {
    return ToolResult::Error(e.what());
  } catch (...) {
    return ToolResult::Error("tool failed");
  }
#else
  return handler_(args);
#endif
}

}  // namespace mcp
