#include "mosquitto_mqtt_protocol.h"

#include <mosquitto.h>

#include "trust_roots.h"

namespace voxgate {
namespace {

std::once_flag library_once;

}  // namespace

MosquittoMqttProtocol::MosquittoMqttProtocol(MqttOptions options)
    : Protocol(Transport::kMqtt),
      options_(std::move(options)),
      subscribe_topic_(P2pTopic(options_.identity.mac)),
      reconnect_(Backoff(options_.backoff_initial_ms, options_.backoff_max_ms, options_.seed)) {
  std::call_once(library_once, [] { mosquitto_lib_init(); });
}

MosquittoMqttProtocol::~MosquittoMqttProtocol() { Stop(); }

bool MosquittoMqttProtocol::Start() {
  if (thread_.joinable()) return true;
  if (!SplitEndpoint(options_.config.endpoint, 8883, &host_, &port_)) return false;
  const std::string& client_id = options_.config.client_id;
  mosq_ = mosquitto_new(client_id.empty() ? nullptr : client_id.c_str(), true, this);
  if (mosq_ == nullptr) return false;
  mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
  mosquitto_threaded_set(mosq_, true);  // SendText publishes from other threads
  if (!options_.config.username.empty()) {
    mosquitto_username_pw_set(mosq_, options_.config.username.c_str(),
                              options_.config.password.empty() ? nullptr : options_.config.password.c_str());
  }
  if (port_ == 8883 || options_.tls) {
    const std::string& roots = TrustRootsFile();
    if (mosquitto_tls_set(mosq_, roots.empty() ? nullptr : roots.c_str(), roots.empty() ? "/etc/ssl/certs" : nullptr, nullptr,
                          nullptr, nullptr) != MOSQ_ERR_SUCCESS) {
      mosquitto_destroy(mosq_);
      mosq_ = nullptr;
      return false;
    }
  }
  mosquitto_connect_callback_set(mosq_, &MosquittoMqttProtocol::OnConnect);
  mosquitto_disconnect_callback_set(mosq_, &MosquittoMqttProtocol::OnDisconnect);
  mosquitto_message_callback_set(mosq_, &MosquittoMqttProtocol::OnMessage);
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void MosquittoMqttProtocol::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  wait_cv_.notify_all();
  thread_.join();
  mosquitto_destroy(mosq_);
  mosq_ = nullptr;
}

void MosquittoMqttProtocol::Loop() {
  while (!stopping_) {
    const uint64_t now = MonotonicMs();
    if (!socket_open_ && (!reconnect_.armed() || reconnect_.Due(now))) {
      const int rc = mosquitto_connect(mosq_, host_.c_str(), port_, options_.config.keepalive_s);
      if (rc == MOSQ_ERR_SUCCESS) {
        socket_open_ = true;  // CONNACK arrives through the loop
      } else {
        ReportError(std::string("mqtt connect failed: ") + mosquitto_strerror(rc));
        reconnect_.Failed(now);
      }
    }
    if (socket_open_) {
      const int rc = mosquitto_loop(mosq_, 100, 1);
      if (rc != MOSQ_ERR_SUCCESS) {
        socket_open_ = false;
        // Before CONNACK there is no connection to report closed (a TLS handshake fails here, not in
        // mosquitto_connect): report the failed attempt, as a refused TCP connect is.
        if (!connected()) ReportError(std::string("mqtt connect failed: ") + mosquitto_strerror(rc));
        HandleClosed(std::string("mqtt: ") + mosquitto_strerror(rc));
        reconnect_.Failed(MonotonicMs());
      }
      HelloOverdue(MonotonicMs());  // over MQTT a missing hello is only reported
    } else {
      std::unique_lock<std::mutex> lock(wait_mutex_);
      const uint64_t wait = reconnect_.due_ms() > now ? reconnect_.due_ms() - now : 0;
      wait_cv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stopping_.load(); });
    }
  }
  if (socket_open_) {
    HandleClosed("stopped");
    mosquitto_disconnect(mosq_);
    mosquitto_loop(mosq_, 100, 1);  // flush the DISCONNECT
    socket_open_ = false;
  }
}

void MosquittoMqttProtocol::OnConnect(mosquitto* mosq, void* self_ptr, int rc) {
  auto* self = static_cast<MosquittoMqttProtocol*>(self_ptr);
  if (rc != 0) {
    self->ReportError(std::string("mqtt connection refused: ") + mosquitto_connack_string(rc));
    mosquitto_disconnect(mosq);  // the loop sees the socket close and backs off
    return;
  }
  self->reconnect_.Succeeded();
  // The reference device subscribes to nothing (its broker pushes anyway);
  // subscribing to our own p2p topic makes a stock broker deliver too.
  mosquitto_subscribe(mosq, nullptr, self->subscribe_topic_.c_str(), 0);
  self->HandleOpen(MonotonicMs());
}

void MosquittoMqttProtocol::OnDisconnect(mosquitto*, void* self_ptr, int rc) {
  auto* self = static_cast<MosquittoMqttProtocol*>(self_ptr);
  self->HandleClosed(rc == 0 ? "disconnected" : "connection lost");
}

void MosquittoMqttProtocol::OnMessage(mosquitto*, void* self_ptr, const mosquitto_message* message) {
  // Every PUBLISH is handled whatever its topic: brokers like the reference
  // gateway push to devices that did not subscribe.
  auto* self = static_cast<MosquittoMqttProtocol*>(self_ptr);
  if (static_cast<size_t>(message->payloadlen) > kMaxIncomingMessageBytes) {
    self->ReportError("dropped a message larger than " + std::to_string(kMaxIncomingMessageBytes) + " bytes");
  } else if (message->payloadlen > 0) {
    self->HandleText(static_cast<const char*>(message->payload), static_cast<size_t>(message->payloadlen));
  }
}

bool MosquittoMqttProtocol::SendText(const std::string& text) {
  const int rc = mosquitto_publish(mosq_, nullptr, options_.config.publish_topic.c_str(),
                                   static_cast<int>(text.size()), text.data(), 0, false);
  return rc == MOSQ_ERR_SUCCESS;
}

}  // namespace voxgate
