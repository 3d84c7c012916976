// The hello handshake: the device says hello when its link opens and waits
// (up to 10 s) for the server's hello, which carries the session id.
#pragma once

#include <string>

struct cJSON;

namespace voxgate {

enum class Transport : unsigned char { kWebSocket, kMqtt };

constexpr unsigned kServerHelloTimeoutMs = 10000;
// After the device closes a WebSocket link for a missing hello: how long the
// gateway has to finish the close (answer the close frame or end TCP) before
// the device drops the connection without the handshake.
constexpr unsigned kCloseTimeoutMs = 5000;

// WebSocket: {"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket",
//             "audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}
// MQTT: the same with "version":3 and "transport":"udp", as the reference firmware.
std::string DeviceHello(Transport transport);

// True if `frame` (a parsed envelope root) is a server hello; its session_id
// (empty when missing) goes to `session_id`.
bool ParseServerHello(const cJSON* frame, std::string* session_id);

}  // namespace voxgate
