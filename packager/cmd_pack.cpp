// kiln pack.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_writer.hpp"
#include "pack_plan.hpp"
#include "progress.hpp"

namespace kiln::cli {

namespace {

// A second signature (kiln sign) is a decision someone made about the archive at `out`: packing
// over it with other keys must not drop it silently. Anything at `out` that is not a kiln archive,
// or one signed only by these keys (a rebuild), is replaced as before.
void refuse_to_drop_signatures(const std::string& out, const std::vector<PrivateKey>& keys) {
  std::unique_ptr<ArchiveReader> held;
  try {
    held = ArchiveReader::open_file(out, ReadOptions{});
  } catch (const Failure&) {
    return;  // absent, unreadable or not an archive: nothing signed to lose
  }
  std::string lost;
  for (const format::SignatureRecord& rec : held->signatures()) {
    bool ours = false;
    for (const PrivateKey& k : keys) ours = ours || k.public_key().key_id() == rec.attributes.key_id;
    if (!ours) lost += (lost.empty() ? "" : ", ") + ("key " + rec.attributes.key_id + " (signer '" + rec.attributes.signer + "')");
  }
  if (lost.empty()) return;
  fail(Errc::invalid_argument, out + " holds archive " + digest_string(held->digest()) + " signed by " + lost +
                                   ", which this pack does not sign with: packing over it would lose those signatures. "
                                   "Write elsewhere, or pass --force to replace it (kiln sign adds a key to an archive)");
}

}  // namespace

void add_pack_command(CLI::App& app) {
  struct Options {
    std::string manifest, out, signer, created;
    bool force = false;
    std::vector<std::string> keys;
    int level = 9;
    unsigned threads = default_threads();
    bool quiet = false;
    bool timings = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("pack", "Seal a kiln.toml and every file it names into one signed archive");
  cmd->add_option("manifest", o->manifest, "Path of kiln.toml; the files it names are relative to its folder")->required();
  cmd->add_option("--key,-k", o->keys, "PEM private key to sign with (repeat for several signers)")->required();
  cmd->add_option("--out,-o", o->out, "Archive to write (replaced atomically)")->required();
  cmd->add_option("--signer", o->signer, "Name recorded in the signature (default: the key file's name)");
  cmd->add_option("--created", o->created, "Signature time: 'now' or Unix seconds (default: SOURCE_DATE_EPOCH or 0)");
  cmd->add_option("--level,-l", o->level, "zstd level for every member")->check(CLI::Range(1, 22));
  cmd->add_option("--threads,-j", o->threads, "Members compressed in parallel")->check(CLI::Range(1u, 1024u));
  cmd->add_flag("--force", o->force,
                "Replace the archive at --out even where it carries signatures by keys this pack does not sign with "
                "(they are lost)");
  cmd->add_flag("--quiet,-q", o->quiet, "Print only the digest");
  cmd->add_flag("--timings", o->timings, "Print to stderr how long planning and writing took");
  cmd->callback([o] {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    const Clock::time_point start = Clock::now();
    PackPlan plan = plan_pack(o->manifest, o->threads);
    const Clock::time_point planned = Clock::now();
    const PackPlan::Timings plan_timings = plan.timings;
    for (const std::string& w : plan.warnings) std::cerr << "kiln pack: warning: " << w << "\n";

    std::vector<PrivateKey> keys;
    for (const std::string& path : o->keys) keys.push_back(PrivateKey::load_file(path));
    std::vector<Signer> signers;
    std::uint64_t created = signature_time(o->created);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::string name = !o->signer.empty() && keys.size() == 1 ? o->signer : default_signer_name(o->keys[i]);
      signers.push_back(Signer{&keys[i], name, created});
    }

    if (!o->force) refuse_to_drop_signatures(o->out, keys);

    std::uint64_t total = 0;
    for (const MemberInput& m : plan.members) total += m.size();
    std::size_t count = plan.members.size();
    Sha256 digest;
    WriteStats write_stats;
    {
      ProgressBar bar("packing", total);
      WriteOptions options{o->level, o->threads, bar.callback(), &write_stats};
      digest = write_archive_file(o->out, plan.identity, std::move(plan.members), signers, options);
    }
    if (o->timings) {
      // Planning: the manifest's kernels parsed, every input opened, mapped and its code
      // object read on -j threads, the toolchain probe beside them; writing: -j workers
      // compressing, hashing and writing each member at its offset, then the index and fsync.
      const PackPlan::Timings& t = plan_timings;
      // The first line keeps the form earlier releases printed (tests/gpu/RESULTS.md quotes it).
      std::fprintf(stderr, "kiln pack: plan %.3f s (%zu members read and checked), write %.3f s (-j %u, incl. fsync)\n",
                   seconds(start, planned), count, seconds(planned, Clock::now()), o->threads);
      std::fprintf(stderr,
                   "kiln pack: plan: manifest %.3f s, inputs %.3f s, kernel table %.3f s, toolchain probe %.3f s beside "
                   "them (%.3f s waited for); write: fsync %.3f s\n",
                   t.parse, t.inputs, t.table, t.probe, t.probe_wait, write_stats.sync_seconds);
    }
    if (o->quiet) {
      std::cout << digest_string(digest) << "\n";
      return;
    }
    std::cout << "packed " << o->out << ": " << plan.identity.package << " " << plan.identity.kernel_revision
              << " (sequence " << plan.identity.sequence << "), " << plan.manifest.kernels.size() << " kernel(s), "
              << count << " members, " << human_size(total) << " of content\n"
              << "digest " << digest_string(digest) << "\n";
  });
}

}  // namespace kiln::cli
