// The nesting bound checked before a frame is parsed: cJSON parses (and
// prints) recursively, so a frame's depth is stack on the device's link worker.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "voxgate/envelope.h"
#include "voxgate/ota_config.h"
#include "voxgate/protocol.h"

using namespace voxgate;

namespace {

// {"type":"tts","a":[[...]]} with `depth` levels in all (the outer object counts).
std::string Nested(int depth) {
  return R"({"type":"tts","a":)" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
}

class FakeLink : public Protocol {
 public:
  FakeLink() : Protocol(Transport::kWebSocket) {}
  bool Start() override { return true; }
  void Stop() override {}
  void Open() { HandleOpen(0); }
  void Receive(const std::string& text) { HandleText(text.data(), text.size()); }

 protected:
  bool SendText(const std::string&) override { return true; }
};

}  // namespace

TEST(FrameBounds, FramesDeeperThanTheBoundAreRefusedBeforeParsing) {
  EXPECT_TRUE(Envelope::Parse(Nested(kMaxFrameDepth)).ok());
  EXPECT_EQ(Envelope::Parse(Nested(kMaxFrameDepth + 1)).error(), FrameError::kTooDeep);
  EXPECT_EQ(Envelope::Parse(Nested(1000)).error(), FrameError::kTooDeep);
}

TEST(FrameBounds, BracketsInsideStringsDoNotCount) {
  const std::string brackets(200, '[');
  EXPECT_TRUE(Envelope::Parse(R"({"type":"tts","text":")" + brackets + R"("})").ok());
  EXPECT_TRUE(Envelope::Parse(R"({"type":"tts","text":"\")" + brackets + R"(\\"})").ok())
      << "escaped quotes and backslashes keep the scan inside the string";
}

TEST(FrameBounds, TheLinkReportsADeepFrameAndHandlesNothing) {
  FakeLink link;
  std::vector<std::string> seen;
  ProtocolEvents events;
  events.on_frame = [&](const std::string& type, const std::string&) { seen.push_back("frame:" + type); };
  events.on_error = [&](const std::string& message) { seen.push_back("error:" + message); };
  link.SetEvents(events);
  link.Open();
  link.Receive(Nested(kMaxFrameDepth + 1));
  link.Receive(Nested(2));
  EXPECT_EQ(seen, (std::vector<std::string>{"error:dropped a frame nested too deep", "frame:tts"}));
}

TEST(FrameBounds, TheOtaAnswerIsBoundedToo) {
  LinkConfig config;
  const std::string ws = R"("websocket":{"url":"ws://gw/xiaozhi/v1/","token":"t"})";
  EXPECT_TRUE(ParseOtaResponse("{" + ws + "}", &config));
  const int levels = kMaxFrameDepth;  // plus the outer object: one level too many
  EXPECT_FALSE(ParseOtaResponse("{" + ws + R"(,"x":)" + std::string(levels, '[') + std::string(levels, ']') + "}",
                                &config));
}
