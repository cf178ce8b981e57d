// One interface for every GPU vendor libkiln runs on, on its own floor: the vendors (runtime/cuda,
// runtime/hip) implement it and the engine uses it, and neither includes the other's headers
// for it. The engine asks a Backend for a device, has it judge each code object's target tag
// against that device, loads the best fit through it and launches the loaded code; which code
// object wins, in what order the rest are tried, and how the route is explained is decided once,
// in engine/resolve.cpp, for all vendors. engine/backends.cpp lists the implementations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "core/format.hpp"
#include "core/kernel_table.hpp"
#include "core/launch_config.hpp"
#include "kiln/kiln.h"

namespace kiln::backend {

// Why a backend has no device of an ordinal: its library (driver, runtime) is missing, or it has
// fewer devices.
enum class Unavailable { none, no_driver, no_device };

// A device as reasons, logs and diagnostic bundles describe it, whatever its vendor.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;            // "NVIDIA H200", "AMD Instinct MI210"
  std::string describe;        // "device 0 'NVIDIA H200' (cc 9.0, driver 13.0)"
  std::string arch;            // what code must target: "sm_90", "gfx90a:sramecc+:xnack-"
  std::string driver_version;  // "13.0"; the HIP runtime's version for AMD
  int cc_major = 0, cc_minor = 0;  // CUDA's compute capability; 0 elsewhere
  // The backend's own record of this device, which it set when it described the device: its
  // calls taking this description reach the record without a lookup. Null for a described
  // target, which has no device behind it.
  const void* native = nullptr;
};

// A backend's verdict on one target tag of a code object, for one device.
struct TagFit {
  bool recognised = false;     // the tag is this backend's at all (sm_90a for CUDA, gfx90a for HIP)
  bool needs_content = false;  // judging needs the code object's verified bytes (PTX: its ISA version)
  bool fits = false;
  bool driver_too_old = false; // the architecture fits, the driver is too old for it
  bool jit = false;            // the route is a JIT compile (PTX), not native code
  int rank = 0;                // among fitting tags, higher is tried first
  std::string why;             // "exact match", "runs on cc 8.0 up to 8.x, device is cc 9.0"
};

// Loaded code for one kernel on one device. Destroying it unloads it.
class Code {
 public:
  virtual ~Code() = default;
  // Launches on `stream` on the code's device (with config.cluster when it has one); returns
  // the driver's status (0 is success), leaving the calling thread's current device or
  // context as it found it.
  virtual int launch(const LaunchConfig& config, void* stream, void** args) const = 0;
  // Encodes a tensor map into `out` (kTensorMapBytes, 128-byte aligned); the driver's status.
  virtual int encode_tensor_map(const TensorMapRequest& request, void* out) const = 0;
  // Device memory of at least `bytes` at `align` for scratch entry `slot` of launches on
  // `stream`, reused by every launch on that stream (MANIFEST.md, scratch); the driver's status.
  virtual int scratch(std::size_t slot, std::uint64_t bytes, std::uint32_t align, void* stream,
                      std::uint64_t* address) const = 0;
};

// A backend's loaded code as backend::Code, for any driver-level backend B whose launch(device,
// code, config, stream, args) and unload(code) take its own Device and LoadedCode types.
template <class B, class Device, class Loaded>
class CodeOn final : public Code {
 public:
  CodeOn(B& backend, const Device& device, Loaded code) : backend_(backend), device_(device), code_(code) {}
  ~CodeOn() override { backend_.unload(code_); }
  int launch(const LaunchConfig& config, void* stream, void** args) const override {
    return backend_.launch(device_, code_, config, stream, args);
  }
  int encode_tensor_map(const TensorMapRequest& request, void* out) const override {
    return backend_.encode_tensor_map(device_, request, out);
  }
  int scratch(std::size_t slot, std::uint64_t bytes, std::uint32_t align, void* stream,
              std::uint64_t* address) const override {
    return backend_.scratch(device_, slot, bytes, align, stream, address);
  }

