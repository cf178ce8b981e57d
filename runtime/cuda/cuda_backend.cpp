#include "cuda/cuda_backend.hpp"

#include "core/code_object.hpp"
#include "core/error.hpp"
#include "core/manifest.hpp"
#include "cuda/cuda_features.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {
namespace {

// Static and dynamic shared memory together may use 48 KiB without opting in; a kernel's static
// share is in its code object, so any dynamic amount is granted explicitly (TileLang's TMA GEMM
// asks for exactly 48 KiB dynamic on top of its static barriers, and fails without it).
constexpr unsigned kGrantDynamicSharedAbove = 0;
// Above 48 KiB of dynamic shared memory, the SM's shared/L1 split is asked to favour shared
// memory, as Triton's own loader does (cuFuncSetCacheConfig PREFER_SHARED): otherwise the driver
// may pick a split that fits fewer blocks per SM, and the same code runs slower under kiln than
// under its compiler's launch (seen on the H200: 1.10x on a split-K GEMM of 96 KiB). A hint: a
// driver that refuses it loads the kernel all the same.
constexpr unsigned kPreferSharedAbove = 49152;

}  // namespace

std::string Device::describe() const {
  return "device " + std::to_string(ordinal) + " '" + name + "' (cc " + std::to_string(spec.cc_major) + "." +
         std::to_string(spec.cc_minor) + ", driver " + driver_version_text(spec.driver_version) + ")";
}

CudaBackend::~CudaBackend() {
  const Driver* d = driver();
  if (d == nullptr) return;
  const DriverApi& api = d->api();
  for (auto& [ordinal, device] : devices_) {
    ScratchPool& pool = device->scratch;
    if (!pool.buffers.empty() || !pool.retired.empty()) {
      ContextScope scope(api, device->primary);
      for (auto& [key, buffer] : pool.buffers) api.cuMemFree(buffer.address);
      for (CUdeviceptr p : pool.retired) api.cuMemFree(p);
    }
    api.cuDevicePrimaryCtxRelease(device->handle);
  }
}

namespace {

// What a device is (handle, compute capability, name), queried once per process and driver: it
// cannot change after cuInit, and each new runtime would otherwise ask again on its first get
// (cuDeviceGetName alone costs ~2 us of a cold start). Failures are not kept: the next runtime asks
// again. Returns "" or why the device cannot be used.
struct DeviceProperties {
  CUdevice handle = 0;
  int cc_major = 0, cc_minor = 0;
  std::string name;
};

std::string device_properties(const Driver& driver, int ordinal, DeviceProperties* out) {
  static std::mutex mutex;
  static std::map<std::pair<const Driver*, int>, DeviceProperties> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find({&driver, ordinal});
  if (it != known.end()) {
    *out = it->second;
    return "";
  }
  const DriverApi& api = driver.api();
  int count = 0;
  CUresult r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) return "cuDeviceGetCount failed: " + driver.describe(r);
  if (ordinal < 0 || ordinal >= count) {
    return "no CUDA device " + std::to_string(ordinal) + " (the driver reports " + std::to_string(count) + ")";
  }
  DeviceProperties p;
  char name[256] = {};
  if ((r = api.cuDeviceGet(&p.handle, ordinal)) != CUDA_SUCCESS ||
      (r = api.cuDeviceGetAttribute(&p.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, p.handle)) != CUDA_SUCCESS ||
      (r = api.cuDeviceGetAttribute(&p.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, p.handle)) != CUDA_SUCCESS ||
      (r = api.cuDeviceGetName(name, sizeof name - 1, p.handle)) != CUDA_SUCCESS) {
    return "CUDA device " + std::to_string(ordinal) + " could not be queried: " + driver.describe(r);
  }
  p.name = name;
  *out = known.emplace(std::make_pair(&driver, ordinal), std::move(p)).first->second;
  return "";
}

}  // namespace

