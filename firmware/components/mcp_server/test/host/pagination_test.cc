// tools/list pagination by byte budget with opaque cursors.
#include <gtest/gtest.h>

#include <set>

#include "capture.h"
#include "mcp/mcp_server.h"

using mcp::McpServer;
using mcp::Property;
using testing_support::At;
using testing_support::Capture;
using testing_support::Json;
using testing_support::StrAt;

namespace {

std::string ToolName(int i) { return "self.synthetic.tool_" + std::to_string(i); }

void AddTools(McpServer& server, int count, int user_only_every = 0) {
  for (int i = 0; i < count; ++i) {
    // Descriptions of varying length so pages break at different places.
    std::string description = "Synthetic tool number " + std::to_string(i) + ". " + std::string(i % 7 * 40, 'x');
    std::vector<Property> props = {Property::Integer("level", "Level in percent").Range(0, 100),
                                   Property::String("mode").OneOf({"fast", "slow"}).Default("fast")};
    auto handler = [](const mcp::Arguments&) { return mcp::ToolResult::Bool(true); };
    if (user_only_every && i % user_only_every == 0) {
      ASSERT_TRUE(server.AddUserOnlyTool(ToolName(i), description, props, handler));
    } else {
      ASSERT_TRUE(server.AddTool(ToolName(i), description, props, handler));
    }
  }
}

Json Request(McpServer& server, Capture& capture, const std::string& params) {
  server.ParseMessage(R"({"jsonrpc":"2.0","id":42,"method":"tools/list","params":)" + params + "}");
  return capture.NextJson();
}

std::string PrintedResultSize(const cJSON* reply, size_t* size) {
  char* text = cJSON_PrintUnformatted(At(reply, "result"));
  std::string s = text ? text : "";
  cJSON_free(text);
  *size = s.size();
  return s;
}

// Walks every page; returns the names in order and checks each page.
std::vector<std::string> WalkAll(McpServer& server, Capture& capture, size_t budget, bool with_user_tools,
                                 int* pages) {
  std::vector<std::string> names;
  std::set<std::string> cursors;
  std::string cursor;
  *pages = 0;
  for (int guard = 0; guard < 1000; ++guard) {
    std::string params = std::string("{\"withUserTools\":") + (with_user_tools ? "true" : "false");
    if (!cursor.empty()) params += ",\"cursor\":\"" + cursor + "\"";
    Json reply = Request(server, capture, params + "}");
    EXPECT_EQ(At(reply.get(), "error"), nullptr) << StrAt(reply.get(), "error.message");
    const cJSON* tools = At(reply.get(), "result.tools");
    EXPECT_TRUE(cJSON_IsArray(tools));
    ++*pages;
    const int on_page = cJSON_GetArraySize(tools);
    EXPECT_GE(on_page, 1);
    size_t size = 0;
    PrintedResultSize(reply.get(), &size);
    if (on_page > 1) {
      EXPECT_LE(size, budget) << "page over budget";
    }
    const cJSON* tool = nullptr;
    cJSON_ArrayForEach(tool, tools) names.push_back(StrAt(tool, "name"));
    const cJSON* next = At(reply.get(), "result.nextCursor");
    if (next == nullptr) break;
    EXPECT_TRUE(cJSON_IsString(next));
    cursor = next->valuestring;
    EXPECT_TRUE(cursors.insert(cursor).second) << "repeated cursor";
    EXPECT_EQ(cursor.find("self."), std::string::npos) << "cursor must be opaque, not a tool name";
  }
  return names;
}

}  // namespace

class PaginationByBudget : public ::testing::TestWithParam<size_t> {};

