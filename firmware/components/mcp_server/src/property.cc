#include "mcp/property.h"

#include <cmath>
#include <cstdio>

#include "cJSON.h"

namespace mcp {
namespace {

const char* TypeName(PropertyType type) {
  switch (type) {
    case PropertyType::kBoolean: return "boolean";
    case PropertyType::kInteger: return "integer";
    case PropertyType::kNumber: return "number";
    case PropertyType::kString: return "string";
  }
  return "string";
}

// Shortest text for a limit in an error message ("100", "0.5").
std::string FormatNumber(double value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.15g", value);
  return buf;
}

// 2^63 as a double: integers must stay strictly below it to fit int64_t.
constexpr double kInt64Bound = 9223372036854775808.0;

}  // namespace

Property::Property(std::string name, PropertyType type, std::string description)
    : name_(std::move(name)), description_(std::move(description)), type_(type) {
  default_.type = type;
  if (name_.empty()) Fail("property name is empty");
}

Property Property::Boolean(std::string name, std::string description) {
  return Property(std::move(name), PropertyType::kBoolean, std::move(description));
}
Property Property::Integer(std::string name, std::string description) {
  return Property(std::move(name), PropertyType::kInteger, std::move(description));
}
Property Property::Number(std::string name, std::string description) {
  return Property(std::move(name), PropertyType::kNumber, std::move(description));
}
Property Property::String(std::string name, std::string description) {
  return Property(std::move(name), PropertyType::kString, std::move(description));
}

void Property::Fail(const char* reason) {
  if (error_.empty()) error_ = name_ + ": " + reason;
}

Property& Property::Min(double min) {
  if (type_ != PropertyType::kInteger && type_ != PropertyType::kNumber) {
    Fail("a range applies to integer and number properties only");
  }
  min_ = min;
  has_min_ = true;
  if (has_max_ && min_ > max_) Fail("minimum is above maximum");
  if (has_default_ && !CheckValue(default_, nullptr)) Fail("default is out of range");
  return *this;
}

Property& Property::Max(double max) {
  if (type_ != PropertyType::kInteger && type_ != PropertyType::kNumber) {
    Fail("a range applies to integer and number properties only");
  }
  max_ = max;
  has_max_ = true;
  if (has_min_ && min_ > max_) Fail("minimum is above maximum");
  if (has_default_ && !CheckValue(default_, nullptr)) Fail("default is out of range");
  return *this;
}

Property& Property::OneOf(std::vector<std::string> allowed) {
  if (type_ != PropertyType::kString) Fail("an enum applies to string properties only");
  if (allowed.empty()) Fail("enum is empty");
  enum_ = std::move(allowed);
  if (has_default_ && !CheckValue(default_, nullptr)) Fail("default is not in the enum");
  return *this;
}

Property& Property::Default(bool value) {
  if (type_ != PropertyType::kBoolean) Fail("default has the wrong type");
  default_.boolean = value;
  has_default_ = true;
  return *this;
}

Property& Property::Default(int64_t value) {
  if (type_ == PropertyType::kNumber) return Default(static_cast<double>(value));
  if (type_ != PropertyType::kInteger) Fail("default has the wrong type");
  default_.integer = value;
  default_.number = static_cast<double>(value);
  has_default_ = true;
  if (!CheckValue(default_, nullptr)) Fail("default is out of range");
  return *this;
}

Property& Property::Default(double value) {
  if (type_ != PropertyType::kNumber) Fail("default has the wrong type");
  default_.number = value;
  has_default_ = true;
  if (!CheckValue(default_, nullptr)) Fail("default is out of range");
  return *this;
}

Property& Property::Default(std::string value) {
  if (type_ != PropertyType::kString) Fail("default has the wrong type");
  default_.string = std::move(value);
  has_default_ = true;
  if (!CheckValue(default_, nullptr)) Fail("default is not in the enum");
  return *this;
}

bool Property::CheckValue(const Value& value, std::string* why) const {
  if (type_ == PropertyType::kInteger || type_ == PropertyType::kNumber) {
    if (has_min_ && value.number < min_) {
      if (why) *why = "must be >= " + FormatNumber(min_);
      return false;
    }
    if (has_max_ && value.number > max_) {
      if (why) *why = "must be <= " + FormatNumber(max_);
      return false;
    }
  } else if (type_ == PropertyType::kString && !enum_.empty()) {
    for (const auto& allowed : enum_) {
      if (allowed == value.string) return true;
    }
    if (why) {
      *why = "must be one of:";
      for (size_t i = 0; i < enum_.size(); ++i) *why += (i ? ", " : " ") + enum_[i];
    }
    return false;
  }
  return true;
}

bool Property::Validate(const cJSON* json, Value* out, std::string* why) const {
  Value value;
  value.type = type_;
  switch (type_) {
    case PropertyType::kBoolean:
      if (!cJSON_IsBool(json)) {
        *why = "must be a boolean";
        return false;
      }
      value.boolean = cJSON_IsTrue(json);
      break;
    case PropertyType::kInteger: {
      const double d = cJSON_IsNumber(json) ? json->valuedouble : NAN;
      if (!std::isfinite(d) || std::floor(d) != d || d >= kInt64Bound || d < -kInt64Bound) {
        *why = "must be an integer";
        return false;
      }
      value.integer = static_cast<int64_t>(d);
      value.number = d;
      break;
    }
    case PropertyType::kNumber:
      if (!cJSON_IsNumber(json)) {
        *why = "must be a number";
        return false;
      }
      value.number = json->valuedouble;
      break;
    case PropertyType::kString:
      if (!cJSON_IsString(json)) {
        *why = "must be a string";
        return false;
      }
      value.string = json->valuestring;
      break;
  }
  if (!CheckValue(value, why)) return false;
  *out = std::move(value);
  return true;
}

void Property::AddSchemaTo(cJSON* properties) const {
  cJSON* schema = cJSON_AddObjectToObject(properties, name_.c_str());
  cJSON_AddStringToObject(schema, "type", TypeName(type_));
  if (!description_.empty()) cJSON_AddStringToObject(schema, "description", description_.c_str());
  if (!enum_.empty()) {
    cJSON* list = cJSON_AddArrayToObject(schema, "enum");
    for (const auto& allowed : enum_) cJSON_AddItemToArray(list, cJSON_CreateString(allowed.c_str()));
  }
  if (has_min_) cJSON_AddNumberToObject(schema, "minimum", min_);
  if (has_max_) cJSON_AddNumberToObject(schema, "maximum", max_);
  if (has_default_) {
    switch (type_) {
      case PropertyType::kBoolean: cJSON_AddBoolToObject(schema, "default", default_.boolean); break;
      case PropertyType::kInteger:
      case PropertyType::kNumber: cJSON_AddNumberToObject(schema, "default", default_.number); break;
      case PropertyType::kString: cJSON_AddStringToObject(schema, "default", default_.string.c_str()); break;
    }
  }
}

const Value* Arguments::Find(const std::string& name) const {
  for (const auto& entry : values_) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

bool Arguments::GetBool(const std::string& name, bool fallback) const {
  const Value* v = Find(name);
  return v && v->type == PropertyType::kBoolean ? v->boolean : fallback;
}

int64_t Arguments::GetInt(const std::string& name, int64_t fallback) const {
  const Value* v = Find(name);
  return v && v->type == PropertyType::kInteger ? v->integer : fallback;
}

double Arguments::GetNumber(const std::string& name, double fallback) const {
  const Value* v = Find(name);
  return v && (v->type == PropertyType::kNumber || v->type == PropertyType::kInteger) ? v->number : fallback;
}

std::string Arguments::GetString(const std::string& name, const std::string& fallback) const {
  const Value* v = Find(name);
  return v && v->type == PropertyType::kString ? v->string : fallback;
}

void Arguments::Set(const std::string& name, Value value) {
  values_.emplace_back(name, std::move(value));
}

}  // namespace mcp
