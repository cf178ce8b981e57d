// kiln store pull: an archive from a registry into a store, checked against the store's own
// trusted keys, added through the store's add path, and activated only if everything before
// succeeded. A failure anywhere leaves the store as it was (at most a temporary file that gc removes).
#pragma once

#include <string>

#include "registry/transfer.hpp"
#include "store/store.hpp"

namespace kiln::registry {

struct StorePullResult {
  FetchResult fetched;
  store::ArchiveInfo added;
  bool activated = false;
  bool already_active = false;  // asked to activate what was already active: nothing recorded
  store::HistoryEntry decision;  // when activated
  std::size_t attestations_kept = 0;
  std::vector<std::string> attestations_ignored;
};

// `options.trust` is ignored: the store's keys decide (threshold 1, as `kiln store add`). The
// archive's attestations in the registry are kept beside it (store::Store::attest) before it is
// activated, which `policy` (store::Store::activate) may then require.
StorePullResult pull_into_store(Client& client, const Reference& ref, store::Store& store, FetchOptions options,
                                bool activate, const std::string& who, const std::string& reason,
                                const store::AttestationPolicy& policy = {});

}  // namespace kiln::registry
