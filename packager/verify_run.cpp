#include "verify_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "core/float_formats.hpp"
#include "core/npy.hpp"
#include "cuda/cuda_backend.hpp"
#include "engine/archive.hpp"
#include "engine/kernel.hpp"
#include "engine/runtime.hpp"

namespace kiln::cli {
namespace {

using cuda::CUdeviceptr;
using cuda::CUevent;

kiln_runtime_options runtime_options(const RunOptions& o) {
  kiln_runtime_options r{};
  r.size = sizeof r;
  r.signature_threshold = o.threshold;
  r.trust_path = o.trust.c_str();
  r.policy = KILN_POLICY_FALLBACK;
  r.log_level = KILN_LOG_WARN;
  r.max_member_size = kiln::kDefaultMaxMemberSize;
  return r;
}

// Device buffers for one test, freed on every path.
struct Buffers {
  const cuda::DriverApi* api = nullptr;
  std::vector<CUdeviceptr> ptrs;
  ~Buffers() {
    for (CUdeviceptr p : ptrs) {
      if (p) api->cuMemFree(p);
    }
  }
};

void check(const cuda::Driver& d, cuda::CUresult r, const std::string& what) {
  if (r != cuda::CUDA_SUCCESS) fail(Errc::driver, what + ": " + d.describe(r));
}

// The runtime's CUDA backend: verify --run allocates, copies and times on its devices.
cuda::CudaBackend& cuda_backend(engine::Runtime& rt) {
  auto* b = dynamic_cast<cuda::CudaBackend*>(rt.backend(format::Vendor::cuda));
  if (b == nullptr) fail(Errc::internal, "this libkiln has no CUDA backend");
  return *b;
}

void run_one(engine::Runtime& rt, engine::Archive& archive, engine::Kernel& k, const TestSpec& test, const RunOptions& o,
             TestResult& result) {
  const cuda::Driver& d = *cuda_backend(rt).driver();
  const cuda::DriverApi& cu = d.api();
  if (!cu.has_tools()) {
    fail(Errc::unsupported, "the CUDA driver lacks the memory and event calls verify --run needs (cuMemAlloc, "
                            "cuEventRecord, ...); libkiln serves without them, but test vectors cannot run");
  }
  cuda::Unavailable unavailable = cuda::Unavailable::none;
  std::string why;
  const cuda::Device* device = cuda_backend(rt).native_device(k.device(), &unavailable, &why);
  if (device == nullptr) fail(Errc::driver, "CUDA device " + std::to_string(k.device()) + ": " + why);
  check(d, cu.cuCtxSetCurrent(device->primary), "cuCtxSetCurrent");
  const KernelSpec& spec = k.spec();
  const ShapeSpec* shape = nullptr;
  for (const ShapeSpec& s : spec.shapes) {
    if (s.name == test.shape) shape = &s;
  }
  // Arguments: device buffers for pointers, the shape's values (and, for a range shape, the
  // test's own values, checked against the shape by the manifest parser) for scalars.
  Buffers buffers;
  buffers.api = &cu;
  buffers.ptrs.assign(spec.params.size(), 0);
  std::vector<std::uint64_t> scalars(spec.params.size(), 0);
  std::vector<void*> args(spec.params.size(), nullptr);
  std::vector<std::vector<std::uint8_t>> expected_bytes(spec.params.size());
  std::vector<NpyArray> expected(spec.params.size());
  std::vector<std::vector<std::uint8_t>> keep;  // input bytes live until copied
  auto member = [&](const FileRef& f) { return archive.reader().read_member(f.path); };
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    const KernelParam& p = spec.params[i];
    if (!p.is_pointer && is_float_type(p.type)) {
      // A float scalar: only a test's own values give one (shapes fix integers only).
      const double* given = nullptr;
      for (const auto& [name, v] : test.float_values) {
        if (name == p.name) given = &v;
      }
      if (given == nullptr) fail(Errc::manifest, "test '" + test.shape + "': no value for the " + scalar_type_name(p.type) + " scalar '" + p.name + "' (add values = { " + p.name + " = ... } to the test)");
      if (p.type == ScalarType::f32) {
        float f = static_cast<float>(*given);
        std::memcpy(&scalars[i], &f, sizeof f);
      } else if (p.type == ScalarType::f64) {
        std::memcpy(&scalars[i], given, sizeof(double));
      } else {  // f16, bf16, fp8: rounded to nearest even; the parser refused values out of range
        std::uint32_t bits = 0;
        narrow_float_bits(p.type, *given, &bits);
        std::memcpy(&scalars[i], &bits, scalar_type_size(p.type));  // little-endian: the low bytes
      }
      args[i] = &scalars[i];
      continue;
    }
    if (!p.is_pointer) {
      std::int64_t value = 0;
      bool found = false;
      for (const auto& [name, v] : shape->values) {
        if (name == p.name) value = v, found = true;
      }
      for (const auto& [name, v] : test.values) {
        if (name == p.name) value = v, found = true;
      }
      if (!found) fail(Errc::manifest, "test '" + test.shape + "': neither the shape nor the test gives a value for scalar '" + p.name + "'");
      std::memcpy(&scalars[i], &value, scalar_type_size(p.type));  // little-endian: the low bytes
      args[i] = &scalars[i];
      continue;
    }
    const FileRef* input = nullptr;
    const FileRef* output = nullptr;
    for (const auto& [name, f] : test.inputs) {
      if (name == p.name) input = &f;
    }
    for (const auto& [name, f] : test.outputs) {
      if (name == p.name) output = &f;
    }
    std::uint64_t bytes = 0;
    if (output != nullptr) {
      expected_bytes[i] = member(*output);
      expected[i] = parse_npy(ByteView(expected_bytes[i]), output->path);
      npy_view_as(&expected[i], p.type);  // bf16 / fp8 raw bits: compared as their type (pack checked the dtype)
      bytes = expected[i].data.size;
    }
    std::vector<std::uint8_t> in;
    NpyArray in_array;
    if (input != nullptr) {
      in = member(*input);
      in_array = parse_npy(ByteView(in), input->path);
      bytes = std::max<std::uint64_t>(bytes, in_array.data.size);
    }
    if (bytes == 0) {
      args[i] = &buffers.ptrs[i];  // an unused pointer (Triton's scratch): NULL
      continue;
    }
    check(d, cu.cuMemAlloc(&buffers.ptrs[i], bytes), "cuMemAlloc " + std::to_string(bytes) + " bytes for '" + p.name + "'");
    // Poison first: 0xff bytes are NaN in every float format, so an output element the kernel
    // never wrote cannot pass as correct.
    check(d, cu.cuMemsetD8(buffers.ptrs[i], 0xff, bytes), "cuMemsetD8");
    if (input != nullptr) check(d, cu.cuMemcpyHtoD(buffers.ptrs[i], in_array.data.data, in_array.data.size), "cuMemcpyHtoD");
    args[i] = &buffers.ptrs[i];
  }

