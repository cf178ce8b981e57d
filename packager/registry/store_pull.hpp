// kiln store pull: an archive from a registry into a store, checked against the store's own
// trusted keys, added through the store's add path, and activated only if everything before
// succeeded. A failure anywhere leaves the store as it was (at most a temporary file that gc removes).
#pragma once

#include <string>

#include "store.hpp"
#include "transfer.hpp"

namespace kiln::registry {

struct StorePullResult {
  FetchResult fetched;
  store::ArchiveInfo added;
  bool activated = false;
  bool already_active = false;  // asked to activate what was already active: nothing recorded
  store::HistoryEntry decision;  // when activated
};

// `options.trust` is ignored: the store's keys decide (threshold 1, as `kiln store add`).
StorePullResult pull_into_store(Client& client, const Reference& ref, store::Store& store, FetchOptions options,
                                bool activate, const std::string& who, const std::string& reason);

}  // namespace kiln::registry
