// kiln keygen, kiln sign.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_writer.hpp"
#include "core/ed25519.hpp"
#include "core/file_io.hpp"

namespace kiln::cli {

void add_keygen_command(CLI::App& app) {
  auto prefix = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("keygen", "Create an Ed25519 signing key: PREFIX.key (0600) and PREFIX.pub");
  cmd->add_option("--out,-o", *prefix, "Path prefix of the two PEM files")->required();
  cmd->callback([prefix] {
    PrivateKey key = PrivateKey::generate();
    std::string key_path = *prefix + ".key", pub_path = *prefix + ".pub";
    write_new_file(key_path, key.to_pem(), 0600);
    write_new_file(pub_path, key.public_key().to_pem(), 0644);
    std::cout << "wrote " << key_path << " (private, mode 0600) and " << pub_path << "\n"
              << "key id " << key.public_key().key_id() << "\n";
  });
}

void add_sign_command(CLI::App& app) {
  struct Options {
    std::string file, key, signer, created;
    unsigned threads = default_threads();
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("sign", "Add a signature to an archive; its digest does not change");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--key,-k", o->key, "PEM private key (from kiln keygen)")->required();
  cmd->add_option("--signer", o->signer, "Name recorded in the signature (default: the key file's name)");
  cmd->add_option("--created", o->created, "Signature time: 'now' or Unix seconds (default: SOURCE_DATE_EPOCH or 0)");
  cmd->add_option("--threads,-j", o->threads, "Threads for checking member digests")->check(CLI::Range(1u, 1024u));
  cmd->callback([o] {
    PrivateKey key = PrivateKey::load_file(o->key);
    Signer signer{&key, o->signer.empty() ? default_signer_name(o->key) : o->signer, signature_time(o->created)};
    format::SignatureRecord rec = add_signature_to_file(o->file, signer, o->threads);
    std::cout << "signed " << o->file << " (" << digest_string(rec.attributes.archive_digest) << ") as '"
              << rec.attributes.signer << "', key " << rec.attributes.key_id << "\n";
  });
}

}  // namespace kiln::cli