  int variant = k.variant_for(args.data());
  if (variant >= 0) result.variant = spec.variants[static_cast<std::size_t>(variant)].name;
  result.code_path = k.code_path(variant);
  k.launch(args.data(), args.size(), nullptr);
  check(d, cu.cuCtxSynchronize(), "the kernel failed on the device");
  Tolerance tol = test.has_tolerance ? test.tolerance : spec.tolerance;
  result.passed = true;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    if (expected_bytes[i].empty()) continue;
    const NpyArray& want = expected[i];
    std::vector<std::uint8_t> got_bytes(want.data.size);
    check(d, cu.cuMemcpyDtoH(got_bytes.data(), buffers.ptrs[i], got_bytes.size()), "cuMemcpyDtoH");
    NpyArray got = want;
    got.data = ByteView(got_bytes);
    bool exact = !is_float_type(want.dtype);
    for (std::uint64_t e = 0; e < want.count(); ++e) {
      double g = npy_element(got, e), w = npy_element(want, e);
      ++result.elements;
      if (std::isnan(g) && !std::isnan(w)) {
        ++result.unwritten;
        continue;
      }
      double err = std::fabs(g - w);
      result.max_abs_error = std::max(result.max_abs_error, err);
      result.max_rel_error = std::max(result.max_rel_error, err / std::max(std::fabs(w), 1e-12));
      bool ok = exact ? g == w : err <= tol.atol + tol.rtol * std::fabs(w);
      if (!ok) ++result.mismatches;
    }
  }
  if (result.unwritten || result.mismatches) {
    result.passed = false;
    result.detail = std::to_string(result.mismatches) + " of " + std::to_string(result.elements) +
                    " elements outside rtol " + std::to_string(tol.rtol) + " / atol " + std::to_string(tol.atol) +
                    (result.unwritten ? ", " + std::to_string(result.unwritten) + " never written" : "");
  }

