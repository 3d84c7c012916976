// JSON-RPC behaviour of the server: ids, error codes, escaping, results,
// initialize, ping and notifications.
#include <gtest/gtest.h>

#include "capture.h"
#include "mcp/mcp_server.h"

using mcp::McpServer;
using mcp::Property;
using mcp::ToolResult;
using testing_support::At;
using testing_support::Capture;
using testing_support::IntAt;
using testing_support::Json;
using testing_support::StrAt;

namespace {

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddTool("self.audio_speaker.set_volume", "Set the volume",
                    {Property::Integer("volume").Range(0, 100)},
                    [](const mcp::Arguments& a) { return ToolResult::Int(a.GetInt("volume")); });
    server_.AddTool("self.echo", "Echo text", {Property::String("text")},
                    [](const mcp::Arguments& a) { return ToolResult::Text(a.GetString("text")); });
    server_.AddTool("self.fail", "Always fails", {},
                    [](const mcp::Arguments&) { return ToolResult::Error("sensor \"A\" not found\n"); });
    server_.AddTool("self.defaults", "Uses defaults",
                    {Property::String("mode").OneOf({"a", "b"}).Default("b"), Property::Boolean("flag").Default(true)},
                    [](const mcp::Arguments& a) {
                      return ToolResult::Text(a.GetString("mode") + (a.GetBool("flag") ? "+" : "-"));
                    });
    server_.SetSender(capture_.sender());
  }

  Json Send(const std::string& text) {
    server_.ParseMessage(text);
    return capture_.NextJson();
  }

  std::string Raw(const std::string& text) {
    server_.ParseMessage(text);
    return capture_.Next();
  }

  Capture capture_;  // declared first: it must outlive the server's worker
  McpServer server_{mcp::ServerOptions{"test-board", "9.9.9", 8000, {}}};
};

}  // namespace

TEST_F(ServerTest, NumberAndStringIdsAreEchoedExactly) {
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":7,"method":"ping"})"), R"({"jsonrpc":"2.0","id":7,"result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":"7","method":"ping"})"), R"({"jsonrpc":"2.0","id":"7","result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":"req-\"q\"-日本","method":"ping"})"),
            R"({"jsonrpc":"2.0","id":"req-\"q\"-日本","result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":0,"method":"ping"})"), R"({"jsonrpc":"2.0","id":0,"result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":-3,"method":"ping"})"), R"({"jsonrpc":"2.0","id":-3,"result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":9007199254740991,"method":"ping"})"),
            R"({"jsonrpc":"2.0","id":9007199254740991,"result":{}})");
  EXPECT_EQ(Raw(R"({"jsonrpc":"2.0","id":"","method":"ping"})"), R"({"jsonrpc":"2.0","id":"","result":{}})");
}

TEST_F(ServerTest, ToolCallIdsEchoedForBothKinds) {
  Json n = Send(R"({"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":30}}})");
  EXPECT_EQ(IntAt(n.get(), "id"), 12);
  EXPECT_EQ(StrAt(cJSON_GetArrayItem(At(n.get(), "result.content"), 0), "text"), "30");
  EXPECT_TRUE(cJSON_IsFalse(At(n.get(), "result.isError")));
  Json s = Send(R"({"jsonrpc":"2.0","id":"call-12","method":"tools/call","params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":31}}})");
  EXPECT_EQ(StrAt(s.get(), "id"), "call-12");
}

TEST_F(ServerTest, ParseErrorIs32700WithNullId) {
  Json reply = Send(R"({"jsonrpc":"2.0","id":1,)");
  EXPECT_EQ(IntAt(reply.get(), "error.code"), -32700);
  EXPECT_TRUE(cJSON_IsNull(At(reply.get(), "id")));
}

