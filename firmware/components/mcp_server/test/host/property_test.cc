// Typed properties: schemas, builder misuse, and argument validation.
#include <gtest/gtest.h>

#include "capture.h"
#include "mcp/mcp_server.h"

using mcp::Property;
using testing_support::At;
using testing_support::Json;
using testing_support::ParseJson;

namespace {

Json SchemaOf(const Property& p) {
  Json props(cJSON_CreateObject(), cJSON_Delete);
  p.AddSchemaTo(props.get());
  char* text = cJSON_PrintUnformatted(cJSON_GetObjectItem(props.get(), p.name().c_str()));
  Json schema = ParseJson(text);
  cJSON_free(text);
  return schema;
}

std::string Validate(const Property& p, const char* json_text, mcp::Value* out = nullptr) {
  Json json = ParseJson(json_text);
  mcp::Value value;
  std::string why;
  bool ok = p.Validate(json.get(), &value, &why);
  if (out) *out = value;
  return ok ? "ok" : why;
}

}  // namespace

TEST(Property, BooleanSchemaWithDescriptionAndDefault) {
  Json s = SchemaOf(Property::Boolean("on", "LED state").Default(true));
  EXPECT_STREQ(cJSON_GetObjectItem(s.get(), "type")->valuestring, "boolean");
  EXPECT_STREQ(cJSON_GetObjectItem(s.get(), "description")->valuestring, "LED state");
  EXPECT_TRUE(cJSON_IsTrue(cJSON_GetObjectItem(s.get(), "default")));
}

TEST(Property, IntegerSchemaWithRange) {
  Property p = Property::Integer("volume").Range(0, 100);
  Json s = SchemaOf(p);
  EXPECT_STREQ(cJSON_GetObjectItem(s.get(), "type")->valuestring, "integer");
  EXPECT_EQ(cJSON_GetObjectItem(s.get(), "minimum")->valueint, 0);
  EXPECT_EQ(cJSON_GetObjectItem(s.get(), "maximum")->valueint, 100);
  EXPECT_EQ(cJSON_GetObjectItem(s.get(), "default"), nullptr);
  EXPECT_EQ(cJSON_GetObjectItem(s.get(), "description"), nullptr);
  EXPECT_TRUE(p.required());
}

TEST(Property, NumberAndStringEnumSchemas) {
  Json n = SchemaOf(Property::Number("gain").Min(0.5).Default(1.5));
  EXPECT_STREQ(cJSON_GetObjectItem(n.get(), "type")->valuestring, "number");
  EXPECT_DOUBLE_EQ(cJSON_GetObjectItem(n.get(), "minimum")->valuedouble, 0.5);
  EXPECT_DOUBLE_EQ(cJSON_GetObjectItem(n.get(), "default")->valuedouble, 1.5);

  Json s = SchemaOf(Property::String("theme").OneOf({"light", "dark"}).Default("dark"));
  const cJSON* list = cJSON_GetObjectItem(s.get(), "enum");
  ASSERT_EQ(cJSON_GetArraySize(list), 2);
  EXPECT_STREQ(cJSON_GetArrayItem(list, 1)->valuestring, "dark");
  EXPECT_STREQ(cJSON_GetObjectItem(s.get(), "default")->valuestring, "dark");
}

TEST(Property, BuilderMisuseMarksThePropertyInvalid) {
  EXPECT_FALSE(Property::String("s").Range(0, 1).valid());
  EXPECT_FALSE(Property::Boolean("b").Default(3).valid());
  EXPECT_FALSE(Property::Integer("i").Range(0, 10).Default(11).valid());
  EXPECT_FALSE(Property::Integer("i").Default(11).Range(0, 10).valid());
  EXPECT_FALSE(Property::Integer("i").Range(5, 1).valid());
  EXPECT_FALSE(Property::String("s").OneOf({"a"}).Default("b").valid());
  EXPECT_FALSE(Property::Integer("i").OneOf({"a"}).valid());
  EXPECT_FALSE(Property::Integer("").valid());
  EXPECT_TRUE(Property::Integer("i").Range(0, 10).Default(10).valid());
}

TEST(Property, IntegerValidation) {
  Property p = Property::Integer("volume").Range(0, 100);
  mcp::Value v;
  EXPECT_EQ(Validate(p, "0"), "ok");
  EXPECT_EQ(Validate(p, "100", &v), "ok");
  EXPECT_EQ(v.integer, 100);
  EXPECT_EQ(Validate(p, "101"), "must be <= 100");
  EXPECT_EQ(Validate(p, "-1"), "must be >= 0");
  EXPECT_EQ(Validate(p, "1.5"), "must be an integer");
  EXPECT_EQ(Validate(p, "\"5\""), "must be an integer");
  EXPECT_EQ(Validate(p, "true"), "must be an integer");
  EXPECT_EQ(Validate(p, "null"), "must be an integer");
  EXPECT_EQ(Validate(Property::Integer("big"), "1e300"), "must be an integer");
  EXPECT_EQ(Validate(Property::Integer("neg"), "-9007199254740991", &v), "ok");
  EXPECT_EQ(v.integer, -9007199254740991LL);
}

TEST(Property, NumberBooleanStringValidation) {
  EXPECT_EQ(Validate(Property::Number("x").Range(0, 1), "0.25"), "ok");
  EXPECT_EQ(Validate(Property::Number("x").Range(0, 1), "1.5"), "must be <= 1");
  EXPECT_EQ(Validate(Property::Number("x"), "\"1\""), "must be a number");
  EXPECT_EQ(Validate(Property::Boolean("b"), "false"), "ok");
  EXPECT_EQ(Validate(Property::Boolean("b"), "1"), "must be a boolean");
  EXPECT_EQ(Validate(Property::String("s"), "1"), "must be a string");
  EXPECT_EQ(Validate(Property::String("s").OneOf({"light", "dark"}), "\"dim\""), "must be one of: light, dark");
  EXPECT_EQ(Validate(Property::String("s").OneOf({"light", "dark"}), "\"light\""), "ok");
}

TEST(Property, ArgumentsAccessors) {
  mcp::Arguments args;
  mcp::Value i;
  i.type = mcp::PropertyType::kInteger;
  i.integer = 7;
  i.number = 7;
  args.Set("n", i);
  EXPECT_EQ(args.GetInt("n"), 7);
  EXPECT_DOUBLE_EQ(args.GetNumber("n"), 7.0);
  EXPECT_EQ(args.GetString("n", "fallback"), "fallback");
  EXPECT_FALSE(args.Has("missing"));
  EXPECT_EQ(args.GetInt("missing", -1), -1);
}