TEST_P(PaginationByBudget, EveryToolExactlyOnceInOrder) {
  const size_t budget = GetParam();
  McpServer server(mcp::ServerOptions{"test", "1", budget, {}});
  AddTools(server, 60);
  Capture capture;
  server.SetSender(capture.sender());
  int pages = 0;
  std::vector<std::string> names = WalkAll(server, capture, budget, false, &pages);
  ASSERT_EQ(names.size(), 60u);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(names[i], ToolName(i));
  if (budget >= 100000) {
    EXPECT_EQ(pages, 1);
  } else {
    EXPECT_GT(pages, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, PaginationByBudget,
                         ::testing::Values(size_t{1}, size_t{300}, size_t{700}, size_t{1500}, size_t{4096},
                                           size_t{8000}, size_t{100000}));

TEST(Pagination, UserOnlyToolsAcrossPages) {
  McpServer server(mcp::ServerOptions{"test", "1", 1200, {}});
  AddTools(server, 40, 3);  // every third tool is user-only
  Capture capture;
  server.SetSender(capture.sender());
  int pages = 0;
  EXPECT_EQ(WalkAll(server, capture, 1200, true, &pages).size(), 40u);
  std::vector<std::string> visible = WalkAll(server, capture, 1200, false, &pages);
  EXPECT_EQ(visible.size(), 26u);
  for (const auto& name : visible) EXPECT_NE(std::stoi(name.substr(name.rfind('_') + 1)) % 3, 0) << name;
}

TEST(Pagination, DefaultBudgetIs8000AndConfigurable) {
  McpServer server;
  AddTools(server, 60);
  Capture capture;
  server.SetSender(capture.sender());
  Json first = Request(server, capture, "{}");
  size_t size = 0;
  PrintedResultSize(first.get(), &size);
  EXPECT_LE(size, 8000u);
  EXPECT_GT(size, 6000u);
  server.set_page_budget(2000);
  Json small = Request(server, capture, "{}");
  PrintedResultSize(small.get(), &size);
  EXPECT_LE(size, 2000u);
}

TEST(Pagination, EmptyCatalogAndEmptyCursor) {
  McpServer server;
  Capture capture;
  server.SetSender(capture.sender());
  Json reply = Request(server, capture, R"({"cursor":""})");
  EXPECT_EQ(cJSON_GetArraySize(At(reply.get(), "result.tools")), 0);
  EXPECT_EQ(At(reply.get(), "result.nextCursor"), nullptr);
  server.ParseMessage(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");  // params absent
  EXPECT_TRUE(cJSON_IsArray(At(capture.NextJson().get(), "result.tools")));
}

TEST(Pagination, StaleCursorAfterCatalogChange) {
  McpServer server(mcp::ServerOptions{"test", "1", 1000, {}});
  AddTools(server, 20);
  Capture capture;
  server.SetSender(capture.sender());
  Json first = Request(server, capture, "{}");
  std::string cursor = StrAt(first.get(), "result.nextCursor");
  ASSERT_NE(cursor, "<missing>");
  server.AddTool("self.new", "new", {}, [](const mcp::Arguments&) { return mcp::ToolResult::Bool(true); });
  capture.Next();  // list_changed
  Json stale = Request(server, capture, R"({"cursor":")" + cursor + "\"}");
  EXPECT_EQ(testing_support::IntAt(stale.get(), "error.code"), -32602);
  EXPECT_NE(StrAt(stale.get(), "error.message").find("stale"), std::string::npos);
  EXPECT_EQ(testing_support::IntAt(stale.get(), "id"), 42);
}

TEST(Pagination, UnknownCursors) {
  McpServer server;
  AddTools(server, 5);
  Capture capture;
  server.SetSender(capture.sender());
  for (const char* cursor : {"self.synthetic.tool_3", "zzzz", "00000001000000000000", "0000000200000001ffff"}) {
    Json reply = Request(server, capture, std::string(R"({"cursor":")") + cursor + "\"}");
    EXPECT_EQ(testing_support::IntAt(reply.get(), "error.code"), -32602) << cursor;
    EXPECT_NE(StrAt(reply.get(), "error.message").find("unknown"), std::string::npos) << cursor;
  }
  Json wrong_type = Request(server, capture, R"({"cursor":5})");
  EXPECT_EQ(testing_support::IntAt(wrong_type.get(), "error.code"), -32602);
  EXPECT_NE(StrAt(wrong_type.get(), "error.message").find("cursor"), std::string::npos);
}
