#!/usr/bin/env bash
# Reproduces the footprint numbers in firmware/README.md:
#  1. code size of components/mcp_server for an ESP32-C3-like RISC-V core
#     (rv32imc, -Os, no exceptions, no RTTI), from `size` on the objects;
#  2. peak heap of building one tools/list page over 60 tools (host, counted
#     with replaced operator new/delete and cJSON malloc hooks);
#  3. stack used by the link worker, tool worker and button paths (host, a
#     painted thread stack, as uxTaskGetStackHighWaterMark measures on FreeRTOS).
# Works from any directory. Needs the host build's packages (see test.sh) and,
# for (1): apt-get install -y gcc-riscv64-unknown-elf libnewlib-dev libstdc++-arm-none-eabi-dev
set -euo pipefail

HOST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIRMWARE_DIR="$(cd "${HOST_DIR}/.." && pwd)"
MCP_DIR="${FIRMWARE_DIR}/components/mcp_server"
BUILD_DIR="${HOST_DIR}/build"
OUT_DIR="${BUILD_DIR}/rv32"

echo "== 1. mcp_server code size, rv32imc -Os -fno-exceptions -fno-rtti"
CXX=riscv64-unknown-elf-g++
# Debian's bare-metal RISC-V GCC ships without a C or C++ library. newlib's C
# headers (libnewlib-dev) and the libstdc++ headers configured for bare-metal
# ARM (libstdc++-arm-none-eabi-dev, the same GCC 12 release) stand in for
# ESP-IDF's riscv32-esp-elf newlib + libstdc++. Only compiling is needed.
NEWLIB_INC=/usr/include/newlib
CXX_INC="$(ls -d ${NEWLIB_INC}/c++/*/ 2>/dev/null | head -n1 || true)"
if ! command -v "${CXX}" >/dev/null 2>&1 || [ ! -f "${NEWLIB_INC}/stdlib.h" ] || [ -z "${CXX_INC}" ]; then
  echo "measure.sh: FAILED: the RISC-V size needs a cross compiler and headers:" >&2
  echo "  apt-get install -y gcc-riscv64-unknown-elf libnewlib-dev libstdc++-arm-none-eabi-dev" >&2
  exit 1
fi
CXX_INC="${CXX_INC%/}"
FLAGS=(-std=c++17 -march=rv32imc -mabi=ilp32 -Os -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti
       -nostdinc++ -isystem "${CXX_INC}" -isystem "${CXX_INC}/arm-none-eabi" -isystem "${NEWLIB_INC}"
       -I/usr/include/cjson -I"${MCP_DIR}/include" -I"${MCP_DIR}/src")
mkdir -p "${OUT_DIR}"
objects=()
for src in "${MCP_DIR}"/src/*.cc; do
  obj="${OUT_DIR}/$(basename "${src}" .cc).o"
  "${CXX}" "${FLAGS[@]}" -c "${src}" -o "${obj}"
  objects+=("${obj}")
done
riscv64-unknown-elf-size -t "${objects[@]}" | sed "s|${OUT_DIR}/||"
# One relocatable object: template code instantiated in several files is kept once.
riscv64-unknown-elf-ld -m elf32lriscv -r -o "${OUT_DIR}/mcp_server_combined.o" "${objects[@]}"
echo "-- combined (ld -r, duplicate template instances merged):"
riscv64-unknown-elf-size "${OUT_DIR}/mcp_server_combined.o" | sed "s|${OUT_DIR}/||"
echo "(excludes platform/freertos/platform_freertos.cc, which needs FreeRTOS headers,"
echo " cJSON itself, and out-of-line libstdc++ code resolved at link time)"

echo
echo "== 2. peak heap of one tools/list page over 60 tools (host, x86-64)"
cmake -S "${HOST_DIR}" -B "${BUILD_DIR}" >/dev/null
cmake --build "${BUILD_DIR}" -j2 --target voxgate-measure-heap >/dev/null
"${BUILD_DIR}/voxgate-measure-heap" 60 8000

echo
echo "== 3. stack used by the device's task paths (host, x86-64; painted-stack high water mark)"
cmake --build "${BUILD_DIR}" -j2 --target voxgate-measure-stack >/dev/null
"${BUILD_DIR}/voxgate-measure-stack" 60