TEST_F(ServerTest, InvalidRequestsAre32600) {
  for (const char* text : {R"({"jsonrpc":"1.0","id":1,"method":"ping"})", R"({"id":1,"method":"ping"})",
                           R"({"jsonrpc":"2.0","id":1,"method":5})", R"({"jsonrpc":"2.0","id":{"a":1},"method":"x"})",
                           R"({"jsonrpc":"2.0","id":null,"method":"ping"})",
                           R"({"jsonrpc":"2.0","id":1,"method":"x","params":"p"})", R"({"jsonrpc":"2.0","id":1})",
                           R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", R"("ping")"}) {
    Json reply = Send(text);
    EXPECT_EQ(IntAt(reply.get(), "error.code"), -32600) << text;
  }
  // The id is echoed when it is usable even though the message is invalid.
  EXPECT_EQ(IntAt(Send(R"({"jsonrpc":"1.0","id":5,"method":"ping"})").get(), "id"), 5);
}

TEST_F(ServerTest, UnknownMethodIs32601) {
  Json reply = Send(R"({"jsonrpc":"2.0","id":3,"method":"resources/list"})");
  EXPECT_EQ(IntAt(reply.get(), "error.code"), -32601);
  EXPECT_NE(StrAt(reply.get(), "error.message").find("resources/list"), std::string::npos);
}


TEST_F(ServerTest, InvalidParamsNameTheArgumentAndWhy) {
  struct Case {
    const char* params;
    const char* argument;
    const char* why;
  } cases[] = {
      {R"({"name":"self.audio_speaker.set_volume","arguments":{"volume":101}})", "volume", "must be <= 100"},
      {R"({"name":"self.audio_speaker.set_volume","arguments":{"volume":-1}})", "volume", "must be >= 0"},
      {R"({"name":"self.audio_speaker.set_volume","arguments":{"volume":"10"}})", "volume", "must be an integer"},
      {R"({"name":"self.audio_speaker.set_volume","arguments":{}})", "volume", "is required"},
      {R"({"name":"self.audio_speaker.set_volume"})", "volume", "is required"},
      {R"({"name":"self.defaults","arguments":{"mode":"c"}})", "mode", "must be one of: a, b"},
      {R"({"name":"self.defaults","arguments":{"flag":"yes"}})", "flag", "must be a boolean"},
      {R"({"name":"self.nope"})", "name", "names no known tool: self.nope"},
      {R"({"arguments":{}})", "name", "is required"},
      {R"({"name":7})", "name", "must be a string"},
      {R"({"name":"self.echo","arguments":[1]})", "arguments", "must be an object"},
  };
  for (const Case& c : cases) {
    Json reply = Send(std::string(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":)") + c.params + "}");
    EXPECT_EQ(IntAt(reply.get(), "error.code"), -32602) << c.params;
    EXPECT_EQ(StrAt(reply.get(), "error.data.argument"), c.argument) << c.params;
    EXPECT_EQ(StrAt(reply.get(), "error.message"), std::string("Invalid params: '") + c.argument + "' " + c.why);
  }
  Json array_params = Send(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]})");
  EXPECT_EQ(IntAt(array_params.get(), "error.code"), -32602);
  Json bad_flag = Send(R"({"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"withUserTools":1}})");
  EXPECT_EQ(StrAt(bad_flag.get(), "error.data.argument"), "withUserTools");
}

TEST_F(ServerTest, DefaultsFillMissingOptionalArguments) {
  Json reply = Send(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"self.defaults"}})");
  EXPECT_EQ(StrAt(cJSON_GetArrayItem(At(reply.get(), "result.content"), 0), "text"), "b+");
  reply = Send(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"self.defaults","arguments":{"mode":"a","flag":false,"extra":1}}})");
  EXPECT_EQ(StrAt(cJSON_GetArrayItem(At(reply.get(), "result.content"), 0), "text"), "a-");
}

TEST_F(ServerTest, HandlerFailureIsAnIsErrorResult) {
  Json reply = Send(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"self.fail"}})");
  EXPECT_EQ(At(reply.get(), "error"), nullptr);
  EXPECT_TRUE(cJSON_IsTrue(At(reply.get(), "result.isError")));
  const cJSON* item = cJSON_GetArrayItem(At(reply.get(), "result.content"), 0);
  EXPECT_EQ(StrAt(item, "type"), "text");
  EXPECT_EQ(StrAt(item, "text"), "sensor \"A\" not found\n");
}

