// engine::Package: a package's active archive in a store, swapped atomically on reload.
// Each launch takes a reference to the generation it starts on (a shared_ptr loaded
// atomically), so a reload never frees kernels a call is still using.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/archive.hpp"
#include "kiln/kiln.h"

namespace kiln::engine {

// The engine's package; the C API's kiln_package wraps it (runtime/api/handles.hpp).
class Package {
 public:
  // `witness`: a head of the package's history kept elsewhere (64 hex digits), or "" for none.
  // With one, the package opens and each reload switches only while the store's history still
  // holds it (Store::check_witness): a consistently rewritten history is refused.
  Package(Runtime& runtime, std::string store_dir, std::string package, int device, std::string witness = "");

  bool reload();  // true when it switched; throws and keeps the current one on failure
  Runtime& runtime() { return runtime_; }
  std::string digest() const;
  kiln_route launch(const std::string& kernel, void* const* args, std::size_t arg_count, void* stream);

 private:
  struct Generation {
    std::unique_ptr<Archive> archive;
    std::unordered_map<std::string, Kernel*> kernels;  // resolved and warmed before use
  };
  // The active digest and the sequence the store's history records for it.
  struct Active {
    std::string digest;
    std::uint64_t sequence = 0;
  };
  std::shared_ptr<const Generation> load(const Active& active);
  Active active() const;

  Runtime& runtime_;
  std::string store_dir_, package_;
  int device_;
  std::string witness_;
  std::mutex reload_mutex_;                 // one reload at a time
  std::shared_ptr<const Generation> current_;  // read and written with std::atomic_load/store
};

}  // namespace kiln::engine
