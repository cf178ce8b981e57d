#include "engine/kernel_abi.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.hpp"

namespace kiln::engine {

using kiln::Errc;
using kiln::Failure;

namespace {

constexpr std::int64_t kMaxTensorDim = std::int64_t{1} << 32;
constexpr std::int64_t kMaxTensorStride = std::int64_t{1} << 40;
// Scratch beyond this is refused before it reaches the allocator (and keeps size + align and the
// doubling in the pool far from overflow).
constexpr std::uint64_t kMaxScratchBytes = std::uint64_t{1} << 40;

std::atomic<std::uint64_t> g_next_abi_id{1};

// The last parameter list this thread built, and what went into it. Every entry of a build is a
// pure function of the call's parameter bytes (expressions read only the call; a tensor map is
// the pointer and the evaluated dims and strides), so equal bytes give an equal build: a server
// launching the same kernel on the same tensors again skips the expressions and the cache's lock.
struct LastBuild {
  std::uint64_t abi = 0;  // 0: none
  std::uint64_t key[KernelAbi::kMemoParams] = {};
  std::uint64_t values[KernelAbi::kMemoEntries] = {};
  alignas(128) unsigned char maps[KernelAbi::kMemoMaps][kTensorMapBytes] = {};
};
thread_local LastBuild t_last_build;

// Evaluates a decoded expression over the call; false on a fault.
bool evaluate(const std::vector<ExprInstr>& code, void* const* call, std::int64_t* out, ExprFault* fault) {
  if (code.size() == 1 && code[0].op == op::konst) {
    *out = code[0].imm;
    return true;
  }
  if (code.size() == 1 && code[0].op == op::param) {  // "m": the commonest tensor map dimension
    *out = read_scalar_integer(call[code[0].param], code[0].type);
    return true;
  }
  *fault = eval_instrs(code.data(), code.size(), call, out);
  return *fault == ExprFault::none;
}

// The driver's name for a status; a bare number without a backend (benchmarks).
std::string describe(const backend::Backend* backend, int status) {
  return backend != nullptr ? backend->describe_error(status) : "driver status " + std::to_string(status);
}

}  // namespace

KernelAbi::KernelAbi(const KernelSpec& kernel) : kernel_(kernel.name) {
  if (kernel.kernel_args.empty()) return;
  params_ = kernel.params;
  args_ = kernel.kernel_args;
  std::size_t maps = 0, scratch = 0;
  for (const KernelArg& a : args_) {
    Entry e;
    e.kind = a.kind;
    switch (a.kind) {
      case KernelArgKind::param: e.param = a.param; break;
      case KernelArgKind::value:
        e.type = a.type;
        e.value = decode_expr(a.value, params_);
        break;
      case KernelArgKind::tensor_map:
        e.slot = maps++;
        for (const ExprCode& c : a.tensor_map.dims) e.dims.push_back(decode_expr(c, params_));
        for (const ExprCode& c : a.tensor_map.strides) e.strides.push_back(decode_expr(c, params_));
        break;
      case KernelArgKind::scratch:
        e.slot = scratch++;
        e.value = decode_expr(a.scratch.bytes, params_);
        break;
    }
    entries_.push_back(std::move(e));
  }
  caches_ = std::make_unique<MapCache[]>(maps == 0 ? 1 : maps);
  map_count_ = maps;
  // No expression reads a float parameter: a call that changes only those is the same build.
  for (const KernelParam& p : params_) {
    param_bytes_.push_back(p.is_pointer ? sizeof(void*) : is_float_type(p.type) ? 0 : scalar_type_size(p.type));
  }
  memo_ = scratch == 0 && params_.size() <= kMemoParams && entries_.size() <= kMemoEntries && maps <= kMemoMaps;
  id_ = g_next_abi_id.fetch_add(1, std::memory_order_relaxed);
}

void KernelAbi::memo_key(void* const* call, std::uint64_t* key) const {
  // Sizes spelled out so that each copy is one load, not a call to memcpy.
  for (std::size_t i = 0; i < param_bytes_.size(); ++i) {
    switch (param_bytes_[i]) {
      case 1: { std::uint8_t v; std::memcpy(&v, call[i], 1); key[i] = v; break; }
      case 2: { std::uint16_t v; std::memcpy(&v, call[i], 2); key[i] = v; break; }
      case 4: { std::uint32_t v; std::memcpy(&v, call[i], 4); key[i] = v; break; }
      case 8: std::memcpy(&key[i], call[i], 8); break;
      default: key[i] = 0; break;  // a float: not read by any entry
    }
  }
}

void KernelAbi::fail_value(const KernelArg& arg, const std::string& what) const {
  throw Failure(Errc::invalid_argument, "kernel '" + kernel_ + "': kernel_args entry '" + arg.name + "': " + what);
}

unsigned KernelAbi::build(void* const* call, const LaunchConfig& launch, void* stream, const backend::Code& code,
                          const backend::Backend* backend, Frame* frame) const {
  if (!memo_) return build_entries(call, launch, stream, code, backend, frame);
  std::uint64_t key[kMemoParams];
  memo_key(call, key);
  LastBuild& last = t_last_build;
  const std::size_t n = param_bytes_.size();
  bool same = last.abi == id_;
  for (std::size_t i = 0; same && i < n; ++i) same = last.key[i] == key[i];
  if (same) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      switch (e.kind) {
        case KernelArgKind::param: frame->args[i] = call[e.param]; break;
        case KernelArgKind::value:
          frame->values[i] = last.values[i];
          frame->args[i] = &frame->values[i];
          break;
        case KernelArgKind::tensor_map:
          std::memcpy(frame->maps[e.slot], last.maps[e.slot], kTensorMapBytes);
          frame->args[i] = frame->maps[e.slot];
          break;
        case KernelArgKind::scratch: break;  // never memoised
      }
    }
    return 0;
  }
  // A build that throws leaves the memo as it was: only a complete build is remembered.
  unsigned encoded = build_entries(call, launch, stream, code, backend, frame);
  last.abi = id_;
  std::copy(key, key + n, last.key);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].kind == KernelArgKind::value) last.values[i] = frame->values[i];
  }
  for (std::size_t m = 0; m < map_count_; ++m) std::memcpy(last.maps[m], frame->maps[m], kTensorMapBytes);
  return encoded;
}