const Device* CudaBackend::native_device(int ordinal, Unavailable* kind, std::string* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = devices_.find(ordinal);
  if (it != devices_.end()) return it->second.get();
  bool no_device = false;
  const Driver* driver = this->driver();
  if (driver == nullptr) {
    driver = Driver::get(driver_path_, why, &no_device);
    driver_.store(driver, std::memory_order_release);
  }
  if (driver == nullptr) {
    *kind = no_device ? Unavailable::no_device : Unavailable::no_driver;
    return nullptr;
  }
  DeviceProperties properties;
  if (std::string problem = device_properties(*driver, ordinal, &properties); !problem.empty()) {
    *kind = Unavailable::no_device;
    *why = problem;
    return nullptr;
  }
  auto d = std::make_unique<Device>();
  d->ordinal = ordinal;
  d->handle = properties.handle;
  d->spec.cc_major = properties.cc_major;
  d->spec.cc_minor = properties.cc_minor;
  d->name = properties.name;
  // The primary context is this backend's own reference, released when it goes.
  if (CUresult r = driver->api().cuDevicePrimaryCtxRetain(&d->primary, d->handle); r != CUDA_SUCCESS) {
    *kind = Unavailable::no_device;
    *why = "CUDA device " + std::to_string(ordinal) + " could not be queried: " + driver->describe(r);
    return nullptr;
  }
  d->spec.driver_version = driver->version();
  d->info.ordinal = ordinal;
  d->info.native = d.get();
  d->info.name = d->name;
  d->info.describe = d->describe();
  d->info.arch = "sm_" + std::to_string(d->spec.cc_major) + std::to_string(d->spec.cc_minor);
  d->info.driver_version = driver_version_text(d->spec.driver_version);
  d->info.cc_major = d->spec.cc_major;
  d->info.cc_minor = d->spec.cc_minor;
  return devices_.emplace(ordinal, std::move(d)).first->second.get();
}

namespace {

// Grants a CUfunction (a module's, or a CUkernel's in the primary context) its dynamic shared
// memory above the default limit and prefers the largest shared memory carveout for it, as the
// library path's cuKernelSetAttribute does for a CUkernel. The carveout is a preference the
// driver may ignore, so only the grant can fail.
CUresult grant_dynamic_smem(const DriverApi& api, CUfunction f, unsigned max_dynamic_smem) {
  if (max_dynamic_smem > kGrantDynamicSharedAbove) {
    CUresult r = api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(max_dynamic_smem));
    if (r != CUDA_SUCCESS) return r;
  }
  if (max_dynamic_smem > kPreferSharedAbove) {
    (void)api.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
  }
  return CUDA_SUCCESS;
}

// What a launch on the primary context's own streams passes for a library-path kernel: its
// CUfunction there, asked for at the first such launch, or the CUkernel where the driver gives
// none (which runs everywhere, the driver finding its function at each launch). The function
// launches about 0.1 us sooner than the CUkernel (an H100, tests/bench/RESULTS.md). It gets the
// same dynamic shared memory grant: cuKernelSetAttribute applies device-wide, and granted again
// the function's launch does not rest on that. Not asked for at load: that loads the module into
// the context, which the driver does one module at a time, so kiln_archive_warm's threads would
// wait on each other for what a first launch does anyway. Threads racing here get the same
// function and store the same value. Nothing is kept while the primary context is not current
// (its push failed): a function found then would be another context's.
CUfunction primary_context_handle(const DriverApi& api, bool primary_current, const LoadedCode& code) {
  CUfunction f = code.primary_handle.value.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  const auto kernel = reinterpret_cast<CUfunction>(code.kernel);
  if (!primary_current) return kernel;
  if (api.cuKernelGetFunction == nullptr || api.cuKernelGetFunction(&f, code.kernel) != CUDA_SUCCESS ||
      grant_dynamic_smem(api, f, code.max_dynamic_smem) != CUDA_SUCCESS) {
    f = kernel;
  }
  code.primary_handle.value.store(f, std::memory_order_release);
  return f;
}

}  // namespace

LoadResult CudaBackend::load_image(const Device& device, ByteView image, const std::string& entry, unsigned max_dynamic_smem) {
  const Driver* driver = this->driver();
  const DriverApi& api = driver->api();
  LoadResult result;
  // The JIT writes its diagnostics here when PTX fails to compile; kept for the caller.
  // Not zero-filled (16 KiB of writes on every load): the driver writes a terminated string,
  // and both ends are terminated here in case it writes nothing or fills the buffer.
  constexpr std::size_t kLogSize = 16384;
  std::unique_ptr<char[]> error_log(new char[kLogSize]);
  error_log[0] = error_log[kLogSize - 1] = '\0';
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.get(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(kLogSize - 1))};
  auto start = std::chrono::steady_clock::now();
  CUresult r;
  ContextScope scope(api, device.primary);
  if (driver->has_library_api()) {
    r = api.cuLibraryLoadData(&result.code.library, image.data, options, values, 2, nullptr, nullptr, 0);
    if (r == CUDA_SUCCESS) r = api.cuLibraryGetKernel(&result.code.kernel, result.code.library, entry.c_str());
    if (r == CUDA_SUCCESS && max_dynamic_smem > kGrantDynamicSharedAbove) {
      r = api.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(max_dynamic_smem),
                                   result.code.kernel, device.handle);
    }
    if (r == CUDA_SUCCESS && max_dynamic_smem > kPreferSharedAbove) {
      (void)api.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED,
                                     result.code.kernel, device.handle);
    }
    result.code.max_dynamic_smem = max_dynamic_smem;
  } else {
    r = api.cuModuleLoadDataEx(&result.code.module, image.data, 2, options, values);
    if (r == CUDA_SUCCESS) r = api.cuModuleGetFunction(&result.code.function, result.code.module, entry.c_str());
    if (r == CUDA_SUCCESS) r = grant_dynamic_smem(api, result.code.function, max_dynamic_smem);
  }
  result.nanoseconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  if (r != CUDA_SUCCESS) {
    result.cuda_error = r;
    result.error = driver->describe(r);
    if (r == CUDA_ERROR_NOT_FOUND) result.error += ": no kernel named '" + entry + "' in the code object";
    std::string log(error_log.get());
    if (!log.empty()) result.error += "; JIT log: " + log;
    unload(result.code);
    return result;
  }
  result.ok = true;
  return result;
}

