// What esp_websocket_client (>= 1.8.0) does when a connection ends, as a
// portable rule: the device configures the library with kDeviceWsReconnect, and
// the host transport obeys the same rule, so a host test sees what a device does.
//
// From the library's task loop (esp_websocket_client.c):
//  - a failed connect or a lost connection (read/poll error, PONG timeout) goes
//    to WAIT_TIMEOUT and reconnects after reconnect_timeout_ms, unless
//    `disable_auto_reconnect` is set (then the task ends);
//  - a clean close (the close-frame exchange, started by the server, e.g. 1001
//    on a gateway restart, or by esp_websocket_client_close()) reconnects only
//    with `enable_close_reconnect`; without it the task ends and the device is
//    stranded until it restarts. (Before 1.8.0 esp_websocket_client_close()
//    with close-reconnect waited for a stop that never came and then stopped
//    the client: hence ^1.8.0 in idf_component.yml.)
#pragma once

namespace voxgate {

enum class WsEnd : unsigned char {
  kConnectFailed,   // TCP/TLS connect or the upgrade failed  -> WEBSOCKET_EVENT_DISCONNECTED
  kConnectionLost,  // the connection broke without a close frame -> WEBSOCKET_EVENT_DISCONNECTED
  kServerClose,     // the server sent a close frame (1001 ...)  -> WEBSOCKET_EVENT_CLOSED
  kClientClose,     // the device closed (no server hello)      -> WEBSOCKET_EVENT_CLOSED
};

struct WsReconnectPolicy {
  bool auto_reconnect;   // esp_websocket_client_config_t: !disable_auto_reconnect
  bool close_reconnect;  // esp_websocket_client_config_t: enable_close_reconnect
};

// The device's configuration (esp/esp_websocket_protocol.cc) and the host default.
constexpr WsReconnectPolicy kDeviceWsReconnect{true, true};

// True when the client waits and connects again; false when it stops for good.
constexpr bool ReconnectsAfter(WsEnd end, WsReconnectPolicy policy) {
  return end == WsEnd::kConnectFailed || end == WsEnd::kConnectionLost
             ? policy.auto_reconnect
             : policy.auto_reconnect && policy.close_reconnect;
}

}  // namespace voxgate
