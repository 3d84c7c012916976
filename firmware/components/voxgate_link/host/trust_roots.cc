#include "trust_roots.h"

#include <utility>

namespace voxgate {
namespace {

std::string& Roots() {
  static std::string roots;
  return roots;
}

}  // namespace

void SetTrustRootsFile(std::string pem_file) { Roots() = std::move(pem_file); }

const std::string& TrustRootsFile() { return Roots(); }

}  // namespace voxgate
