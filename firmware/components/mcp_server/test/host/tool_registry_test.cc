// The tool registry: duplicates, malformed tools, user-only tools,
// annotations, run-time changes.
#include <gtest/gtest.h>

#include "capture.h"
#include "mcp/mcp_server.h"

using mcp::Hint;
using mcp::McpServer;
using mcp::Property;
using mcp::ToolAnnotations;
using mcp::ToolResult;
using testing_support::At;
using testing_support::Capture;
using testing_support::Json;
using testing_support::StrAt;

namespace {

mcp::ToolHandler Ok() {
  return [](const mcp::Arguments&) { return ToolResult::Bool(true); };
}

Json List(McpServer& server, Capture& capture, bool with_user_tools) {
  server.ParseMessage(std::string(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"withUserTools":)") +
                      (with_user_tools ? "true" : "false") + "}}");
  return capture.NextJson();
}

std::vector<std::string> Names(const cJSON* reply) {
  std::vector<std::string> names;
  const cJSON* tool = nullptr;
  cJSON_ArrayForEach(tool, At(reply, "result.tools")) names.push_back(StrAt(tool, "name"));
  return names;
}

}  // namespace

TEST(ToolRegistry, RefusesDuplicatesAndMalformedTools) {
  McpServer server;
  EXPECT_TRUE(server.AddTool("self.a", "A", {}, Ok()));
  EXPECT_FALSE(server.AddTool("self.a", "A again", {}, Ok()));
  EXPECT_FALSE(server.AddUserOnlyTool("self.a", "A as user tool", {}, Ok()));
  EXPECT_FALSE(server.AddTool("", "no name", {}, Ok()));
  EXPECT_FALSE(server.AddTool("self.nohandler", "", {}, nullptr));
  EXPECT_FALSE(server.AddTool("self.bad", "", {Property::String("s").Range(0, 1)}, Ok()));
  EXPECT_FALSE(server.AddTool("self.dup", "", {Property::String("s"), Property::Integer("s")}, Ok()));
}

TEST(ToolRegistry, UserOnlyToolsAreListedOnlyOnRequest) {
  McpServer server;
  Capture capture;
  server.SetSender(capture.sender());
  server.AddTool("self.get_device_status", "Status", {}, Ok());
  server.AddUserOnlyTool("self.reboot", "Reboot", {}, Ok());
  capture.Next();  // list_changed for each add after SetSender
  capture.Next();
  EXPECT_EQ(Names(List(server, capture, false).get()), std::vector<std::string>{"self.get_device_status"});
  Json all = List(server, capture, true);
  EXPECT_EQ(Names(all.get()), (std::vector<std::string>{"self.get_device_status", "self.reboot"}));
  const cJSON* reboot = cJSON_GetArrayItem(At(all.get(), "result.tools"), 1);
  EXPECT_STREQ(cJSON_GetArrayItem(At(reboot, "annotations.audience"), 0)->valuestring, "user");
  EXPECT_EQ(At(cJSON_GetArrayItem(At(all.get(), "result.tools"), 0), "annotations"), nullptr);
}

TEST(ToolRegistry, ToolJsonHasSchemaRequiredAndHints) {
  McpServer server;
  Capture capture;
  ToolAnnotations notes;
  notes.read_only = Hint::kFalse;
  notes.destructive = Hint::kTrue;
  server.AddTool("self.audio_speaker.set_volume", "Set the volume",
                 {Property::Integer("volume", "0-100").Range(0, 100), Property::Boolean("mute").Default(false)}, Ok(),
                 notes);
  server.AddTool("self.get_device_status", "Status", {}, Ok(), ToolAnnotations{false, Hint::kTrue, Hint::kUnset});
  server.SetSender(capture.sender());
  Json reply = List(server, capture, false);
  const cJSON* volume = cJSON_GetArrayItem(At(reply.get(), "result.tools"), 0);
  EXPECT_EQ(StrAt(volume, "inputSchema.type"), "object");
  const cJSON* required = At(volume, "inputSchema.required");
  ASSERT_EQ(cJSON_GetArraySize(required), 1);
  EXPECT_STREQ(cJSON_GetArrayItem(required, 0)->valuestring, "volume");
  EXPECT_TRUE(cJSON_IsFalse(At(volume, "annotations.readOnlyHint")));
  EXPECT_TRUE(cJSON_IsTrue(At(volume, "annotations.destructiveHint")));
  EXPECT_EQ(At(volume, "annotations.audience"), nullptr);

  const cJSON* status = cJSON_GetArrayItem(At(reply.get(), "result.tools"), 1);
  EXPECT_EQ(At(status, "inputSchema.required"), nullptr) << "required is omitted when empty";
  EXPECT_TRUE(cJSON_IsObject(At(status, "inputSchema.properties")));
  EXPECT_TRUE(cJSON_IsTrue(At(status, "annotations.readOnlyHint")));
  EXPECT_EQ(At(status, "annotations.destructiveHint"), nullptr);
}

TEST(ToolRegistry, RunTimeChangesSendListChanged) {
  McpServer server;
  Capture capture;
  server.AddTool("self.boot_time", "registered before the link exists", {}, Ok());
  server.SetSender(capture.sender());
  EXPECT_EQ(capture.Pending(), 0u) << "no notification for tools registered before SetSender";
  ASSERT_TRUE(server.AddTool("self.late", "added at run time", {}, Ok()));
  Json added = capture.NextJson();
  EXPECT_EQ(StrAt(added.get(), "method"), "notifications/tools/list_changed");
  EXPECT_EQ(At(added.get(), "id"), nullptr);
  ASSERT_TRUE(server.RemoveTool("self.late"));
  EXPECT_EQ(StrAt(capture.NextJson().get(), "method"), "notifications/tools/list_changed");
  EXPECT_FALSE(server.RemoveTool("self.late"));
  EXPECT_EQ(capture.Pending(), 0u);
}
