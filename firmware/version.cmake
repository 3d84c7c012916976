# Reads version.txt into VOXGATE_FIRMWARE_VERSION and refuses anything but
# MAJOR.MINOR.PATCH in digits: the xiaozhi firmware and the gateway parse each
# dot-separated part as a number (std::stoi, built without exceptions, aborts
# on "v1.0.0" or "1.0.0-beta.rc"). Included by the IDF project and the host build.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/version.txt" VOXGATE_FIRMWARE_VERSION LIMIT_COUNT 1)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/version.txt")
if(NOT VOXGATE_FIRMWARE_VERSION MATCHES "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$")
  message(FATAL_ERROR "firmware/version.txt: \"${VOXGATE_FIRMWARE_VERSION}\" is not MAJOR.MINOR.PATCH in digits")
endif()
