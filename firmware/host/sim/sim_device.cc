#include "sim_device.h"

#include "board_tools.h"
#include "cJSON.h"
#include "event_log.h"
#include "lws_websocket_protocol.h"
#include "mcp/jsonrpc.h"
#include "mosquitto_mqtt_protocol.h"
#include "synthetic_tools.h"

namespace sim {
namespace {

cJSON* Fields() { return cJSON_CreateObject(); }

void AddId(cJSON* fields, const cJSON* id) {
  if (id) cJSON_AddItemToObject(fields, "id", cJSON_Duplicate(id, false));
}

}  // namespace

SimDevice::SimDevice(DeviceOptions options, std::shared_ptr<voxgate::LwsLoop> loop)
    : options_(std::move(options)),
      board_([this] {
        // A simulated reboot only reports itself; the link stays up.
        cJSON* f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "direction", "local");
        cJSON_AddStringToObject(f, "type", "reboot");
        Emit("notification", id(), f);
      }),
      server_(mcp::ServerOptions{"voxgate-device-sim", options_.app_version, options_.page_budget, {}}) {
  RegisterBoardTools(server_, board_);
  AddSyntheticTools(server_, options_.extra_tools, options_.tool_latency_ms);

  if (options_.link.has_mqtt) {
    voxgate::MqttOptions mqtt;
    mqtt.config = options_.link.mqtt;
    mqtt.identity = options_.identity;
    mqtt.seed = options_.seed;
    mqtt.backoff_initial_ms = 250;
    mqtt.backoff_max_ms = options_.reconnect_max_ms;
    mqtt.tls = options_.mqtt_tls;
    link_.reset(new voxgate::MosquittoMqttProtocol(mqtt));
  } else {
    voxgate::WebSocketOptions ws;
    ws.url = options_.link.websocket.url;
    ws.token = options_.link.websocket.token;
    ws.identity = options_.identity;
    ws.seed = options_.seed;
    ws.backoff_initial_ms = 250;
    ws.backoff_max_ms = options_.reconnect_max_ms;
    link_.reset(new voxgate::LwsWebSocketProtocol(std::move(loop), ws));
  }

  const std::string device = id();
  voxgate::ProtocolEvents events;
  events.on_connected = [this, device] {
    cJSON* f = Fields();
    cJSON_AddStringToObject(f, "transport", link_->transport() == voxgate::Transport::kMqtt ? "mqtt" : "websocket");
    Emit("connected", device, f);
  };
  events.on_hello = [device](const std::string& session_id) {
    cJSON* f = Fields();
    cJSON_AddStringToObject(f, "session_id", session_id.c_str());
    Emit("hello", device, f);
  };
  events.on_mcp = [this](const std::string& payload) { OnIncoming(payload); };
  events.on_frame = [device](const std::string& type, const std::string&) {
    cJSON* f = Fields();
    cJSON_AddStringToObject(f, "direction", "in");
    cJSON_AddStringToObject(f, "type", type.c_str());
    Emit("notification", device, f);
  };
  events.on_closed = [device](const std::string& reason) {
    cJSON* f = Fields();
    cJSON_AddStringToObject(f, "reason", reason.c_str());
    Emit("closed", device, f);
  };
  events.on_error = [device](const std::string& message) {
    cJSON* f = Fields();
    cJSON_AddStringToObject(f, "message", message.c_str());
    Emit("error", device, f);
  };
  link_->SetEvents(std::move(events));
  server_.SetSender([this](const std::string& payload) { OnOutgoing(payload, link_->SendMcp(payload)); });
}

SimDevice::~SimDevice() { Stop(); }

bool SimDevice::Start() { return link_->Start(); }

void SimDevice::Stop() { link_->Stop(); }

void SimDevice::Notify(const std::string& method, cJSON* params) { server_.Notify(method.c_str(), params); }

void SimDevice::OnIncoming(const std::string& payload) {
  mcp::jsonrpc::Message message = mcp::jsonrpc::Message::Parse(payload);
  cJSON* f = Fields();
  if (message.kind() == mcp::jsonrpc::Kind::kRequest) {
    AddId(f, message.id());
    cJSON_AddStringToObject(f, "method", message.method());
    Emit("request", id(), f);
  } else if (message.kind() == mcp::jsonrpc::Kind::kNotification) {
    cJSON_AddStringToObject(f, "direction", "in");
    cJSON_AddStringToObject(f, "method", message.method());
    Emit("notification", id(), f);
  } else {
    cJSON_Delete(f);
  }
  server_.ParseMessage(payload);
  if (options_.on_mcp_handled) options_.on_mcp_handled(payload);
}

void SimDevice::OnOutgoing(const std::string& payload, bool sent) {
  cJSON* root = cJSON_Parse(payload.c_str());
  cJSON* f = Fields();
  if (!sent) cJSON_AddBoolToObject(f, "dropped", true);  // the link was down
  const cJSON* method = cJSON_GetObjectItemCaseSensitive(root, "method");
  if (cJSON_IsString(method)) {
    cJSON_AddStringToObject(f, "direction", "out");
    cJSON_AddStringToObject(f, "method", method->valuestring);
    const cJSON* params = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (params) cJSON_AddItemToObject(f, "params", cJSON_Duplicate(params, true));
    Emit("notification", id(), f);
  } else {
    AddId(f, cJSON_GetObjectItemCaseSensitive(root, "id"));
    const cJSON* error = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON* result = cJSON_GetObjectItemCaseSensitive(root, "result");
    if (error) {
      cJSON_AddItemToObject(f, "error", cJSON_Duplicate(error, true));
    } else {
      const cJSON* is_error = cJSON_GetObjectItemCaseSensitive(result, "isError");
      if (cJSON_IsBool(is_error)) cJSON_AddBoolToObject(f, "isError", cJSON_IsTrue(is_error));
      const cJSON* tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
      if (cJSON_IsArray(tools)) cJSON_AddNumberToObject(f, "tools", cJSON_GetArraySize(tools));
      const cJSON* cursor = cJSON_GetObjectItemCaseSensitive(result, "nextCursor");
      if (cJSON_IsString(cursor)) cJSON_AddStringToObject(f, "nextCursor", cursor->valuestring);
    }
    cJSON_AddNumberToObject(f, "bytes", static_cast<double>(payload.size()));
    Emit("reply", id(), f);
  }
  cJSON_Delete(root);
}

}  // namespace sim