 private:
  B& backend_;
  const Device& device_;
  Loaded code_;
};

struct LoadOutcome {
  std::unique_ptr<Code> code;  // null when the load failed
  int error = 0;               // the driver's status
  std::string message;         // its description, with the JIT log for PTX
  std::uint64_t nanoseconds = 0;
  bool simulated = false;      // a described target's: nothing was loaded (described_target.hpp)
};

// What tools need of a device beyond loading and launching (kiln_experimental.h: kiln verify
// --run runs test vectors with it): memory, synchronous copies, and timing. Each call returns the
// driver's status (0 is success; Backend::describe_error names the rest) and leaves the calling
// thread's current device or context as it found it.
class DeviceTools {
 public:
  virtual ~DeviceTools() = default;
  virtual int allocate(std::uint64_t bytes, std::uint64_t* address) = 0;
  virtual int release(std::uint64_t address) = 0;
  virtual int fill(std::uint64_t address, std::uint8_t byte, std::uint64_t bytes) = 0;
  virtual int write(std::uint64_t address, const void* data, std::uint64_t bytes) = 0;
  virtual int read(void* data, std::uint64_t address, std::uint64_t bytes) = 0;
  virtual int synchronize() = 0;
  // Runs `launch_once` (one launch on the default stream; it may throw) `repeats` times, each
  // between two device events, appending each one's time in microseconds.
  virtual int time(const std::function<void()>& launch_once, unsigned repeats, std::vector<double>* microseconds) = 0;
  virtual std::uint64_t total_memory() = 0;  // 0 when the driver cannot say
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* vendor() const = 0;       // "CUDA", "HIP": for reasons
  virtual format::Vendor format_vendor() const = 0;  // the index's backend byte of its code
  virtual const char* launch_call() const = 0;  // "cuLaunchKernel": for launch errors

  // The device of this ordinal, or null with why: KILN_REASON_NO_DRIVER or _NO_DEVICE.
  // Queried once per ordinal and cached; thread-safe.
  virtual const DeviceInfo* device(int ordinal, kiln_reason* reason, std::string* why) = 0;
  // What the archive as a whole asks of the device's driver (CUDA: min_cuda_driver), or ""
  // when the device's driver meets it.
  virtual std::string unmet_requirement(const DeviceInfo& device, const KernelTable& table) = 0;
  // What the kernel needs of the device or driver beyond its code (tensor maps, clusters,
  // scratch), or "" when the device has it; a kernel that needs something is never launched.
  virtual std::string unmet_feature(const DeviceInfo& device, const KernelSpec& kernel) = 0;
  // Judges one tag of a code object of this kind, the member at `path` (named in errors).
  // `content` is empty unless a first call said needs_content; then it is the verified code object.
  virtual TagFit judge(const DeviceInfo& device, const std::string& tag, format::CodeKind kind, ByteView content,
                       const std::string& path) = 0;
  // Loads a verified code object and finds `entry` in it; `max_dynamic_smem` is the most
  // dynamic shared memory any declared shape asks for (granted to the kernel at load).
  virtual LoadOutcome load(const DeviceInfo& device, ByteView image, format::CodeKind kind, const std::string& entry,
                           unsigned max_dynamic_smem) = 0;
  // The driver's name and description of a status returned by Code::launch or DeviceTools.
  virtual std::string describe_error(int error) const = 0;
  // Device tools for a device this backend found, or null with why (a backend or driver without
  // them). Cheap: made per use.
  virtual std::unique_ptr<DeviceTools> tools(const DeviceInfo& device, std::string* why) {
    (void)device;
    *why = std::string("the ") + vendor() + " backend offers no device memory or timing calls";
    return nullptr;
  }
};

// The backends a resolver chooses among, in the order a kernel of backend "any" tries them.
using BackendList = std::vector<std::unique_ptr<Backend>>;

}  // namespace kiln::backend
