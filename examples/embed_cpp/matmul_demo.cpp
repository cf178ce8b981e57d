// Embedding libkiln from C++: the same flow as examples/embed_c, with RAII owners for the
// handles and a lambda-free reference. On a GPU the kernel runs natively; without one the
// call routes to the CPU reference and the program prints why.
// usage: matmul_demo_cpp ARCHIVE TRUSTED_KEY
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

using RuntimePtr = std::unique_ptr<kiln_runtime, decltype(&kiln_runtime_destroy)>;
using ArchivePtr = std::unique_ptr<kiln_archive, decltype(&kiln_archive_destroy)>;
constexpr int M = 256, N = 256, K = 256;

// Device memory through the CUDA driver, if this machine has one (loaded, never linked).
struct Cuda {
  using Alloc = int (*)(unsigned long long*, size_t);
  using H2D = int (*)(unsigned long long, const void*, size_t);
  using D2H = int (*)(void*, unsigned long long, size_t);
  Alloc alloc = nullptr;
  H2D h2d = nullptr;
  D2H d2h = nullptr;
  int (*sync)() = nullptr;
  bool ready = false;
  Cuda() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<int (*)(int*, int)>(dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    auto set = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxSetCurrent"));
    alloc = reinterpret_cast<Alloc>(dlsym(lib, "cuMemAlloc_v2"));
    h2d = reinterpret_cast<H2D>(dlsym(lib, "cuMemcpyHtoD_v2"));
    d2h = reinterpret_cast<D2H>(dlsym(lib, "cuMemcpyDtoH_v2"));
    sync = reinterpret_cast<int (*)()>(dlsym(lib, "cuCtxSynchronize"));
    int dev = 0;
    void* ctx = nullptr;
    ready = init(0) == 0 && get(&dev, 0) == 0 && retain(&ctx, dev) == 0 && set(ctx) == 0;
  }
};
Cuda cuda;

std::vector<float> matmul_relu(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k) {
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc > 0 ? acc : 0;
    }
  return c;
}

// The registered reference: receives the launch's own arguments (device or host pointers).
int reference(const kiln_call_info* info, void* const* args, size_t, void*, void*) {
  std::printf("reference runs for '%s': %s\n", info->kernel, info->reason_text);
  int m = *static_cast<int*>(args[3]), n = *static_cast<int*>(args[4]), k = *static_cast<int*>(args[5]);
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n);
  if (cuda.ready) {
    cuda.d2h(a.data(), *static_cast<unsigned long long*>(args[0]), a.size() * 4);
    cuda.d2h(b.data(), *static_cast<unsigned long long*>(args[1]), b.size() * 4);
    std::vector<float> c = matmul_relu(a, b, m, n, k);
    return cuda.h2d(*static_cast<unsigned long long*>(args[2]), c.data(), c.size() * 4);
  }
  std::memcpy(a.data(), *static_cast<float**>(args[0]), a.size() * 4);
  std::memcpy(b.data(), *static_cast<float**>(args[1]), b.size() * 4);
  std::vector<float> c = matmul_relu(a, b, m, n, k);
  std::memcpy(*static_cast<float**>(args[2]), c.data(), c.size() * 4);
  return 0;
}

std::string last_error(kiln_runtime* rt) {
  char buf[1024];
  kiln_runtime_last_error(rt, buf, sizeof buf, nullptr);
  return buf;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 3) throw std::runtime_error(std::string("usage: ") + argv[0] + " ARCHIVE TRUSTED_KEY");
  kiln_runtime_options options;
  kiln_runtime_options_init(&options, sizeof options);
  options.trust_path = argv[2];
  char why[1024] = {};
  options.error_buffer = why;
  options.error_buffer_size = sizeof why;
  kiln_runtime* raw_rt = nullptr;
  if (kiln_runtime_create(&raw_rt, &options) != KILN_OK) throw std::runtime_error(why);
  RuntimePtr rt(raw_rt, kiln_runtime_destroy);
  kiln_runtime_register_reference(rt.get(), "matmul_relu", reference, nullptr);

  kiln_archive* raw_archive = nullptr;
  if (kiln_archive_open(rt.get(), argv[1], &raw_archive) != KILN_OK) throw std::runtime_error(last_error(rt.get()));
  ArchivePtr archive(raw_archive, kiln_archive_destroy);
  kiln_kernel* kernel = nullptr;
  if (kiln_archive_warm(archive.get(), 0) != KILN_OK || kiln_archive_get_kernel(archive.get(), "matmul_relu", 0, &kernel) != KILN_OK) {
    throw std::runtime_error(last_error(rt.get()));
  }
  std::printf("archive %s: %s %s\n", kiln_archive_digest(archive.get()), kiln_archive_package(archive.get()),
              kiln_archive_revision(archive.get()));
  std::printf("kernel matmul_relu on device 0: route %s (%s)\n  %s\n", kiln_route_string(kiln_kernel_route(kernel)),
              kiln_reason_string(kiln_kernel_reason(kernel)), kiln_kernel_reason_text(kernel));

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(M * K), b(K * N), c(M * N, NAN);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  int m = M, n = N, k = K;
  unsigned long long da = 0, db = 0, dc = 0;
  float *pa = a.data(), *pb = b.data(), *pc = c.data();
  void* args[6] = {&pa, &pb, &pc, &m, &n, &k};
  if (cuda.ready) {
    cuda.alloc(&da, a.size() * 4), cuda.alloc(&db, b.size() * 4), cuda.alloc(&dc, c.size() * 4);
    cuda.h2d(da, a.data(), a.size() * 4), cuda.h2d(db, b.data(), b.size() * 4);
    args[0] = &da, args[1] = &db, args[2] = &dc;
  }
  kiln_route route;
  if (kiln_kernel_launch(kernel, args, 6, nullptr, &route) != KILN_OK) throw std::runtime_error(last_error(rt.get()));
  if (cuda.ready) cuda.sync(), cuda.d2h(c.data(), dc, c.size() * 4);
  std::vector<float> want = matmul_relu(a, b, M, N, K);
  double max_error = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    max_error = std::isnan(c[i]) ? INFINITY : std::fmax(max_error, std::fabs(c[i] - want[i]));  // NaN: never written
  }
  bool ok = max_error < 1e-3;
  std::printf("launched via %s: max abs error %.3g -> %s\n", kiln_route_string(route), max_error, ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "matmul_demo_cpp: %s\n", e.what());
  return 1;
}