void CudaBackend::unload(LoadedCode& code) {
  const Driver* driver = this->driver();
  if (driver == nullptr) return;
  if (code.library != nullptr) driver->api().cuLibraryUnload(code.library);
  if (code.module != nullptr) driver->api().cuModuleUnload(code.module);
  code = LoadedCode{};
}

CUresult CudaBackend::launch(const Device& device, const LoadedCode& code, const LaunchConfig& c, void* stream,
                         void** args) const {
  const DriverApi& api = driver()->api();
  // The launch runs in the device's primary context: the scope makes it current for the call
  // where the thread has another. The stream handles NULL, CU_STREAM_LEGACY and
  // CU_STREAM_PER_THREAD name that context's streams, so the primary context's CUfunction is
  // valid for them. Any other stream may have been created in another context of the device:
  // the CUkernel (which cuLaunchKernel takes in place of a CUfunction, CUDA 12.0+) runs in the
  // stream's own context, where the driver finds its function at each launch.
  ContextScope scope(api, device.primary);
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  const bool current_context_stream = handle == 0 || handle == CU_STREAM_LEGACY_VALUE || handle == CU_STREAM_PER_THREAD_VALUE;
  CUfunction f = code.kernel == nullptr     ? code.function
                 : current_context_stream ? primary_context_handle(api, scope.current(), code)
                                          : reinterpret_cast<CUfunction>(code.kernel);
  if (!c.has_cluster()) {
    return api.cuLaunchKernel(f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared_mem,
                              static_cast<CUstream>(stream), args, nullptr);
  }
  // Resolution refused the kernel where cuLaunchKernelEx is missing (cuda_features.cpp).
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = c.cluster[0];
  attribute.value.clusterDim.y = c.cluster[1];
  attribute.value.clusterDim.z = c.cluster[2];
  CUlaunchConfig config{c.grid[0],  c.grid[1],  c.grid[2],    c.block[0], c.block[1], c.block[2],
                        c.shared_mem, static_cast<CUstream>(stream), &attribute, 1};
  return api.cuLaunchKernelEx(&config, f, args, nullptr);
}

CUresult CudaBackend::encode_tensor_map(const Device& device, const TensorMapRequest& request, void* out) const {
  // A host-side call, but the driver refuses it (CUDA_ERROR_INVALID_CONTEXT) on a thread with no
  // current context: an embedder's launching thread need not have one.
  const DriverApi& api = driver()->api();
  ContextScope scope(api, device.primary);
  const TensorMapRecipe& r = *request.recipe;
  unsigned box[5] = {}, element_strides[5] = {};
  for (std::size_t d = 0; d < r.box.size() && d < 5; ++d) {
    box[d] = r.box[d];
    element_strides[d] = r.element_strides[d];
  }
  return api.cuTensorMapEncodeTiled(
      static_cast<CUtensorMap*>(out), r.dtype, static_cast<unsigned>(r.dims.size()),
      reinterpret_cast<void*>(static_cast<std::uintptr_t>(request.address)),
      reinterpret_cast<const unsigned long long*>(request.dims), reinterpret_cast<const unsigned long long*>(request.strides), box,
      element_strides, r.interleave, r.swizzle, r.l2_promotion, r.oob_fill);
}

CUresult CudaBackend::scratch(const Device& device, std::size_t slot, std::uint64_t bytes, std::uint32_t align, void* stream,
                          std::uint64_t* address) const {
  *address = 0;
  if (bytes == 0) return CUDA_SUCCESS;
  const DriverApi& api = driver()->api();
  ScratchPool& pool = device.scratch;
  std::lock_guard<std::mutex> lock(pool.mutex);
  ScratchPool::Buffer& buffer = pool.buffers[{stream, slot}];
  const std::uint64_t need = bytes + align - 1;  // bytes < 2^62 (checked by the caller)
  if (buffer.size < need) {
    std::uint64_t size = std::max(need, buffer.size * 2);  // doubling: few retired buffers
    CUdeviceptr p = 0;
    ContextScope scope(api, device.primary);
    CUresult r = api.cuMemAlloc(&p, size);
    if (r != CUDA_SUCCESS) return r;
    if (buffer.address != 0) pool.retired.push_back(buffer.address);
    buffer = {p, size};
  }
  *address = (buffer.address + align - 1) & ~static_cast<std::uint64_t>(align - 1);
  return CUDA_SUCCESS;
}

