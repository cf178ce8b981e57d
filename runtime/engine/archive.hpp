// engine::Archive: an opened, authenticated archive and the kernels resolved from it,
// one per (kernel, device), created on first request and kept until the archive closes.
// archive.cpp keeps the kernels; resolve.cpp chooses their code; preflight.cpp reports them;
// diagnostics.cpp writes the bundle of a failed load or launch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/attestation_facts.hpp"
#include "engine/kernel.hpp"
#include "kiln/kiln.h"

namespace kiln::engine {

class Runtime;
struct Candidate;  // resolve.cpp's

// A code member a kernel names: its entry (the record's copy, or the index's) and, where it was
// looked up in the index, its position there (-1 otherwise).
struct CodeMember {
  long position = -1;
  const kiln::format::Entry* entry = nullptr;
};

// The engine's archive; the C API's kiln_archive wraps it (runtime/api/handles.hpp).
class Archive {
 public:
  // Opens from a file (mapped) or from bytes this archive owns. follow_links = false for a
  // store's archives (ReadOptions::follow_links).
  Archive(Runtime& runtime, const std::string& path, bool follow_links = true);
  Archive(Runtime& runtime, std::vector<std::uint8_t> bytes);
  ~Archive();

  Runtime& runtime() { return runtime_; }
  const Runtime& runtime() const { return runtime_; }
  const kiln::ArchiveReader& reader() const { return *reader_; }
  const std::string& digest() const { return digest_; }

  // The resolved kernel, created and resolved on first request. Thread-safe.
  Kernel* kernel(const std::string& name, int device);
  // Resolves every kernel for `device`, in parallel.
  void warm(int device);
  // preflight.cpp: every kernel resolved for `device` (code loaded, nothing launched), as the
  // JSON document kiln.h describes at kiln_archive_preflight (what `kiln preflight --json` prints).
  std::string preflight_json(int device);
  // preflight.cpp: every kernel judged for a GPU described rather than present (described_target.hpp:
  // "sm_80", "gfx90a:xnack-"; `driver` a CUDA version or ""), by the same resolver, as JSON.
  // Resolves nothing for the real devices and keeps nothing.
  std::string preflight_target_json(const std::string& target, const std::string& driver);
  // The members the routes of every kernel would read on a described target, in index positions:
  // the code each loads and its variants' code for the same entry, and code the resolver reads to
  // judge it (PTX, when no native code fits). Judged on the index, so it works on a sparse archive
  // that holds no code yet: what a sparse pull for that target must fetch.
  std::vector<std::size_t> code_for_target(const std::string& target, const std::string& driver);
  // The same for every GPU of this host (CUDA and HIP ordinals from 0 up to the first that neither
  // has); `found` receives each device's description. Errc::not_found when there is none.
  std::vector<std::size_t> code_for_host(std::vector<std::string>* found);
  // Takes an attestation of this archive (kiln.h, kiln_archive_add_attestation): verified with
  // the runtime's attestation keys, its subject this archive, every test passed; else throws
  // naming `what`. Thread-safe; kernels resolved afterwards count it.
  void add_attestation(const std::string& envelope, const std::string& what);
  // Writes a diagnostic bundle for a failed load or launch of `k`, if a directory is set.
  void diagnose(const Kernel& k, const std::string& event, const std::string& target, const std::string& member,
                int cuda_error, const std::string& error, const std::string& call);

 private:
  struct Slot {
    std::size_t record = 0;  // the index position of the kernel's record
    std::mutex resolving;    // held while this kernel resolves for this device
    std::unique_ptr<Kernel> kernel;
  };
  // resolve.cpp: choosing, loading and explaining a kernel's code on one device.
  void resolve(Kernel& k);
  void resolve(Kernel& k, const kiln::backend::BackendList& backends);
  // The member each of k's code references names, in the manifest's order, once checked.
  std::vector<CodeMember> check_code_references(const Kernel& k) const;
  // The member `ref` (of k, or of its variant v) names; Errc::integrity where the index has none.
  CodeMember code_member(const kiln::CodeObjectRef& ref, const Kernel& k, const kiln::VariantSpec* v) const;
  // Its position in the index (looked up where the record's copy gave its entry): what planning
  // a sparse pull names.
  std::size_t position(const CodeMember& m) const;
  // Its bytes as read_member checks them, against the entry it was found by; whether they are in
  // the file (a sparse archive's may not be).
  std::vector<std::uint8_t> read_code(const CodeMember& m) const;
  bool code_present(const CodeMember& m) const;
  void resolve_on(kiln::backend::Backend& backend, Kernel& k, const std::vector<CodeMember>& code_members);
  bool load_first(kiln::backend::Backend& backend, Kernel& k, const kiln::backend::DeviceInfo& device,
                  std::vector<kiln::engine::Candidate>& candidates,
                  const std::vector<kiln::engine::Candidate>& rejected, std::string* failures);
  std::string load_variants(kiln::backend::Backend& backend, Kernel& k, const kiln::backend::DeviceInfo& device,
                            const kiln::engine::Candidate& chosen);
  void settle_without_code(Kernel& k, kiln_reason reason, const std::string& text);
  // Why no attestation this archive holds covers `device` ("" when one does).
  std::string attestation_gap(const kiln::backend::DeviceInfo& device) const;
  kiln::ReadOptions read_options() const;
  // preflight.cpp: every kernel resolved in planning mode on `device` of these backends.
  std::vector<std::size_t> planned_code(const kiln::backend::BackendList& backends, int device);

  Runtime& runtime_;
  std::vector<std::uint8_t> owned_bytes_;
  std::unique_ptr<kiln::ArchiveReader> reader_;
  std::string digest_;
  mutable std::mutex attestations_mutex_;
  std::vector<kiln::AttestationFacts> attestations_;
  std::mutex slots_mutex_;
  std::map<std::pair<std::string, int>, std::unique_ptr<Slot>> slots_;  // by kernel name and device
};

}  // namespace kiln::engine
