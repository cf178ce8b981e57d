// The kernel's own parameter list, built from a call at every launch (MANIFEST.md,
// kernel_args): the call's parameters passed through, integer scalars computed from the call,
// CUtensorMaps encoded from a pointer and the call's sizes (cached, so that repeated launches on
// the same tensors never re-encode), and scratch memory from the device's pool. Everything lives
// in a Frame on the launching thread's stack: nothing is allocated per launch.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/launch_config.hpp"
#include "core/manifest.hpp"
#include "core/shape_expr.hpp"

namespace kiln::engine {

class KernelAbi {
 public:
  KernelAbi() = default;
  explicit KernelAbi(const KernelSpec& kernel);
  // Built in place and never copied or moved: its id names it in each thread's memo of the last
  // build, and a second object with the same id would be answered with the first one's.
  KernelAbi(const KernelAbi&) = delete;
  KernelAbi& operator=(const KernelAbi&) = delete;

  // True when the kernel takes the call's parameters as they are (no kernel_args).
  bool passes_call() const { return entries_.empty(); }

  // Storage for one launch's parameters.
  struct Frame {
    void* args[kMaxKernelArgs];
    alignas(128) unsigned char maps[kMaxTensorMaps][kTensorMapBytes];  // as CUDA 13 aligns CUtensorMap
    std::uint64_t values[kMaxKernelArgs];
  };
  // Fills frame->args for `call` (one pointer per call parameter) and its launch. Throws
  // kiln::Failure naming the kernel and the entry: invalid_argument for a value the call makes
  // invalid (a fault, a size out of range, a misaligned pointer), driver for a driver refusal.
  // Returns how many tensor maps it encoded (cache misses).
  // `backend` names driver statuses in errors (null: the number alone).
  unsigned build(void* const* call, const LaunchConfig& launch, void* stream, const backend::Code& code, const backend::Backend* backend,
                 Frame* frame) const;

  // The per-thread memo of the last build (below) answers a call whose parameters hold the same
  // bytes as that build's when the kernel has at most this many parameters, entries and tensor
  // maps, and no scratch (whose address depends on the pool, not on the call alone).
  static constexpr std::size_t kMemoParams = 8, kMemoEntries = 16, kMemoMaps = 4;

 private:
  struct Entry {
    KernelArgKind kind = KernelArgKind::param;
    std::size_t param = 0;               // param
    ScalarType type = ScalarType::i64;   // value
    std::vector<ExprInstr> value;        // value; scratch: the bytes
    std::size_t slot = 0;                // tensor_map: its cache and frame slot; scratch: its pool slot
    std::vector<std::vector<ExprInstr>> dims, strides;  // tensor_map
  };
  // Recently encoded maps of one tensor map entry, keyed by the pointer and the evaluated
  // dims and strides. A handful of entries covers a server cycling through a few tensors.
  struct MapCache {
    static constexpr std::size_t kEntries = 8;
    struct Item {
      bool used = false;
      std::uint64_t key[10] = {};
      alignas(128) unsigned char map[kTensorMapBytes] = {};
    };
    std::mutex mutex;
    Item items[kEntries];
    std::size_t next = 0;
  };

  [[noreturn]] void fail_value(const KernelArg& arg, const std::string& what) const;
  unsigned build_entries(void* const* call, const LaunchConfig& launch, void* stream, const backend::Code& code,
                         const backend::Backend* backend, Frame* frame) const;
  // The call's parameters as the memo compares them: each one's own bytes, zero-extended.
  void memo_key(void* const* call, std::uint64_t* key) const;
  // True when it encoded (a cache miss).
  bool build_tensor_map(const Entry& e, const KernelArg& arg, void* const* call, const backend::Code& code,
                        const backend::Backend* backend, void* out) const;

  std::string kernel_;
  std::vector<KernelParam> params_;  // the call's, for expression texts in errors
  std::vector<KernelArg> args_;      // the stored entries, for recipes and names
  std::vector<Entry> entries_;
  std::unique_ptr<MapCache[]> caches_;
  std::vector<std::size_t> param_bytes_;  // per call parameter: how many of its bytes the memo compares
  std::size_t map_count_ = 0;
  bool memo_ = false;
  std::uint64_t id_ = 0;  // names this parameter list in the per-thread memo (never reused)
};

}  // namespace kiln::engine
