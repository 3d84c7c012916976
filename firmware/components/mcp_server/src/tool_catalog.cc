#include "tool_catalog.h"

#include <cstring>

#include "cJSON.h"
#include "cursor.h"

namespace mcp {
std::string ToolCatalog::Add(std::shared_ptr<const Tool> tool) {
  std::string problem = tool->Problem();
  if (!problem.empty()) return problem;
  ScopedLock lock(mutex_);
  for (const auto& existing : tools_) {
    if (existing->name() == tool->name()) return "duplicate tool name: " + tool->name();
  }
  tools_.push_back(std::move(tool));
  ++generation_;
  return {};
}

bool ToolCatalog::Remove(const std::string& name) {
  ScopedLock lock(mutex_);
  for (auto it = tools_.begin(); it != tools_.end(); ++it) {
    if ((*it)->name() == name) {
      tools_.erase(it);
      ++generation_;
      return true;
    }
  }
  return false;
}

std::shared_ptr<const Tool> ToolCatalog::Find(const std::string& name) const {
  ScopedLock lock(mutex_);
  for (const auto& tool : tools_) {
    if (tool->name() == name) return tool;
  }
  return nullptr;
}

cJSON* ToolCatalog::BuildPage(const std::string& cursor, bool with_user_tools, size_t budget, size_t* size,
                              std::string* error) const {
  ScopedLock lock(mutex_);
  uint32_t start = 0;
  if (!cursor.empty()) {
    const CursorStatus status = DecodeCursor(cursor, generation_, &start);
    if (status == CursorStatus::kStale) {
      *error = "is stale: the tool list changed since this cursor was issued; list again without a cursor";
      return nullptr;
    }
    if (status != CursorStatus::kOk || start >= tools_.size()) {
      *error = "is unknown: not a cursor this server issued";
      return nullptr;
    }
  }
  const size_t n = tools_.size();
  size_t last_visible = n;  // index of the last tool this caller may see
  for (size_t i = n; i-- > start;) {
    if (with_user_tools || !tools_[i]->user_only()) {
      last_visible = i;
      break;
    }
  }
  // Printed lengths of the fixed parts of `{"tools":[...],"nextCursor":"<20 hex>"}`.
  const size_t head = sizeof "{\"tools\":[" - 1;
  const size_t end = sizeof "]}" - 1;
  const size_t cursor_tail = sizeof "],\"nextCursor\":\"\"}" - 1 + EncodeCursor(0, 0).size();

  cJSON* result = cJSON_CreateObject();
  cJSON* list = cJSON_AddArrayToObject(result, "tools");
  size_t used = head;
  size_t count = 0;
  for (size_t i = start; i < n && last_visible < n; ++i) {
    const Tool& tool = *tools_[i];
    if (tool.user_only() && !with_user_tools) continue;
    // Each tool is printed on its own and kept as a raw item: one small tree
    // at a time keeps the peak heap near the page size.
    cJSON* json = tool.ToJson();
    char* printed = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    cJSON* raw = printed ? cJSON_CreateRaw("") : nullptr;
    if (raw == nullptr) {
      cJSON_free(printed);
      cJSON_Delete(result);
      *error = "out of memory";
      return nullptr;
    }
    const size_t length = strlen(printed);
    const size_t tail = i == last_visible ? end : cursor_tail;
    if (count > 0 && used + 1 + length + tail > budget) {
      cJSON_free(printed);
      cJSON_Delete(raw);
      const std::string next = EncodeCursor(generation_, static_cast<uint32_t>(i));
      cJSON_AddStringToObject(result, "nextCursor", next.c_str());
      *size = used + cursor_tail;
      return result;
    }
    cJSON_free(raw->valuestring);
    raw->valuestring = printed;  // the raw item now owns the printed text
    cJSON_AddItemToArray(list, raw);
    used += (count ? 1 : 0) + length;
    ++count;
    if (i == last_visible) break;
  }
  *size = used + end;
  return result;
}

}  // namespace mcp
