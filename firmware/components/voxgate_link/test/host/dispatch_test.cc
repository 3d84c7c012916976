// Incoming frames handled off the network thread (Protocol::SetDispatcher):
// the device hands them to a worker task, so envelope parsing and MCP work (a
// tools/list page) never run on esp_websocket_client's or esp-mqtt's task.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "capture.h"
#include "mcp/mcp_server.h"
#include "mcp/platform.h"
#include "voxgate/protocol.h"

using testing_support::Capture;
using testing_support::IntAt;
using testing_support::ParseJson;
using namespace voxgate;

namespace {

class FakeLink : public Protocol {
 public:
  FakeLink() : Protocol(Transport::kWebSocket) {}
  bool Start() override { return true; }
  void Stop() override {}
  void Open() { HandleOpen(MonotonicMs()); }
  void Receive(const std::string& text) { HandleText(text.data(), text.size()); }
  Capture sent;

 protected:
  bool SendText(const std::string& text) override {
    sent.sender()(text);
    return true;
  }
};

const char kList[] = R"({"type":"mcp","payload":{"jsonrpc":"2.0","id":3,"method":"tools/list"}})";

}  // namespace

TEST(Dispatch, McpWorkRunsOnTheDispatcherNotOnTheNetworkThread) {
  FakeLink link;
  std::unique_ptr<mcp::Worker> worker = mcp::Worker::Create({});
  mcp::McpServer server(mcp::ServerOptions{"dispatch-test", "1", 8000, {}});
  server.AddTool("self.ping", "ping", {}, [](const mcp::Arguments&) { return mcp::ToolResult::Bool(true); });
  std::mutex mutex;
  std::vector<std::thread::id> handled_on;
  ProtocolEvents events;
  events.on_mcp = [&](const std::string& payload) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      handled_on.push_back(std::this_thread::get_id());
    }
    server.ParseMessage(payload);
  };
  link.SetEvents(events);
  link.SetDispatcher([&](std::function<void()> job) { return worker->Post(std::move(job)); });
  server.SetSender([&](const std::string& json) { link.SendMcp(json); });
  link.Open();
  ASSERT_NE(link.sent.Next(), "") << "device hello";
  link.Receive(kList);  // on this thread, as a library task would
  auto reply = ParseJson(link.sent.Next());
  ASSERT_NE(reply, nullptr);
  EXPECT_EQ(IntAt(reply.get(), "payload.id"), 3);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(handled_on.size(), 1u);
  EXPECT_NE(handled_on[0], std::this_thread::get_id());
  worker.reset();  // jobs must not outlive the link
}

TEST(Dispatch, AFrameOfAConnectionThatEndedIsDropped) {
  FakeLink link;
  std::vector<std::function<void()>> queued;  // a dispatcher that runs jobs when told
  int mcp = 0;
  ProtocolEvents events;
  events.on_mcp = [&](const std::string&) { ++mcp; };
  link.SetEvents(events);
  link.SetDispatcher([&](std::function<void()> job) {
    queued.push_back(std::move(job));
    return true;
  });
  link.Open();
  link.Receive(kList);
  link.Open();  // reconnected before the worker got to the frame
  link.Receive(kList);
  for (auto& job : queued) job();
  EXPECT_EQ(mcp, 1) << "only the frame of the live connection is handled";
}

TEST(Dispatch, AFullQueueDropsAndReports) {
  FakeLink link;
  std::vector<std::string> errors;
  ProtocolEvents events;
  events.on_error = [&](const std::string& message) { errors.push_back(message); };
  link.SetEvents(events);
  link.SetDispatcher([](std::function<void()>) { return false; });
  link.Open();
  link.Receive(kList);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("queue is full"), std::string::npos);
}
