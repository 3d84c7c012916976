// The registered tools, in registration order, and the paginated listing.
// Thread-safe: the link thread lists while the worker calls and the
// application adds or removes tools.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mcp/platform.h"
#include "mcp/tool.h"

struct cJSON;

namespace mcp {

class ToolCatalog {
 public:
  // Empty on success, else why the tool was refused (duplicate, malformed).
  std::string Add(std::shared_ptr<const Tool> tool);
  bool Remove(const std::string& name);
  std::shared_ptr<const Tool> Find(const std::string& name) const;

  // Builds one tools/list result object (`{"tools":[...][,"nextCursor":".."]}`)
  // whose printed size (`*size`) stays within `budget` bytes, except that a
  // page always holds at least one tool. Returns nullptr with the reason on a
  // bad cursor. The caller owns the tree.
  cJSON* BuildPage(const std::string& cursor, bool with_user_tools, size_t budget, size_t* size,
                   std::string* error) const;

 private:
  mutable Mutex mutex_;
  std::vector<std::shared_ptr<const Tool>> tools_;
  uint32_t generation_ = 1;
};

}  // namespace mcp
