// libFuzzer target: kiln.toml text through the manifest parser (toml++ then kiln's own rules).
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "core/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kiln::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const kiln::Failure&) {
  }
  return 0;
}