const backend::DeviceInfo* CudaBackend::device(int ordinal, kiln_reason* reason, std::string* why) {
  Unavailable unavailable = Unavailable::none;
  const Device* d = native_device(ordinal, &unavailable, why);
  if (d == nullptr) {
    *reason = unavailable == Unavailable::no_driver ? KILN_REASON_NO_DRIVER : KILN_REASON_NO_DEVICE;
    return nullptr;
  }
  return &d->info;
}

const Device& CudaBackend::device_of(const backend::DeviceInfo& device) {
  // Every description this backend hands out carries its record (native_device), and records
  // live as long as the backend.
  if (device.native == nullptr) {
    throw Failure(Errc::internal, "CUDA device " + std::to_string(device.ordinal) + ": a description this backend did not make");
  }
  return *static_cast<const Device*>(device.native);
}

std::string CudaBackend::unmet_requirement(const backend::DeviceInfo& device, const KernelTable& table) {
  const std::string* min = table.toolchain_value("min_cuda_driver");
  int major = 0, minor = 0;
  if (min == nullptr || !parse_version_pair(*min, &major, &minor)) return "";  // the manifest parser checks its form
  if (device_of(device).spec.driver_version >= major * 1000 + minor * 10) return "";
  return "the manifest needs a CUDA " + *min + " driver (min_cuda_driver)";
}

std::string CudaBackend::unmet_feature(const backend::DeviceInfo& device, const KernelSpec& kernel) {
  const DriverApi& api = driver()->api();  // a device was found: the driver is loaded
  DriverFeatures features;
  features.launch_ex = api.cuLaunchKernelEx != nullptr;
  features.tensor_map_encode = api.cuTensorMapEncodeTiled != nullptr;
  features.memory = api.cuMemAlloc != nullptr && api.cuMemFree != nullptr;
  return feature_problem(kernel, device_of(device).spec, features, device.describe);
}

backend::TagFit judge_tag(const DeviceSpec& spec, const std::string& tag, format::CodeKind kind, ByteView content,
                         const std::string& path) {
  backend::TagFit fit;
  Target target;
  if (!parse_target(tag, &target)) return fit;
  fit.recognised = true;
  fit.jit = target.is_ptx;
  // A PTX member's ISA version can be read only from its verified bytes: asked for later, and
  // only when no native code object fits (a PTX member can be hundreds of KiB).
  if (kind == format::CodeKind::ptx && target.is_ptx && content.size == 0) {
    fit.needs_content = true;
    return fit;
  }
  std::string isa;
  if (content.size > 0) isa = inspect_ptx(content, "'" + path + "'").ptx_isa;
  Judgement j = cuda::judge(target, spec, isa);
  fit.fits = j.verdict == Verdict::fits;
  fit.driver_too_old = j.verdict == Verdict::driver_too_old;
  fit.rank = j.rank;
  fit.why = std::move(j.why);
  return fit;
}

backend::TagFit CudaBackend::judge(const backend::DeviceInfo& device, const std::string& tag, format::CodeKind kind,
                                    ByteView content, const std::string& path) {
  return judge_tag(device_of(device).spec, tag, kind, content, path);
}

backend::LoadOutcome CudaBackend::load(const backend::DeviceInfo& device, ByteView image, format::CodeKind kind,
                                        const std::string& entry, unsigned max_dynamic_smem) {
  const Device& d = device_of(device);
  std::vector<std::uint8_t> ptx;
  if (kind == format::CodeKind::ptx) {  // the driver reads PTX as a C string
    ptx.assign(image.data, image.data + image.size);
    ptx.push_back('\0');
    image = ByteView(ptx);
  }
  LoadResult r = load_image(d, image, entry, max_dynamic_smem);
  backend::LoadOutcome out;
  out.nanoseconds = r.nanoseconds;
  if (!r.ok) {
    out.error = r.cuda_error;
    out.message = r.error;
    return out;
  }
  out.code = std::make_unique<backend::CodeOn<CudaBackend, Device, LoadedCode>>(*this, d, r.code);
  return out;
}

std::string CudaBackend::describe_error(int error) const {
  const Driver* d = driver();
  return d ? d->describe(error) : "CUDA error " + std::to_string(error);
}

}  // namespace kiln::cuda
