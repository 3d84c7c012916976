// Host only: the PEM roots every TLS client in the process verifies servers
// against (wss://, MQTT over TLS, https OTA and firmware downloads), the host's
// stand-in for the certificate bundle built into the device. Empty (the
// default): the system store.
#pragma once

#include <string>

namespace voxgate {

// Set once, before any link, OTA request or download starts.
void SetTrustRootsFile(std::string pem_file);
const std::string& TrustRootsFile();

}  // namespace voxgate
