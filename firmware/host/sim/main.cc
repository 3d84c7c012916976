// voxgate-device-sim: K simulated devices in one process, talking to a
// gateway over WebSocket or MQTT. Events go to stdout as JSON lines; commands
// come from stdin (`notify <method> <json-params>`, `quit`).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cJSON.h"
#include "event_log.h"
#include "lws_loop.h"
#include "sim_device.h"
#include "sim_firmware.h"
#include "trust_roots.h"
#include "voxgate/device_identity.h"
#include "voxgate/ota_client.h"

namespace {

const char kUsage[] =
    "usage: voxgate-device-sim (--ws URL | --mqtt HOST:PORT | --ota URL) [options]\n"
    "  --ws URL                 WebSocket endpoint, e.g. ws://127.0.0.1:8000/xiaozhi/v1/\n"
    "  --mqtt HOST:PORT         MQTT broker\n"
    "  --mqtt-username U        MQTT username\n"
    "  --mqtt-password P        MQTT password\n"
    "  --mqtt-tls               MQTT over TLS on any port (the device uses TLS for port 8883 only)\n"
    "  --ca-file PEM            trust these roots for every TLS connection: wss://, MQTT over TLS, https OTA\n"
    "                           and firmware downloads (default: the system store)\n"
    "  --mqtt-client-id ID      MQTT client id of the first device (default GID_voxgate@@@<mac_>@@@<uuid>)\n"
    "  --ota URL                ask the gateway's OTA endpoint (http://host:8000/xiaozhi/ota/) where to connect;\n"
    "                           --ws/--mqtt given as well take precedence. Each device keeps the answer (in\n"
    "                           memory, or --firmware-dir), presents its credentials on the next check and keeps\n"
    "                           them when an answer leaves them out; an `activation` answer prints the code\n"
    "                           (event \"activation\") and polls <URL>/activate until an operator approves\n"
    "  --activation-poll-ms MS  poll interval while the activation is pending (default 3000; 10/3 of it\n"
    "                           after any other answer, as the device's 3 s / 10 s)\n"
    "  --device-id MAC          first device's MAC (default 02:00:00:00:00:01); the others count up\n"
    "  --client-id UUID         first device's client id (default: derived from its MAC)\n"
    "  --token T                WebSocket bearer token\n"
    "  --tools N                N extra synthetic tools (default 0)\n"
    "  --page-budget BYTES      tools/list page budget (default 8000)\n"
    "  --tool-latency-ms MS     each synthetic tool takes MS to answer (default 0)\n"
    "  --count K                devices in this process (default 1)\n"
    "  --reconnect-max-ms MS    cap of the reconnect backoff (default 5000; the device uses 30000)\n"
    "  --firmware-version V     the factory firmware version (default " VOXGATE_FIRMWARE_VERSION
    ", firmware/version.txt): OTA request, serverInfo\n"
    "  --firmware-dir DIR       the devices' flash: per device DIR/<mac_>/{link.json,otadata.json,ota_0.bin,ota_1.bin};\n"
    "                           update over the air:\n"
    "                           a newer offered version is downloaded, verified, booted (a simulated reboot)\n"
    "                           and kept once it answered initialize (needs --ota)\n"
    "  --confirm-deadline-ms MS a new image not initialized by then is rolled back (default 600000)\n"
    "  --broken-version V       an image of version V never brings its link up (to exercise the rollback)\n";

volatile std::sig_atomic_t g_signalled = 0;

void OnSignal(int) { g_signalled = 1; }

struct Flags {
  std::string ws, mqtt, mqtt_username, mqtt_password, mqtt_client_id, ota, token;
  std::string device_id = "02:00:00:00:00:01";
  std::string client_id;
  int tools = 0;
  size_t page_budget = 8000;
  uint32_t tool_latency_ms = 0;
  int count = 1;
  uint32_t reconnect_max_ms = 5000;
  uint32_t activation_poll_ms = 3000;
  std::string firmware_version = VOXGATE_FIRMWARE_VERSION;  // firmware/version.txt
  std::string firmware_dir;
  uint64_t confirm_deadline_ms = voxgate::kDefaultConfirmDeadlineMs;
  std::string broken_version;
  bool mqtt_tls = false;
  std::string ca_file;
};

[[noreturn]] void Usage(const std::string& problem) {
  fprintf(stderr, "voxgate-device-sim: %s\n%s", problem.c_str(), kUsage);
  exit(2);
}

long Number(const char* flag, const char* text, long min, long max) {
  char* end = nullptr;
  const long value = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < min || value > max) Usage(std::string("bad value for ") + flag);
  return value;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (flag == "--mqtt-tls") {
      f.mqtt_tls = true;
      continue;
    }
    if (i + 1 >= argc) Usage("missing value for " + flag);
    const char* value = argv[++i];
    if (flag == "--ws") f.ws = value;
    else if (flag == "--mqtt") f.mqtt = value;
    else if (flag == "--mqtt-username") f.mqtt_username = value;
    else if (flag == "--mqtt-password") f.mqtt_password = value;
    else if (flag == "--mqtt-client-id") f.mqtt_client_id = value;
    else if (flag == "--ota") f.ota = value;
    else if (flag == "--ca-file") f.ca_file = value;
    else if (flag == "--device-id") f.device_id = value;
    else if (flag == "--client-id") f.client_id = value;
    else if (flag == "--token") f.token = value;
    else if (flag == "--tools") f.tools = static_cast<int>(Number("--tools", value, 0, 100000));
    else if (flag == "--page-budget") f.page_budget = static_cast<size_t>(Number("--page-budget", value, 1, 1 << 24));
    else if (flag == "--tool-latency-ms") f.tool_latency_ms = static_cast<uint32_t>(Number("--tool-latency-ms", value, 0, 3600000));
    else if (flag == "--count") f.count = static_cast<int>(Number("--count", value, 1, 10000));
    else if (flag == "--reconnect-max-ms") f.reconnect_max_ms = static_cast<uint32_t>(Number("--reconnect-max-ms", value, 100, 3600000));
    else if (flag == "--activation-poll-ms") f.activation_poll_ms = static_cast<uint32_t>(Number("--activation-poll-ms", value, 10, 600000));
    else if (flag == "--firmware-version") f.firmware_version = value;
    else if (flag == "--firmware-dir") f.firmware_dir = value;
    else if (flag == "--confirm-deadline-ms") f.confirm_deadline_ms = static_cast<uint64_t>(Number("--confirm-deadline-ms", value, 1, 86400000));
    else if (flag == "--broken-version") f.broken_version = value;
    else Usage("unknown flag " + flag);
  }
  if (f.ws.empty() && f.mqtt.empty() && f.ota.empty()) Usage("one of --ws, --mqtt or --ota is required");
  if (!f.ws.empty() && !f.mqtt.empty()) Usage("--ws and --mqtt are exclusive");
  if (!f.firmware_dir.empty() && f.ota.empty()) Usage("--firmware-dir needs --ota (the offer comes from the OTA answer)");
  std::string mac;
  if (!voxgate::NormalizeMac(f.device_id, &mac)) Usage("--device-id is not a MAC address");
  f.device_id = mac;
  return f;
}

