// Host only: the MQTT link on libmosquitto (MQTT 3.1.1, QoS 0), one network
// thread per device.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "voxgate/device_identity.h"
#include "voxgate/ota_config.h"
#include "voxgate/protocol.h"
#include "voxgate/retry_timer.h"

struct mosquitto;
struct mosquitto_message;

namespace voxgate {

struct MqttOptions {
  MqttConfig config;  // endpoint, client id, credentials, publish topic
  DeviceIdentity identity;
  uint32_t backoff_initial_ms = 500;
  uint32_t backoff_max_ms = 30000;
  uint32_t seed = 1;
  // TLS: the device turns it on for port 8883; `tls` forces it (a test broker on another port).
  bool tls = false;
};

class MosquittoMqttProtocol : public Protocol {
 public:
  explicit MosquittoMqttProtocol(MqttOptions options);
  ~MosquittoMqttProtocol() override;

  bool Start() override;
  void Stop() override;

 private:
  bool SendText(const std::string& text) override;
  void Loop();
  static void OnConnect(mosquitto* mosq, void* self, int rc);
  static void OnDisconnect(mosquitto* mosq, void* self, int rc);
  static void OnMessage(mosquitto* mosq, void* self, const mosquitto_message* message);

  MqttOptions options_;
  std::string host_;
  uint16_t port_ = 1883;
  std::string subscribe_topic_;
  mosquitto* mosq_ = nullptr;
  RetryTimer reconnect_;      // network thread only
  bool socket_open_ = false;  // network thread only
  std::atomic<bool> stopping_{false};
  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
  std::thread thread_;
};

}  // namespace voxgate
