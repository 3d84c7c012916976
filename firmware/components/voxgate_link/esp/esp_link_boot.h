// ESP only: where to connect at boot, wired the same way for every app on
// this component (firmware/main and examples/link_with_tools): the OTA check
// (OtaClient, blocking with vTaskDelay) with boot recovery (LinkResolver over
// the NVS store: the last good answer or the fallback is served at once when
// the request fails, and the request is retried with backoff and jitter), and
// the transport for the answer.
//
// Use from app_main, once (it must outlive the link: make it static):
//   static voxgate::EspLinkBoot boot(options);
//   const voxgate::LinkConfig& link = boot.Resolve();        // blocks only while there is nothing to serve
//   static auto protocol = boot.CreateProtocol(link.has_mqtt);
//   main loop: if (!protocol->connected() && boot.Moved()) esp_restart();
#pragma once

#include <memory>
#include <string>

#include "esp_protocols.h"
#include "voxgate/link_resolver.h"
#include "voxgate/ota_client.h"

namespace voxgate {

struct EspLinkBootOptions {
  OtaClientOptions ota;                   // url, identity, system info
  LinkConfig fallback;                    // served when the OTA request fails and nothing is stored
  OtaClient::OnActivation on_activation;  // show the activation code (optional)
  LinkResolver::Log log;                  // the resolver's lines (optional)
};

class EspLinkBoot {
 public:
  explicit EspLinkBoot(EspLinkBootOptions options);
  EspLinkBoot(const EspLinkBoot&) = delete;
  EspLinkBoot& operator=(const EspLinkBoot&) = delete;

  // Blocks until there is a config to connect with.
  const LinkConfig& Resolve();
  const LinkConfig& link() const { return link_; }
  // The transport: MQTT (with a client id derived from the identity when the
  // answer names none) or WebSocket.
  std::unique_ptr<EspProtocol> CreateProtocol(bool mqtt);
  // From the main loop while the link is down, after Resolve: asks the OTA
  // endpoint again when a retry is due; true when the answer moved this device
  // (the caller restarts with it).
  bool Moved();

 private:
  EspLinkBootOptions options_;
  std::unique_ptr<ConfigStore> store_;
  OtaClient ota_;
  LinkResolver resolver_;
  LinkConfig link_;
};

}  // namespace voxgate
