#include "voxgate/ws_message.h"

namespace voxgate {

void WsMessageAssembler::Reset() {
  state_ = State::kIdle;
  frame_received_ = 0;
  buffer_.clear();
  buffer_.shrink_to_fit();  // a large message's buffer should not outlive it
}

WsMessageAssembler::Result WsMessageAssembler::Fail(Result result) {
  buffer_.clear();
  buffer_.shrink_to_fit();
  state_ = State::kSkipping;  // the rest of this message is dropped too
  return result;
}

WsMessageAssembler::Result WsMessageAssembler::Add(const WsChunk& chunk) {
  if (chunk.op_code >= kWsClose) return Result::kIgnored;  // ping/pong/close: never part of a message
  Result result = Result::kPending;
  if (chunk.payload_offset == 0) {  // a new frame
    const bool cut_short = frame_received_ != 0;  // the previous frame never ended
    frame_received_ = 0;
    if (chunk.op_code == kWsText) {
      buffer_.clear();  // an unfinished message before it is abandoned (the peer broke the rules)
      state_ = State::kText;
    } else if (chunk.op_code == kWsBinary) {
      buffer_.clear();
      state_ = State::kSkipping;
    } else if (state_ == State::kIdle || cut_short) {  // a continuation of nothing
      result = Fail(Result::kProtocolError);
    }
  } else if (chunk.payload_offset != frame_received_) {
    // A piece out of order: part of the frame was lost, so the message cannot be trusted.
    result = Fail(Result::kProtocolError);
    frame_received_ = chunk.payload_offset;
  }
  if (state_ == State::kText) {
    if (buffer_.size() + chunk.data_len > max_bytes_) {
      result = Fail(Result::kTooLarge);
    } else {
      if (chunk.data_len > 0) buffer_.append(chunk.data, chunk.data_len);
    }
  } else if (result == Result::kPending) {
    result = Result::kIgnored;
  }
  frame_received_ += chunk.data_len;
  if (frame_received_ < chunk.payload_len) return result;
  frame_received_ = 0;  // the frame is complete
  if (!chunk.fin) return result;
  const bool text = state_ == State::kText;  // and so is the message
  state_ = State::kIdle;
  if (!text) return result;
  message_.swap(buffer_);
  buffer_.clear();
  return Result::kMessage;
}

}  // namespace voxgate
