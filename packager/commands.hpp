// Each subcommand of `kiln` registers itself on the application here; its work runs in
// the CLI11 callback and reports failure by throwing kiln::Failure.
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_keygen_command(CLI::App& app);
void add_pack_command(CLI::App& app);
void add_sign_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_attest_command(CLI::App& app);
void add_trust_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_extract_command(CLI::App& app);
void add_digest_command(CLI::App& app);
void add_preflight_command(CLI::App& app);
void add_diag_command(CLI::App& app);
void add_store_command(CLI::App& app);
// In a kiln built with registry support (KILN_REGISTRY, libcurl) only.
void add_push_command(CLI::App& app);
void add_pull_command(CLI::App& app);
void add_store_pull_command(CLI::App* store);

}  // namespace kiln::cli
