// Reassembles WebSocket text messages from the pieces a client library hands
// out. esp_websocket_client posts one WEBSOCKET_EVENT_DATA per buffer-full:
// `payload_len` and `payload_offset` describe the piece within its FRAME (the
// offset restarts at 0 for every frame, including each continuation frame),
// `op_code` is the frame's opcode (0 for a continuation) and `fin` its FIN bit.
// A message is complete at the end of a frame whose FIN is set. Control frames
// (ping, pong, close) may arrive between the frames of a message and do not
// touch it. The host transport (libwebsockets) feeds the same unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace voxgate {

enum WsOpcode : uint8_t { kWsContinuation = 0x0, kWsText = 0x1, kWsBinary = 0x2, kWsClose = 0x8 };

struct WsChunk {
  uint8_t op_code = kWsText;  // of the frame this piece belongs to
  bool fin = true;            // FIN bit of that frame (a library may report it only on the frame's last piece)
  size_t payload_len = 0;     // length of the frame's payload
  size_t payload_offset = 0;  // where this piece starts within the frame's payload
  const char* data = nullptr;
  size_t data_len = 0;
};

class WsMessageAssembler {
 public:
  enum class Result : unsigned char {
    kPending,        // part of a text message; more to come
    kMessage,        // a text message is complete: message()
    kIgnored,        // control frame, or part of a binary message (audio is not ours)
    kTooLarge,       // the text message outgrew the bound: dropped, the rest of it is skipped
    kProtocolError,  // continuation without a message, or pieces out of order: dropped
  };

  explicit WsMessageAssembler(size_t max_message_bytes) : max_bytes_(max_message_bytes) {}

  Result Add(const WsChunk& chunk);
  // The completed message after kMessage (moved out by the caller if it likes).
  std::string& message() { return message_; }
  // Forget any partial message (a new connection starts clean).
  void Reset();

 private:
  enum class State : unsigned char { kIdle, kText, kSkipping };
  Result Fail(Result result);

  const size_t max_bytes_;
  State state_ = State::kIdle;
  size_t frame_received_ = 0;  // bytes of the current frame seen so far
  std::string buffer_;
  std::string message_;
};

}  // namespace voxgate
