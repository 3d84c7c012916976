// Opaque tools/list cursors: catalog generation + index + check digits, as
// 20 hex characters. A cursor from an older catalog is "stale"; anything that
// does not decode is "unknown".
#pragma once

#include <cstdint>
#include <string>

namespace mcp {

enum class CursorStatus : uint8_t { kOk, kUnknown, kStale };

std::string EncodeCursor(uint32_t generation, uint32_t index);
CursorStatus DecodeCursor(const std::string& cursor, uint32_t generation, uint32_t* index);

}  // namespace mcp
