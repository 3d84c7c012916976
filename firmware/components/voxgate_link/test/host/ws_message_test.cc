// WebSocket message reassembly, fed exactly as esp_websocket_client feeds its
// WEBSOCKET_EVENT_DATA handler: one event per buffer-full, `payload_offset`
// and `payload_len` relative to the FRAME (restarting at 0 for each
// continuation frame), `op_code` 0 for continuations, `fin` per frame.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "voxgate/ws_message.h"

using voxgate::WsChunk;
using voxgate::WsMessageAssembler;
using Result = voxgate::WsMessageAssembler::Result;

namespace {

struct Frame {
  uint8_t op_code;
  bool fin;
  std::string payload;
};

// The DATA events esp_websocket_client posts for these frames with an rx
// buffer of `buffer` bytes (esp_websocket_client_recv: read up to the buffer
// size, post, advance payload_offset, until the frame is read). The chunks
// point into `frames`, which must outlive them.
std::vector<WsChunk> EspEvents(const std::vector<Frame>& frames, size_t buffer) {
  std::vector<WsChunk> events;
  for (const Frame& frame : frames) {
    size_t offset = 0;
    do {
      WsChunk chunk;
      chunk.op_code = frame.op_code;
      chunk.fin = frame.fin;
      chunk.payload_len = frame.payload.size();
      chunk.payload_offset = offset;
      chunk.data = frame.payload.data() + offset;
      chunk.data_len = std::min(buffer, frame.payload.size() - offset);
      events.push_back(chunk);
      offset += chunk.data_len;
    } while (offset < frame.payload.size());
  }
  return events;
}

// Feeds the events; returns the results and the completed messages.
std::vector<Result> Feed(WsMessageAssembler& assembler, const std::vector<WsChunk>& events,
                         std::vector<std::string>* messages) {
  std::vector<Result> results;
  for (const WsChunk& event : events) {
    results.push_back(assembler.Add(event));
    if (results.back() == Result::kMessage) messages->push_back(assembler.message());
  }
  return results;
}

const std::string kMessage =
    R"({"session_id":"s1","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"method":"tools/call",)"
    R"("params":{"name":"self.audio_speaker.set_volume","arguments":{"volume":42}}}})";

}  // namespace

TEST(WsMessage, JoinsAMessageSentAsSeveralFrames) {
  // Three frames: TEXT without FIN, CONTINUATION, CONTINUATION with FIN. The
  // device used to clear its buffer whenever payload_offset was 0, i.e. at
  // every frame, and kept only the last fragment.
  const std::vector<Frame> frames = {{voxgate::kWsText, false, kMessage.substr(0, 40)},
                                     {voxgate::kWsContinuation, false, kMessage.substr(40, 50)},
                                     {voxgate::kWsContinuation, true, kMessage.substr(90)}};
  for (size_t buffer : {size_t{4096}, size_t{16}, size_t{1}}) {  // frames also split across buffer-fulls
    WsMessageAssembler assembler(64 * 1024);
    std::vector<std::string> messages;
    const auto results = Feed(assembler, EspEvents(frames, buffer), &messages);
    ASSERT_EQ(messages.size(), 1u) << "buffer " << buffer;
    EXPECT_EQ(messages[0], kMessage) << "buffer " << buffer;
    EXPECT_EQ(results.back(), Result::kMessage);
    for (size_t i = 0; i + 1 < results.size(); ++i) EXPECT_EQ(results[i], Result::kPending) << i;
  }
}

TEST(WsMessage, ASingleFrameLargerThanTheBufferIsJoined) {
  WsMessageAssembler assembler(64 * 1024);
  std::vector<std::string> messages;
  Feed(assembler, EspEvents({{voxgate::kWsText, true, kMessage}}, 10), &messages);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], kMessage);
}

TEST(WsMessage, ControlFramesBetweenFragmentsLeaveTheMessageAlone) {
  WsMessageAssembler assembler(64 * 1024);
  std::vector<std::string> messages;
  // A PING between two frames of the message.
  const std::vector<Frame> frames = {{voxgate::kWsText, false, kMessage.substr(0, 60)},
                                     {0x9, true, "hi"},
                                     {voxgate::kWsContinuation, true, kMessage.substr(60)}};
  Feed(assembler, EspEvents(frames, 32), &messages);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], kMessage);
}

TEST(WsMessage, BinaryMessagesAreSkippedWithTheirContinuations) {
  WsMessageAssembler assembler(64 * 1024);
  std::vector<std::string> messages;
  const auto results = Feed(assembler,
                            EspEvents({{voxgate::kWsBinary, false, "audio-1"},
                                       {voxgate::kWsContinuation, true, "audio-2"},
                                       {voxgate::kWsText, true, kMessage}},
                                      4096),
                            &messages);
  EXPECT_EQ(results[0], Result::kIgnored);
  EXPECT_EQ(results[1], Result::kIgnored);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], kMessage) << "no audio bytes leak into the next text message";
}

TEST(WsMessage, AMessageOverTheBoundIsDroppedAndTheNextOneWorks) {
  WsMessageAssembler assembler(100);
  std::vector<std::string> messages;
  const std::string big(150, 'x');
  const auto results = Feed(assembler,
                            EspEvents({{voxgate::kWsText, false, big.substr(0, 80)},
                                       {voxgate::kWsContinuation, true, big.substr(80)},
                                       {voxgate::kWsText, true, "{\"ok\":1}"}},
                                      64),
                            &messages);
  int too_large = 0;
  for (Result r : results) too_large += r == Result::kTooLarge;
  EXPECT_EQ(too_large, 1) << "reported once, the rest of the message skipped";
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "{\"ok\":1}");
}

TEST(WsMessage, BrokenSequencesAreDroppedNotJoined) {
  WsMessageAssembler assembler(64 * 1024);
  std::vector<std::string> messages;
  // A continuation with no message before it.
  auto results = Feed(assembler, EspEvents({{voxgate::kWsContinuation, true, "tail"}}, 64), &messages);
  EXPECT_EQ(results[0], Result::kProtocolError);
  // A piece whose offset does not follow the previous one (part of a frame lost).
  WsChunk first{voxgate::kWsText, true, 10, 0, "01234", 5};
  WsChunk skipped{voxgate::kWsText, true, 10, 7, "789", 3};
  EXPECT_EQ(assembler.Add(first), Result::kPending);
  EXPECT_EQ(assembler.Add(skipped), Result::kProtocolError);
  // The next message is whole again.
  Feed(assembler, EspEvents({{voxgate::kWsText, true, kMessage}}, 64), &messages);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], kMessage);
}

TEST(WsMessage, ResetForgetsAPartialMessage) {
  WsMessageAssembler assembler(64 * 1024);
  std::vector<std::string> messages;
  Feed(assembler, EspEvents({{voxgate::kWsText, false, "{\"half\":"}}, 64), &messages);
  assembler.Reset();  // the connection dropped; a new one starts
  Feed(assembler, EspEvents({{voxgate::kWsText, true, kMessage}}, 64), &messages);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], kMessage);
}