// A stable client id per MAC, so a restarted simulator is the same device.
std::string DerivedUuid(const std::string& mac, int index) {
  uint8_t bytes[16];
  uint32_t h = 2166136261u;
  for (char c : mac) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  for (int i = 0; i < 16; ++i) {
    h = (h ^ static_cast<uint32_t>(i + index * 31)) * 16777619u;
    bytes[i] = static_cast<uint8_t>(h >> 24);
  }
  return voxgate::UuidFromBytes(bytes);
}

void RunCommand(const std::string& line, std::vector<std::unique_ptr<sim::SimDevice>>& devices, bool* quit) {
  const size_t start = line.find_first_not_of(" \t\r");
  if (start == std::string::npos) return;
  const std::string text = line.substr(start);
  if (text == "quit" || text == "quit\r") {
    *quit = true;
    return;
  }
  if (text.compare(0, 7, "notify ") == 0) {
    const std::string rest = text.substr(7);
    const size_t space = rest.find(' ');
    const std::string method = rest.substr(0, space);
    const std::string params_text = space == std::string::npos ? "" : rest.substr(space + 1);
    cJSON* params = nullptr;
    if (params_text.find_first_not_of(" \t\r") != std::string::npos) {
      params = cJSON_Parse(params_text.c_str());
      if (!cJSON_IsObject(params) && !cJSON_IsArray(params)) {
        cJSON_Delete(params);
        cJSON* f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "message", "notify: params must be a JSON object or array");
        sim::Emit("error", "", f);
        return;
      }
    }
    if (method.empty()) {
      cJSON_Delete(params);
      return;
    }
    for (auto& device : devices) {
      if (device) device->Notify(method, params ? cJSON_Duplicate(params, true) : nullptr);
    }
    cJSON_Delete(params);
    return;
  }
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "message", ("unknown command: " + text).c_str());
  sim::Emit("error", "", f);
}

// One device's flash and firmware: its stored link config (the last OTA
// answer, credentials included), its slots, and the update logic of its
// current boot.
struct Firmware {
  std::unique_ptr<voxgate::ConfigStore> link_store;
  std::unique_ptr<sim::HostSlots> slots;
  std::shared_ptr<sim::FirmwareBoot> boot;
};

