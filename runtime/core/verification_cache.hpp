// A process-wide memo of Ed25519 verifications that succeeded, so that opening an archive
// this process has already authenticated costs no second signature check (~55 us each).
//
// What is remembered is the SHA-256 of the exact inputs of one verification: the raw public
// key, the signature and the signed message. Ed25519 verification is a pure function of those
// three, so a hit returns what verifying again would return; nothing about files, paths or
// trust sets is cached. The archive's digest is recomputed from the file's bytes on every
// open and the signed attributes name it, so a file changed on disk yields another message and
// misses; a key removed from a trust set is never asked about; failures are not remembered.
// Fooling the memo needs a SHA-256 collision, which the archive format already excludes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/ed25519.hpp"

namespace kiln {

// The digest that names one verification's inputs.
struct VerificationKey {
  std::array<std::uint8_t, 32> bytes;
};
VerificationKey verification_key(const Ed25519PublicRaw& key, const Ed25519Signature& signature,
                                 const std::uint8_t* message, std::size_t size);

// true when these exact inputs verified before in this process.
bool verified_before(const VerificationKey& key);
// Records a verification that succeeded; the oldest record goes once the memo holds
// kVerificationCacheCapacity of them.
void remember_verified(const VerificationKey& key);
constexpr std::size_t kVerificationCacheCapacity = 4096;

// Forgets every record: for benchmarks that must time first opens, and for tests.
void clear_verification_cache();

}  // namespace kiln