TEST_F(ServerTest, EscapingOfQuotesControlCharactersAndNonAscii) {
  const std::string tricky = "quote \" backslash \\ newline \n tab \t bell \x07 nul-free \x1f 日本語 ü 🎉 </script>";
  Json args(cJSON_CreateObject(), cJSON_Delete);
  cJSON_AddStringToObject(args.get(), "text", tricky.c_str());
  char* args_text = cJSON_PrintUnformatted(args.get());
  std::string raw = Raw(std::string(R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"self.echo","arguments":)") +
                        args_text + "}}");
  cJSON_free(args_text);
  Json reply = testing_support::ParseJson(raw);
  ASSERT_NE(reply, nullptr) << "reply must be valid JSON: " << raw;
  EXPECT_EQ(StrAt(cJSON_GetArrayItem(At(reply.get(), "result.content"), 0), "text"), tricky);
  for (unsigned char c : raw) EXPECT_GE(c, 0x20) << "raw control character in output";
  EXPECT_NE(raw.find("日本語"), std::string::npos) << "non-ASCII passes through as UTF-8";

  // An error message quoting user input stays valid JSON (the reference
  // firmware pasted it unescaped).
  std::string error = Raw(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"self.\"x\"\n"}})");
  Json parsed = testing_support::ParseJson(error);
  ASSERT_NE(parsed, nullptr) << error;
  EXPECT_EQ(StrAt(parsed.get(), "error.message"), "Invalid params: 'name' names no known tool: self.\"x\"\n");
  std::string method = Raw(R"({"jsonrpc":"2.0","id":10,"method":"a\"b\u0001"})");
  ASSERT_NE(testing_support::ParseJson(method), nullptr) << method;
}

TEST_F(ServerTest, InitializeNegotiatesVersionAndStoresVision) {
  Json reply = Send(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",
      "capabilities":{"vision":{"url":"http://gw:8000/vision","token":"t0k"}},"clientInfo":{"name":"gw","version":"1"}}})");
  EXPECT_EQ(StrAt(reply.get(), "result.protocolVersion"), "2025-03-26");
  EXPECT_TRUE(cJSON_IsTrue(At(reply.get(), "result.capabilities.tools.listChanged")));
  EXPECT_EQ(StrAt(reply.get(), "result.serverInfo.name"), "test-board");
  EXPECT_EQ(StrAt(reply.get(), "result.serverInfo.version"), "9.9.9");
  EXPECT_EQ(server_.vision().url, "http://gw:8000/vision");
  EXPECT_EQ(server_.vision().token, "t0k");

  for (const char* v : {"2024-11-05", "2025-06-18"}) {
    Json r = Send(std::string(R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":")") + v +
                  "\"}}");
    EXPECT_EQ(StrAt(r.get(), "result.protocolVersion"), v);
  }
  EXPECT_EQ(StrAt(Send(R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"1999-01-01"}})").get(),
                  "result.protocolVersion"),
            "2025-06-18");
  EXPECT_EQ(StrAt(Send(R"({"jsonrpc":"2.0","id":4,"method":"initialize"})").get(), "result.protocolVersion"),
            "2025-06-18");
  EXPECT_EQ(server_.vision().url, "http://gw:8000/vision") << "an initialize without vision keeps the old one";
}

TEST_F(ServerTest, NotificationsAndResponsesGetNoReply) {
  server_.ParseMessage(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  server_.ParseMessage(R"({"jsonrpc":"2.0","method":"notifications/whatever","params":{}})");
  server_.ParseMessage(R"({"jsonrpc":"2.0","id":99,"result":{}})");
  server_.ParseMessage(R"({"jsonrpc":"2.0","id":99,"error":{"code":-1,"message":"x"}})");
  server_.ParseMessage(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}})");
  // ping is answered inline, so anything sent before it would already be here.
  Json pong = Send(R"({"jsonrpc":"2.0","id":"last","method":"ping"})");
  EXPECT_EQ(StrAt(pong.get(), "id"), "last");
  EXPECT_EQ(capture_.Pending(), 0u);
}

TEST_F(ServerTest, DeviceNotificationsViaNotify) {
  cJSON* params = cJSON_CreateObject();
  cJSON_AddStringToObject(params, "button", "pressed");
  server_.Notify("notifications/state_changed", params);
  Json n = capture_.NextJson();
  EXPECT_EQ(StrAt(n.get(), "jsonrpc"), "2.0");
  EXPECT_EQ(StrAt(n.get(), "method"), "notifications/state_changed");
  EXPECT_EQ(StrAt(n.get(), "params.button"), "pressed");
  EXPECT_EQ(At(n.get(), "id"), nullptr);
  server_.Notify("notifications/heartbeat", nullptr);
  EXPECT_EQ(At(capture_.NextJson().get(), "params"), nullptr);
}

TEST(ServerWithoutSender, DropsSilently) {
  McpServer server;
  server.ParseMessage(R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  server.Notify("notifications/state_changed", cJSON_CreateObject());  // must not leak or crash
}