uint64_t NowMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Waits `ms`; false as soon as the process is asked to stop.
bool WaitUnlessSignalled(uint32_t ms) {
  const uint64_t until = NowMs() + ms;
  while (!g_signalled) {
    const uint64_t now = NowMs();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint64_t>(50, until - now)));
  }
  return false;
}

void EmitActivation(const std::string& device, voxgate::ActivationState state, const voxgate::OtaActivation& a) {
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "state", voxgate::ActivationStateName(state));
  if (state == voxgate::ActivationState::kCode) {  // what a board shows and speaks
    cJSON_AddStringToObject(f, "code", a.code.c_str());
    cJSON_AddStringToObject(f, "message", a.message.c_str());
    cJSON_AddNumberToObject(f, "timeout_ms", a.timeout_ms);
  }
  sim::Emit("activation", device, f);
}

// The device's OTA check, as the firmware runs it: the answer applied over
// the stored config (whose credentials it presents), the activation when
// asked, the result stored. When it fails, the last good config is served.
bool AskOta(const Flags& flags, const sim::DeviceOptions& options, voxgate::ConfigStore& store,
            voxgate::LinkConfig* link) {
  voxgate::OtaClientOptions ota;
  ota.url = flags.ota;
  ota.identity = options.identity;
  ota.info.app_version = options.app_version;
  ota.pending_poll_ms = flags.activation_poll_ms;
  ota.retry_poll_ms = flags.activation_poll_ms / 3 * 10;  // the device's 3 s pending / 10 s otherwise
  voxgate::OtaClient client(ota, NowMs, WaitUnlessSignalled);
  const std::string device = options.identity.mac;
  client.SetActivationHandler([&device](voxgate::ActivationState state, const voxgate::OtaActivation& a) {
    EmitActivation(device, state, a);
  });
  voxgate::LinkConfig stored;
  const bool has_stored = voxgate::LoadLinkConfig(store, &stored);
  std::string error;
  if (client.Fetch(stored, link, &error)) {
    if (!voxgate::SaveLinkConfig(store, *link)) error = "could not store the link config";
    else return true;
  }
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "message", ("ota: " + error).c_str());
  sim::Emit("error", device, f);
  if (!has_stored) return false;
  *link = stored;  // boot recovery: the last good config
  return true;
}

// Boots device `i`: asks the OTA endpoint (with the running firmware version)
// where to connect, builds the device, and starts its firmware logic. The
// link is started by the caller. Null when the device cannot start.
std::unique_ptr<sim::SimDevice> Boot(const Flags& flags, int i, const std::shared_ptr<voxgate::LwsLoop>& loop, Firmware* fw) {
  sim::DeviceOptions options;
  options.identity.mac = voxgate::OffsetMac(flags.device_id, static_cast<uint32_t>(i));
  options.identity.uuid = i == 0 && !flags.client_id.empty() ? flags.client_id : DerivedUuid(options.identity.mac, i);
  options.extra_tools = flags.tools;
  options.tool_latency_ms = flags.tool_latency_ms;
  options.page_budget = flags.page_budget;
  options.seed = 0x5eed0000u + static_cast<uint32_t>(i) * 7919u;
  options.reconnect_max_ms = flags.reconnect_max_ms;
  options.mqtt_tls = flags.mqtt_tls;

  options.app_version = fw->slots ? fw->slots->running_version() : flags.firmware_version;
  voxgate::LinkConfig& link = options.link;
  if (!flags.ota.empty() && !AskOta(flags, options, *fw->link_store, &link) && flags.ws.empty() && flags.mqtt.empty()) {
    return nullptr;
  }
  if (!flags.ws.empty()) {
    link.has_mqtt = false;
    link.has_websocket = true;
    link.websocket.url = flags.ws;
    if (!flags.token.empty()) link.websocket.token = flags.token;
  } else if (!flags.mqtt.empty()) {
    link.has_websocket = false;
    link.has_mqtt = true;
    link.mqtt.endpoint = flags.mqtt;
    if (!flags.mqtt_username.empty()) link.mqtt.username = flags.mqtt_username;
    if (!flags.mqtt_password.empty()) link.mqtt.password = flags.mqtt_password;
    if (i == 0 && !flags.mqtt_client_id.empty()) link.mqtt.client_id = flags.mqtt_client_id;
  } else if (link.has_mqtt) {
    link.has_websocket = false;  // as the reference firmware: an mqtt section wins
  }
  if (link.has_mqtt && (link.mqtt.client_id.empty() || (i > 0 && !flags.mqtt.empty()))) {
    link.mqtt.client_id = voxgate::MqttClientId("voxgate", options.identity);
  }
  if (link.has_mqtt && link.mqtt.endpoint.find(':') == std::string::npos && !flags.mqtt.empty()) {
    link.mqtt.endpoint += ":1883";
  }

  std::shared_ptr<sim::FirmwareBoot> boot;
  if (fw->slots) {
    sim::FirmwareBootOptions boot_options;
    boot_options.device_id = options.identity.mac;
    boot_options.link = link;
    boot_options.confirm_deadline_ms = flags.confirm_deadline_ms;
    boot = std::make_shared<sim::FirmwareBoot>(std::move(boot_options), fw->slots.get());
    options.on_mcp_handled = [boot](const std::string& payload) { boot->OnMcpHandled(payload); };
  }
  std::unique_ptr<sim::SimDevice> device(new sim::SimDevice(std::move(options), loop));
  if (boot) {
    fw->boot = boot;
    boot->Start(device.get());
  }
  return device;
}

