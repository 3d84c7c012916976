#include "cursor.h"

#include <cstdio>

namespace mcp {
namespace {

constexpr size_t kCursorLength = 20;

uint16_t Check(uint32_t generation, uint32_t index) {
  uint32_t h = (generation * 2654435761u) ^ (index * 2246822519u) ^ 0x9e37u;
  return static_cast<uint16_t>(h ^ (h >> 16));
}

bool ParseHex(const char* text, size_t digits, uint32_t* out) {
  uint32_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const char c = text[i];
    uint32_t nibble;
    if (c >= '0' && c <= '9') nibble = c - '0';
    else if (c >= 'a' && c <= 'f') nibble = c - 'a' + 10;
    else return false;
    value = (value << 4) | nibble;
  }
  *out = value;
  return true;
}

}  // namespace

std::string EncodeCursor(uint32_t generation, uint32_t index) {
  char buf[kCursorLength + 1];
  snprintf(buf, sizeof buf, "%08x%08x%04x", static_cast<unsigned>(generation), static_cast<unsigned>(index),
           static_cast<unsigned>(Check(generation, index)));
  return buf;
}

CursorStatus DecodeCursor(const std::string& cursor, uint32_t generation, uint32_t* index) {
  uint32_t gen = 0, idx = 0, check = 0;
  if (cursor.size() != kCursorLength || !ParseHex(cursor.data(), 8, &gen) || !ParseHex(cursor.data() + 8, 8, &idx) ||
      !ParseHex(cursor.data() + 16, 4, &check) || check != Check(gen, idx)) {
    return CursorStatus::kUnknown;
  }
  if (gen != generation) return CursorStatus::kStale;
  *index = idx;
  return CursorStatus::kOk;
}

}  // namespace mcp
