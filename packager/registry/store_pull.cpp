#include "registry/store_pull.hpp"

#include "core/attestation_facts.hpp"
#include "core/file_io.hpp"

namespace kiln::registry {


StorePullResult pull_into_store(Client& client, const Reference& ref, store::Store& store, FetchOptions options,
                                bool activate, const std::string& who, const std::string& reason,
                                const store::AttestationPolicy& policy) {
  StorePullResult r;
  options.trust = &store.trust();
  options.threshold = 1;
  {
    // Downloaded beside the store's archives, under a temporary name (".tmp-" + 128 random
    // bits) that every store reader ignores and `kiln store gc` removes if kiln is killed here.
    AtomicFileWriter download(store.dir() + "/archives/pull.kiln", 0644);
    r.fetched = fetch_archive(client, ref, download, options);
    // The store's own add path: copied again, verified again (the bytes stored are the bytes
    // verified), renamed to its digest. The download is removed as this scope ends.
    r.added = store.add(download.temp_path());
  }
  FetchedAttestations found = fetch_attestations(client, r.fetched.manifest_digest, r.added.digest);
  for (const std::string& envelope : found.envelopes) {
    store.attest(r.added.digest, envelope, attestation_summary(read_attestation(envelope, "an attestation")), who);
    ++r.attestations_kept;
  }
  r.attestations_ignored = std::move(found.ignored);
  if (activate) {
    // Pulling the active archive again is not a decision: nothing is recorded.
    if (store.state(r.added.package).active == r.added.digest) {
      r.already_active = true;
    } else {
      r.decision = store.activate(r.added.digest, who, reason, policy);
      r.activated = true;
    }
  }
  return r;
}

}  // namespace kiln::registry
