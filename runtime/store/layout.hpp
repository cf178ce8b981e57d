// What names a store's folder and its format: shared by the store and its migration.
#pragma once

#include <cstdint>

namespace kiln::store {

constexpr const char* kStoreFile = "store.toml";
constexpr const char* kStoreHeader = "# kiln store, format 2. Do not edit: use `kiln store`.\nformat = 2\ntrust = \"trust\"\n";
constexpr const char* kFormat1Header = "# kiln store, format 1. Do not edit: use `kiln store`.\nformat = 1\ntrust = \"trust\"\n";
constexpr std::uint64_t kMaxStateFile = 64ull << 20;

}  // namespace kiln::store
