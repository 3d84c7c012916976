#!/usr/bin/env bash
# Builds the host side of the firmware and runs its tests.
# Works from any directory; fails (never skips) when a dependency is missing.
set -euo pipefail

HOST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_DIR="${HOST_DIR}/build"
INSTALL_HINT="apt-get install -y cmake g++ libcjson-dev libgtest-dev libwebsockets-dev libmosquitto-dev mosquitto"

missing=()
command -v cmake >/dev/null 2>&1 || missing+=("cmake")
command -v g++ >/dev/null 2>&1 || missing+=("g++")
# The MQTT link test runs against a real broker; without it that test would only be skipped.
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || missing+=("mosquitto")
header_present() { [ -f "/usr/include/$1" ] || [ -f "/usr/local/include/$1" ]; }
header_present cjson/cJSON.h || missing+=("libcjson-dev (cjson/cJSON.h)")
header_present gtest/gtest.h || missing+=("libgtest-dev (gtest/gtest.h)")
header_present libwebsockets.h || missing+=("libwebsockets-dev (libwebsockets.h)")
header_present mosquitto.h || missing+=("libmosquitto-dev (mosquitto.h)")

if [ "${#missing[@]}" -gt 0 ]; then
  echo "firmware/host/test.sh: FAILED: missing build dependencies: ${missing[*]}" >&2
  echo "Install them with:" >&2
  echo "  ${INSTALL_HINT}" >&2
  exit 1
fi

cmake -S "${HOST_DIR}" -B "${BUILD_DIR}"
cmake --build "${BUILD_DIR}" -j2
ctest --test-dir "${BUILD_DIR}" --output-on-failure