unsigned KernelAbi::build_entries(void* const* call, const LaunchConfig& launch, void* stream, const backend::Code& code,
                                  const backend::Backend* backend, Frame* frame) const {
  unsigned encoded = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const KernelArg& arg = args_[i];
    switch (e.kind) {
      case KernelArgKind::param:
        frame->args[i] = call[e.param];
        break;
      case KernelArgKind::value: {
        std::int64_t v = 0;
        ExprFault fault = ExprFault::none;
        if (!evaluate(e.value, call, &v, &fault)) {
          fail_value(arg, "'" + expr_text(arg.value, params_) + "' faults: " + expr_fault_text(fault));
        }
        std::int64_t lo = 0, hi = 0;
        computed_value_bounds(e.type, &lo, &hi);
        if (v < lo || v > hi) {
          fail_value(arg, "'" + expr_text(arg.value, params_) + "' = " + std::to_string(v) + " does not fit " +
                              scalar_type_name(e.type));
        }
        // The value's own bytes (little-endian: the low bytes of the 64-bit slot).
        frame->values[i] = 0;
        std::memcpy(&frame->values[i], &v, scalar_type_size(e.type));
        frame->args[i] = &frame->values[i];
        break;
      }
      case KernelArgKind::tensor_map:
        encoded += build_tensor_map(e, arg, call, code, backend, frame->maps[e.slot]) ? 1 : 0;
        frame->args[i] = frame->maps[e.slot];
        break;
      case KernelArgKind::scratch: {
        std::int64_t per = 0;
        ExprFault fault = ExprFault::none;
        if (!evaluate(e.value, call, &per, &fault)) {
          fail_value(arg, "bytes '" + expr_text(arg.scratch.bytes, params_) + "' faults: " + expr_fault_text(fault));
        }
        std::uint64_t bytes = per < 0 ? 0 : static_cast<std::uint64_t>(per);
        bool overflow = per < 0;
        for (int d = 0; d < 3 && arg.scratch.per_program; ++d) {
          overflow = overflow || __builtin_mul_overflow(bytes, std::uint64_t{launch.grid[d]}, &bytes);
        }
        if (overflow || bytes > kMaxScratchBytes) {
          fail_value(arg, "scratch of " + std::to_string(per) + " bytes" + (arg.scratch.per_program ? " per program" : "") +
                              " is negative or more than 2^40 bytes for this launch");
        }
        std::uint64_t address = 0;
        if (int r = code.scratch(e.slot, bytes, arg.scratch.align, stream, &address); r != 0) {
          throw Failure(Errc::driver, "kernel '" + kernel_ + "': kernel_args entry '" + arg.name + "': allocating " +
                                        std::to_string(bytes) + " bytes of scratch failed (driver status " +
                                        std::to_string(r) + ")");
        }
        frame->values[i] = address;
        frame->args[i] = &frame->values[i];
        break;
      }
    }
  }
  return encoded;
}

