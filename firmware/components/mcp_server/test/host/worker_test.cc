// Tool calls run on the worker: a slow tool does not block the link,
// cancellation drops calls that have not started, a full queue answers busy.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "capture.h"
#include "mcp/mcp_server.h"

using mcp::McpServer;
using mcp::ToolResult;
using testing_support::At;
using testing_support::Capture;
using testing_support::IntAt;
using testing_support::Json;
using testing_support::StrAt;

namespace {

// A latch the test opens to let the blocking tool finish.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void AwaitEntered() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return entered_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  bool entered_ = false;
};

std::string Call(const std::string& id, const char* tool) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":"tools/call","params":{"name":")" + tool + "\"}}";
}

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddTool("self.block", "Blocks until the test opens the gate", {}, [this](const mcp::Arguments&) {
      gate_.Wait();
      return ToolResult::Text("unblocked");
    });
    server_.AddTool("self.quick", "Returns at once", {}, [this](const mcp::Arguments&) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++quick_runs_;
      return ToolResult::Text("quick");
    });
    server_.SetSender(capture_.sender());
  }

  void TearDown() override { gate_.Open(); }

  int quick_runs() {
    std::lock_guard<std::mutex> lock(mutex_);
    return quick_runs_;
  }

  Gate gate_;
  std::mutex mutex_;
  int quick_runs_ = 0;
  Capture capture_;  // declared first: it must outlive the server's worker
  McpServer server_{mcp::ServerOptions{"t", "1", 8000, mcp::WorkerOptions{"t", 4096, 1, 3}}};
};

}  // namespace

TEST_F(WorkerTest, SlowToolDoesNotBlockTheLink) {
  server_.ParseMessage(Call("1", "self.block"));
  gate_.AwaitEntered();
  server_.ParseMessage(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  EXPECT_EQ(IntAt(capture_.NextJson().get(), "id"), 2) << "ping answered while the tool runs";
  server_.ParseMessage(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})");
  EXPECT_EQ(IntAt(capture_.NextJson().get(), "id"), 3);
  gate_.Open();
  Json done = capture_.NextJson();
  EXPECT_EQ(IntAt(done.get(), "id"), 1);
  EXPECT_EQ(StrAt(cJSON_GetArrayItem(At(done.get(), "result.content"), 0), "text"), "unblocked");
}

TEST_F(WorkerTest, CancelledCallThatHasNotStartedIsDropped) {
  server_.ParseMessage(Call("1", "self.block"));
  gate_.AwaitEntered();
  server_.ParseMessage(Call("\"two\"", "self.quick"));
  server_.ParseMessage(Call("3", "self.quick"));
  // Cancel the string id "two"; a numeric 3 must not be confused with "3".
  server_.ParseMessage(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"two","reason":"user"}})");
  server_.ParseMessage(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"3"}})");
  gate_.Open();
  EXPECT_EQ(IntAt(capture_.NextJson().get(), "id"), 1);
  // The worker is FIFO: once 3 has answered, "two" was skipped, not delayed.
  EXPECT_EQ(IntAt(capture_.NextJson().get(), "id"), 3);
  EXPECT_EQ(quick_runs(), 1);
  EXPECT_EQ(capture_.Pending(), 0u);
}

TEST_F(WorkerTest, FullQueueAnswersBusy) {
  server_.ParseMessage(Call("1", "self.block"));
  gate_.AwaitEntered();
  for (int id = 2; id <= 4; ++id) server_.ParseMessage(Call(std::to_string(id), "self.quick"));  // depth 3
  server_.ParseMessage(Call("5", "self.quick"));
  Json busy = capture_.NextJson();
  EXPECT_EQ(IntAt(busy.get(), "id"), 5);
  EXPECT_EQ(IntAt(busy.get(), "error.code"), -32000);
  gate_.Open();
  for (int id = 1; id <= 4; ++id) EXPECT_EQ(IntAt(capture_.NextJson().get(), "id"), id);
}

TEST(WorkerLifetime, DestroyingTheServerWithQueuedCallsIsSafe) {
  Capture capture;
  Gate gate;
  {
    McpServer server;
    server.AddTool("self.block", "", {}, [&](const mcp::Arguments&) {
      gate.Wait();
      return ToolResult::Text("x");
    });
    server.SetSender(capture.sender());
    server.ParseMessage(Call("1", "self.block"));
    server.ParseMessage(Call("2", "self.block"));
    gate.AwaitEntered();
    gate.Open();
  }
  // Call 1 finished before the worker stopped; call 2 may or may not have run.
  EXPECT_GE(capture.Pending(), 1u);
}
