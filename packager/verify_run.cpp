#include "verify_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "cli_common.hpp"
#include "core/error.hpp"
#include "core/float_formats.hpp"
#include "core/manifest.hpp"
#include "core/npy.hpp"
#include "kiln/kiln.hpp"
#include "kiln/kiln_experimental.hpp"

namespace kiln::cli {
namespace {

namespace x = kiln::experimental;

kiln::RuntimeOptions runtime_options(const RunOptions& o) {
  kiln::RuntimeOptions r;
  r.trust_path(o.trust).signature_threshold(o.threshold).policy(KILN_POLICY_FALLBACK);
  return r;
}

bool runs_on_device(const kiln::Kernel& k) {
  return k.route() == KILN_ROUTE_NATIVE || k.route() == KILN_ROUTE_PTX_JIT;
}

// Runs one test on the kernel's device: buffers poisoned, inputs copied in, one checked launch,
// outputs compared, then `o.repeats` timed launches. kiln::Error and kiln::Failure both name what
// failed; the caller records either as the test's failure.
void run_one(const kiln::Archive& archive, const kiln::Kernel& k, const KernelSpec& spec, const TestSpec& test,
             const RunOptions& o, TestResult& result) {
  const ShapeSpec* shape = nullptr;
  for (const ShapeSpec& s : spec.shapes) {
    if (s.name == test.shape) shape = &s;
  }
  // Arguments: device buffers for pointers, the shape's values (and, for a range shape, the
  // test's own values, checked against the shape by the manifest parser) for scalars.
  std::vector<std::unique_ptr<x::DeviceBuffer>> buffers(spec.params.size());
  std::uint64_t null_pointer = 0;
  std::vector<std::uint64_t> scalars(spec.params.size(), 0);
  std::vector<void*> args(spec.params.size(), nullptr);
  std::vector<std::vector<std::uint8_t>> expected_bytes(spec.params.size());
  std::vector<NpyArray> expected(spec.params.size());
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
      expected_bytes[i] = archive.read_member(output->path);
      expected[i] = parse_npy(ByteView(expected_bytes[i]), output->path);
      npy_view_as(&expected[i], p.type);  // bf16 / fp8 raw bits: compared as their type (pack checked the dtype)
      bytes = expected[i].data.size;
    }
    std::vector<std::uint8_t> in;
    NpyArray in_array;
    if (input != nullptr) {
      in = archive.read_member(input->path);
      in_array = parse_npy(ByteView(in), input->path);
      bytes = std::max<std::uint64_t>(bytes, in_array.data.size);
    }
    if (bytes == 0) {
      args[i] = &null_pointer;  // an unused pointer (Triton's scratch): NULL
      continue;
    }
    through_the_api([&] {
      buffers[i] = std::make_unique<x::DeviceBuffer>(k, static_cast<std::size_t>(bytes));
      // Poison first: 0xff bytes are NaN in every float format, so an output element the kernel
      // never wrote cannot pass as correct.
      buffers[i]->fill(0xff);
      if (input != nullptr) buffers[i]->write(in_array.data.data, static_cast<std::size_t>(in_array.data.size));
    }, "'" + p.name + "' (" + std::to_string(bytes) + " bytes)");
    args[i] = buffers[i]->argument();
  }

  through_the_api([&] {
    x::Choice choice = x::choice(k, args.data(), args.size());
    result.variant = choice.variant;
    result.code_path = choice.code_path;
    k.launch(args.data(), args.size());
    x::synchronize(k);
  }, "the kernel's launch");
  Tolerance tol = test.has_tolerance ? test.tolerance : spec.tolerance;
  result.passed = true;
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    if (expected_bytes[i].empty()) continue;
    const NpyArray& want = expected[i];
    std::vector<std::uint8_t> got_bytes(want.data.size);
    through_the_api([&] { buffers[i]->read(got_bytes.data(), got_bytes.size()); }, "'" + spec.params[i].name + "'");
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
  if (o.repeats > 0) {
    through_the_api([&] { result.median_us = x::time(k, args.data(), args.size(), static_cast<unsigned>(o.repeats)); },
                    "timing");
  }
  result.ran = true;
}

// The device a kernel was judged against, as an attestation records it.
void describe_device(const kiln::Kernel& k, RunDevice* device) {
  std::optional<x::Device> d = x::device_of(k);
  if (!d) return;
  device->known = true;
  device->vendor = d->vendor == "CUDA" ? "cuda" : "hip";
  device->name = d->name;
  device->arch = d->arch;
  device->compute_capability = d->cc_major > 0 ? std::to_string(d->cc_major) + "." + std::to_string(d->cc_minor) : "";
  device->driver = d->driver_version;
  device->memory_bytes = d->memory_bytes;
}

}  // namespace

std::vector<TestResult> run_test_vectors(const RunOptions& o, RunDevice* device) {
  kiln::Runtime rt;
  kiln::Archive archive;
  Manifest manifest;
  through_the_api([&] {
    rt = kiln::Runtime(runtime_options(o));
    archive = kiln::Archive(rt, o.archive);
    // The signed manifest, verified by libkiln before it is parsed here: its tests and files.
    std::string text = archive.read_member_text("kiln.toml");
    manifest = parse_manifest(text, o.archive + ":kiln.toml");
  });
  std::vector<TestResult> results;
  for (const KernelSpec& spec : manifest.kernels) {
    kiln::Kernel k;
    through_the_api([&] { k = archive.kernel(spec.name, o.device); });
    const bool on_device = runs_on_device(k);
    if (device != nullptr && !device->known && on_device) through_the_api([&] { describe_device(k, device); });
    TestResult base;
    base.kernel = spec.name;
    base.route = kiln_route_string(k.route());
    base.target = k.target();
    base.reason = k.reason_text();
    if (spec.tests.empty()) {
      base.detail = "the manifest declares no test vector for this kernel";
      results.push_back(base);
      continue;
    }
    std::set<std::string> reached;
    for (const TestSpec& test : spec.tests) {
      TestResult r = base;
      r.test = test.shape;
      if (!on_device) {
        r.detail = "not run: routes to " + r.route + " on this host";
        results.push_back(r);
        continue;
      }
      try {
        through_the_api([&] { run_one(archive, k, spec, test, o, r); });
      } catch (const Failure& e) {  // this test failed (a member, a driver call); the others still run
        r.ran = true;
        r.passed = false;
        r.detail = e.what();
      }
      if (r.ran) reached.insert(r.variant);
      results.push_back(r);
    }
    if (on_device) {
      for (const VariantSpec& v : spec.variants) {
        if (reached.count(v.name) == 0) results.back().unreached_variants.push_back(v.name);
      }
    }
  }
  return results;
}

}  // namespace kiln::cli