bool KernelAbi::build_tensor_map(const Entry& e, const KernelArg& arg, void* const* call, const backend::Code& code,
                                 const backend::Backend* backend, void* out) const {
  const TensorMapRecipe& r = arg.tensor_map;
  TensorMapRequest request;
  request.recipe = &r;
  std::memcpy(&request.address, call[r.pointer], sizeof request.address);
  // The driver encodes a NULL base without complaint and the kernel then faults on the GPU: a
  // call that passes NULL for the tensor is refused here, by name.
  if (request.address == 0) {
    fail_value(arg, "the address of '" + params_[r.pointer].name + "' is NULL; a tensor map needs the tensor's memory");
  }
  const std::uint64_t align = r.interleave == 2 ? 32 : 16;
  if (request.address % align != 0) {
    fail_value(arg, "the address of '" + params_[r.pointer].name + "' is not " + std::to_string(align) +
                        "-byte aligned, as a tensor map needs");
  }
  ExprFault fault = ExprFault::none;
  // Texts for errors are built only on the failing path: this runs at every launch.
  auto where = [&](const char* what, std::size_t d, const ExprCode& text) {
    return std::string(what) + "[" + std::to_string(d) + "] '" + expr_text(text, params_) + "'";
  };
  for (std::size_t d = 0; d < e.dims.size(); ++d) {
    std::int64_t v = 0;
    if (!evaluate(e.dims[d], call, &v, &fault)) fail_value(arg, where("dims", d, r.dims[d]) + " faults: " + expr_fault_text(fault));
    if (v < 1 || v > kMaxTensorDim) fail_value(arg, where("dims", d, r.dims[d]) + " = " + std::to_string(v) + " is outside 1..2^32");
    request.dims[d] = static_cast<std::uint64_t>(v);
  }
  for (std::size_t d = 0; d < e.strides.size(); ++d) {
    std::int64_t v = 0;
    if (!evaluate(e.strides[d], call, &v, &fault)) {
      fail_value(arg, where("strides", d, r.strides[d]) + " faults: " + expr_fault_text(fault));
    }
    if (v < 16 || v >= kMaxTensorStride || v % 16 != 0) {
      fail_value(arg, where("strides", d, r.strides[d]) + " = " + std::to_string(v) + " bytes is not a multiple of 16 in 16..2^40-16");
    }
    request.strides[d] = static_cast<std::uint64_t>(v);
  }
  std::uint64_t key[10] = {request.address};
  std::memcpy(key + 1, request.dims, sizeof request.dims);
  std::memcpy(key + 6, request.strides, sizeof request.strides);

  MapCache& cache = caches_[e.slot];
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const MapCache::Item& item : cache.items) {
    if (item.used && std::memcmp(item.key, key, sizeof key) == 0) {
      std::memcpy(out, item.map, kTensorMapBytes);
      return false;
    }
  }
  MapCache::Item& item = cache.items[cache.next];
  if (int status = code.encode_tensor_map(request, item.map); status != 0) {
    item.used = false;
    std::string dims;
    for (std::size_t d = 0; d < e.dims.size(); ++d) dims += (d ? "," : "") + std::to_string(request.dims[d]);
    throw Failure(Errc::driver, "kernel '" + kernel_ + "': kernel_args entry '" + arg.name +
                                  "': cuTensorMapEncodeTiled refused dims (" + dims + ") of '" + params_[r.pointer].name +
                                  "': " + describe(backend, status));
  }
  item.used = true;
  std::memcpy(item.key, key, sizeof key);
  cache.next = (cache.next + 1) % MapCache::kEntries;
  std::memcpy(out, item.map, kTensorMapBytes);
  return true;
}

}  // namespace kiln::engine