// A simulated bad build: it boots but never brings its link up.
bool Broken(const Flags& flags, const Firmware& fw) {
  return fw.slots && !flags.broken_version.empty() && fw.slots->running_version() == flags.broken_version;
}

// Starts the link of a booted device (unless its image is the broken one).
bool StartLink(const Flags& flags, sim::SimDevice& device, const Firmware& fw) {
  if (Broken(flags, fw)) return true;
  if (device.Start()) return true;
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "message", "could not start the link (bad URL or endpoint?)");
  sim::Emit("error", device.id(), f);
  return false;
}

// The simulated reboot after a slot switch: the old boot's logic and link
// stop, and the device boots again from the slots (a new OTA request).
bool Reboot(const Flags& flags, int i, const std::shared_ptr<voxgate::LwsLoop>& loop, Firmware* fw,
            std::unique_ptr<sim::SimDevice>* device) {
  fw->boot->Stop();
  (*device)->Stop();
  device->reset();
  fw->boot.reset();
  cJSON* f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "state", "rebooting");
  cJSON_AddStringToObject(f, "version", fw->slots->running_version().c_str());
  sim::Emit("firmware", voxgate::OffsetMac(flags.device_id, static_cast<uint32_t>(i)), f);
  *device = Boot(flags, i, loop, fw);
  return *device && StartLink(flags, **device, *fw);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  voxgate::SetTrustRootsFile(flags.ca_file);
  auto loop = std::make_shared<voxgate::LwsLoop>();
  if (!loop->ok()) {
    fprintf(stderr, "voxgate-device-sim: could not create the libwebsockets context\n");
    return 1;
  }

  std::vector<std::unique_ptr<sim::SimDevice>> devices;
  std::vector<Firmware> firmware(static_cast<size_t>(flags.count));
  for (int i = 0; i < flags.count; ++i) {
    const std::string mac = voxgate::OffsetMac(flags.device_id, static_cast<uint32_t>(i));
    if (!flags.firmware_dir.empty()) {
      std::string dir_name = mac;
      for (char& c : dir_name) c = c == ':' ? '_' : c;
      const std::string dir = flags.firmware_dir + "/" + dir_name;
      firmware[i].slots.reset(new sim::HostSlots(dir, flags.firmware_version));
      if (!firmware[i].slots->Load()) {
        fprintf(stderr, "voxgate-device-sim: cannot use %s\n", dir.c_str());
        return 1;
      }
      firmware[i].link_store.reset(new voxgate::FileConfigStore(dir + "/link.json"));
    } else {
      firmware[i].link_store.reset(new voxgate::MemoryConfigStore());
    }
    std::unique_ptr<sim::SimDevice> device = Boot(flags, i, loop, &firmware[i]);
    if (!device) return 1;
    devices.push_back(std::move(device));
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!StartLink(flags, *devices[i], firmware[i])) return 1;
  }

  // stdin on its own thread so signals stay responsive; EOF leaves the
  // devices running (a harness may close stdin) until a signal or `quit`.
  std::atomic<bool> quit{false};
  std::mutex devices_mutex;  // the input thread must not use devices being torn down
  std::thread input([&] {
    std::string line;
    while (!quit && std::getline(std::cin, line)) {
      std::lock_guard<std::mutex> lock(devices_mutex);
      if (quit) break;
      bool stop = false;
      RunCommand(line, devices, &stop);
      if (stop) quit = true;
    }
  });
  input.detach();  // it may sit in getline forever; the process ends without it
  int status = 0;
  while (!quit && !g_signalled) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!firmware[i].boot || !firmware[i].boot->reboot_requested()) continue;
      std::lock_guard<std::mutex> lock(devices_mutex);
      if (!Reboot(flags, static_cast<int>(i), loop, &firmware[i], &devices[i])) {
        quit = true;
        status = 1;
        break;
      }
    }
  }

  std::lock_guard<std::mutex> lock(devices_mutex);
  quit = true;
  for (auto& fw : firmware) {
    if (fw.boot) fw.boot->Stop();
  }
  for (auto& device : devices) {
    if (device) device->Stop();
  }
  devices.clear();
  return status;
}
