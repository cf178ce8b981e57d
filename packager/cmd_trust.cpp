// kiln trust: make, read and check trust files (schema/SECURITY.md, "Trust files"): the root's
// signed list of release and attestation keys, their validity, revocations, version and expiry.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>

#include <unistd.h>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/dsse.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "trust_toml.hpp"

namespace kiln::cli {
namespace {

std::uint64_t now() { return static_cast<std::uint64_t>(std::time(nullptr)); }

std::string window(const TrustedKey& k) {
  if (k.not_before == 0 && k.not_after == 0) return "while the file is valid";
  return (k.not_before != 0 ? "from " + utc_text(k.not_before) : std::string("")) +
         (k.not_before != 0 && k.not_after != 0 ? " " : "") + (k.not_after != 0 ? "until " + utc_text(k.not_after) : "");
}

void show(const TrustDocument& d, const std::string& file) {
  std::printf("%s: trust version %llu, expires %s%s\n", file.c_str(), static_cast<unsigned long long>(d.version),
              utc_text(d.expires).c_str(), now() >= d.expires ? " (EXPIRED)" : "");
  std::printf("  root: %u of %zu key(s):", d.root_threshold, d.root_keys.size());
  for (const PublicKey& k : d.root_keys) std::printf(" %s", k.key_id().c_str());
  std::printf("\n");
  for (const TrustedKey& k : d.keys) {
    std::string roles;
    for (const std::string& r : k.roles) roles += (roles.empty() ? "" : ",") + r;
    std::printf("  key %s  %-19s %s\n", k.key.key_id().c_str(), roles.c_str(), window(k).c_str());
  }
  for (const RevokedKey& r : d.revoked) std::printf("  revoked %s: %s\n", r.key_id.c_str(), r.reason.c_str());
}

}  // namespace

void add_trust_command(CLI::App& app) {
  struct Options {
    std::string source, file, out, previous;
    std::vector<std::string> keys;
    bool force = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* trust = app.add_subcommand("trust", "Make and check trust files: the root's signed list of keys that can change");
  trust->require_subcommand(1);

  CLI::App* sign = trust->add_subcommand("sign", "Sign a trust file's TOML source with root keys (SECURITY.md, Trust files)");
  sign->add_option("source", o->source, "The source: version, expires, [root], [[key]], [[revoked]]")->required();
  sign->add_option("--key", o->keys, "A root private key (repeat for a threshold above 1)")->required();
  sign->add_option("-o,--output", o->out, "Where to write the trust file")->required();
  sign->add_flag("--force", o->force, "Replace an existing output file");
  sign->callback([o] {
    TrustDocument doc = read_trust_source(o->source);
    std::vector<PrivateKey> keys;
    for (const std::string& k : o->keys) keys.push_back(PrivateKey::load_file(k));
    std::vector<const PrivateKey*> signers;
    for (const PrivateKey& k : keys) signers.push_back(&k);
    std::string envelope = dsse_envelope_json(kTrustPayloadType, trust_payload_json(doc), signers);
    // What a reader will check, checked before anything is written: the root's threshold met.
    verify_trust_file(envelope, o->out, 0);
    if (!o->force && ::access(o->out.c_str(), F_OK) == 0) {
      fail(Errc::invalid_argument, o->out + " exists: replacing a trust file is a decision (--force)");
    }
    replace_file_durably(o->out, envelope, 0644);
    std::printf("wrote %s: trust version %llu, expires %s, signed by %zu root key(s)\n", o->out.c_str(),
                static_cast<unsigned long long>(doc.version), utc_text(doc.expires).c_str(), signers.size());
  });

  CLI::App* show_cmd = trust->add_subcommand("show", "Print a trust file: root, keys and roles, revocations, expiry");
  show_cmd->add_option("file", o->file, "The trust file")->required();
  show_cmd->callback([o] {
    // Its own root's signatures are checked; its expiry is shown, not enforced (to read an old one).
    show(verify_trust_file(read_small_file(o->file, kMaxTrustFileBytes), o->file, 0), o->file);
  });

  CLI::App* verify = trust->add_subcommand("verify", "Check a trust file as a node would take it (signatures, expiry, rotation)");
  verify->add_option("file", o->file, "The trust file")->required();
  verify->add_option("--previous", o->previous, "The trust file held now: the new one must be newer and signed by its root");
  verify->callback([o] {
    TrustDocument previous;
    if (!o->previous.empty()) {
      previous = verify_trust_file(read_small_file(o->previous, kMaxTrustFileBytes), o->previous, 0);
    }
    TrustDocument d = verify_trust_file(read_small_file(o->file, kMaxTrustFileBytes), o->file, now(),
                                        o->previous.empty() ? nullptr : &previous);
    std::printf("%s: trust version %llu holds: signed by its root%s, valid until %s\n", o->file.c_str(),
                static_cast<unsigned long long>(d.version), o->previous.empty() ? "" : " and by the previous root",
                utc_text(d.expires).c_str());
  });
}

}  // namespace kiln::cli
