// Typed tool parameters: boolean, integer, number, string.
// A property with a default is optional; without one it is required.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct cJSON;

namespace mcp {

enum class PropertyType : uint8_t { kBoolean, kInteger, kNumber, kString };

// One validated argument value (or a default).
struct Value {
  PropertyType type = PropertyType::kBoolean;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
};

class Property {
 public:
  static Property Boolean(std::string name, std::string description = {});
  static Property Integer(std::string name, std::string description = {});
  static Property Number(std::string name, std::string description = {});
  static Property String(std::string name, std::string description = {});

  // Builders. A misuse (range on a string, default of the wrong type or out of
  // range, enum on a non-string) marks the property invalid; AddTool refuses it.
  Property& Min(double min);
  Property& Max(double max);
  Property& Range(double min, double max) { return Min(min).Max(max); }
  Property& OneOf(std::vector<std::string> allowed);
  Property& Default(bool value);
  Property& Default(int value) { return Default(static_cast<int64_t>(value)); }
  Property& Default(int64_t value);
  Property& Default(double value);
  Property& Default(const char* value) { return Default(std::string(value)); }
  Property& Default(std::string value);

  const std::string& name() const { return name_; }
  PropertyType type() const { return type_; }
  bool required() const { return !has_default_; }
  bool valid() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const Value& default_value() const { return default_; }

  // Adds `"<name>": {schema}` to a JSON Schema `properties` object.
  void AddSchemaTo(cJSON* properties) const;

  // Checks a JSON argument; on success fills `out`, else explains in `why`
  // (without the argument name, which the caller prefixes).
  bool Validate(const cJSON* json, Value* out, std::string* why) const;

 private:
  Property(std::string name, PropertyType type, std::string description);
  bool CheckValue(const Value& value, std::string* why) const;
  void Fail(const char* reason);

  std::string name_;
  std::string description_;
  std::vector<std::string> enum_;
  double min_ = 0;
  double max_ = 0;
  Value default_;
  std::string error_;
  PropertyType type_;
  bool has_min_ = false;
  bool has_max_ = false;
  bool has_default_ = false;
};

// Validated arguments handed to a tool handler: every required property is
// present and every optional one with a default is filled in.
class Arguments {
 public:
  const Value* Find(const std::string& name) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  bool GetBool(const std::string& name, bool fallback = false) const;
  int64_t GetInt(const std::string& name, int64_t fallback = 0) const;
  double GetNumber(const std::string& name, double fallback = 0) const;
  std::string GetString(const std::string& name, const std::string& fallback = {}) const;

  void Set(const std::string& name, Value value);

 private:
  std::vector<std::pair<std::string, Value>> values_;
};

}  // namespace mcp
