#include "hip/hip_driver.hpp"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

namespace kiln::hip {
namespace {

// The optional tool functions, each named once: HipApi's member is the runtime's symbol.
#define KILN_HIP_TOOL_FUNCTIONS(X)                                                                 \
  X(hipMalloc) X(hipFree) X(hipMemset) X(hipMemcpyHtoD) X(hipMemcpyDtoH) X(hipDeviceSynchronize) \
  X(hipEventCreate) X(hipEventRecord) X(hipEventSynchronize) X(hipEventElapsedTime) X(hipEventDestroy) \
  X(hipDeviceTotalMem)

#define KILN_HIP_TOOL_NAME(fn) #fn,
constexpr const char* kToolSymbols[] = {KILN_HIP_TOOL_FUNCTIONS(KILN_HIP_TOOL_NAME)};
#undef KILN_HIP_TOOL_NAME

// Binds the optional tool functions; absent ones stay null (HipApi::has_tools says so).
void bind_tools(void* lib, HipApi& api) {
#define KILN_HIP_TOOL_BIND(fn) api.fn = reinterpret_cast<decltype(api.fn)>(::dlsym(lib, #fn));
  KILN_HIP_TOOL_FUNCTIONS(KILN_HIP_TOOL_BIND)
#undef KILN_HIP_TOOL_BIND
}

}  // namespace

const char* const* tool_symbols(std::size_t* count) {
  *count = sizeof kToolSymbols / sizeof kToolSymbols[0];
  return kToolSymbols;
}

const HipApi* load_api(const std::string& path, std::string* why, bool* no_device) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<std::unique_ptr<HipApi>, std::pair<std::string, bool>>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    auto api = std::make_unique<HipApi>();
    std::string error;
    bool nodev = false;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = ::dlerror();
      error = "the HIP runtime (" + path + ") could not be loaded: " + (e ? e : "unknown error");
    } else {
      bool ok = true;
      auto bind = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
        if (fn == nullptr && ok) error = "the HIP runtime (" + path + ") lacks " + name, ok = false;
      };
      bind(api->hipInit, "hipInit");
      bind(api->hipRuntimeGetVersion, "hipRuntimeGetVersion");
      bind(api->hipGetDeviceCount, "hipGetDeviceCount");
      bind(api->hipGetDeviceProperties, "hipGetDeviceProperties");
      bind(api->hipSetDevice, "hipSetDevice");
      bind(api->hipGetDevice, "hipGetDevice");
      bind(api->hipModuleLoadData, "hipModuleLoadData");
      bind(api->hipModuleUnload, "hipModuleUnload");
      bind(api->hipModuleGetFunction, "hipModuleGetFunction");
      bind(api->hipModuleLaunchKernel, "hipModuleLaunchKernel");
      bind(api->hipGetErrorName, "hipGetErrorName");
      api->hipFuncSetAttribute = reinterpret_cast<decltype(api->hipFuncSetAttribute)>(::dlsym(lib, "hipFuncSetAttribute"));
      bind_tools(lib, *api);
      if (ok) {
        int count = 0;
        int r = api->hipInit(0);
        int c = api->hipGetDeviceCount(&count);
        if (r != 0 || c != 0 || count == 0) {
          nodev = true;
          error = std::string("the HIP runtime reports no AMD device (") + api->hipGetErrorName(c != 0 ? c : r) + ")";
        } else {
          api->hipRuntimeGetVersion(&api->runtime_version);
        }
      }
    }
    it = loaded.emplace(path, std::make_pair(error.empty() ? std::move(api) : nullptr, std::make_pair(error, nodev))).first;
  }
  if (!it->second.first) {
    *why = it->second.second.first;
    *no_device = it->second.second.second;
    return nullptr;
  }
  return it->second.first.get();
}

}  // namespace kiln::hip