  // Timing: the same launch repeated, each between two events; the median.
  CUevent start = nullptr, stop = nullptr;
  check(d, cu.cuEventCreate(&start, cuda::CU_EVENT_DEFAULT), "cuEventCreate");
  check(d, cu.cuEventCreate(&stop, cuda::CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<double> times;
  for (int r = 0; r < o.repeats; ++r) {
    cu.cuEventRecord(start, nullptr);
    k.launch(args.data(), args.size(), nullptr);
    cu.cuEventRecord(stop, nullptr);
    cu.cuEventSynchronize(stop);
    float ms = 0;
    cu.cuEventElapsedTime(&ms, start, stop);
    times.push_back(ms * 1000.0);
  }
  cu.cuEventDestroy(start);
  cu.cuEventDestroy(stop);
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    result.median_us = times[times.size() / 2];
  }
  result.ran = true;
}

// The device's memory in bytes, where the driver has cuDeviceTotalMem (0 otherwise).
std::uint64_t device_memory(engine::Runtime& rt, int ordinal) {
  const cuda::Driver* d = cuda_backend(rt).driver();
  if (d == nullptr || d->api().cuDeviceTotalMem == nullptr) return 0;
  cuda::Unavailable unavailable = cuda::Unavailable::none;
  std::string why;
  const cuda::Device* device = cuda_backend(rt).native_device(ordinal, &unavailable, &why);
  std::size_t bytes = 0;
  if (device == nullptr || d->api().cuDeviceTotalMem(&bytes, device->handle) != cuda::CUDA_SUCCESS) return 0;
  return bytes;
}

}  // namespace

std::vector<TestResult> run_test_vectors(const RunOptions& o, RunDevice* device) {
  engine::Runtime rt(runtime_options(o));
  engine::Archive archive(rt, o.archive);
  const Manifest& manifest = archive.reader().manifest();
  std::vector<TestResult> results;
  for (const KernelSpec& spec : manifest.kernels) {
    engine::Kernel* k = archive.kernel(spec.name, o.device);
    if (device != nullptr && !device->known && k->device_info() != nullptr && k->runs_on_device()) {
      const backend::DeviceInfo& info = *k->device_info();
      device->known = true;
      device->vendor = info.cc_major > 0 ? "cuda" : "hip";
      device->name = info.name;
      device->arch = info.arch;
      device->compute_capability = info.cc_major > 0 ? std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor) : "";
      device->driver = info.driver_version;
      device->memory_bytes = device_memory(rt, o.device);
    }
    TestResult base;
    base.kernel = spec.name;
    base.route = kiln_route_string(k->route());
    base.target = k->target();
    base.reason = k->reason_text();
    if (spec.tests.empty()) {
      base.detail = "the manifest declares no test vector for this kernel";
      results.push_back(base);
      continue;
    }
    std::set<std::string> reached;
    for (const TestSpec& test : spec.tests) {
      TestResult r = base;
      r.test = test.shape;
      if (!k->runs_on_device()) {
        r.detail = "not run: routes to " + r.route + " on this host";
        results.push_back(r);
        continue;
      }
      try {
        run_one(rt, archive, *k, test, o, r);
      } catch (const Failure& e) {
        r.ran = true;
        r.passed = false;
        r.detail = e.what();
      }
      if (r.ran) reached.insert(r.variant);
      results.push_back(r);
    }
    if (k->runs_on_device()) {
      for (const VariantSpec& v : spec.variants) {
        if (reached.count(v.name) == 0) results.back().unreached_variants.push_back(v.name);
      }
    }
  }
  return results;
}

}  // namespace kiln::cli
