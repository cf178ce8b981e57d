// Embedding libkiln from C++ through its C++ face, kiln/kiln.hpp: the same flow as examples/embed_c,
// with owners that destroy their handles, kiln::Error for every failed call, and a lambda-free
// reference. On a GPU the kernel runs natively; without one the call routes to the CPU reference
// and the program prints why.
// usage: matmul_demo_cpp ARCHIVE TRUSTED_KEY
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace {

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

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 3) throw std::runtime_error(std::string("usage: ") + argv[0] + " ARCHIVE TRUSTED_KEY");
  // The runtime is declared first, so it outlives the archive (and the archive its kernel).
  kiln::Runtime rt(kiln::RuntimeOptions().trust_path(argv[2]));
  rt.register_reference("matmul_relu", reference, nullptr);

  kiln::Archive archive(rt, argv[1]);
  archive.warm(0);
  kiln::Kernel kernel = archive.kernel("matmul_relu", 0);
  std::printf("archive %s: %s %s\n", archive.digest().c_str(), archive.package().c_str(), archive.revision().c_str());
  std::printf("kernel matmul_relu on device 0: route %s (%s)\n  %s\n", kiln::to_string(kernel.route()),
              kiln::to_string(kernel.reason()), kernel.reason_text().c_str());

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
  kiln_route route = kernel.launch(args);
  if (cuda.ready) cuda.sync(), cuda.d2h(c.data(), dc, c.size() * 4);
  std::vector<float> want = matmul_relu(a, b, M, N, K);
  double max_error = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    max_error = std::isnan(c[i]) ? INFINITY : std::fmax(max_error, std::fabs(c[i] - want[i]));  // NaN: never written
  }
  bool ok = max_error < 1e-3;
  std::printf("launched via %s: max abs error %.3g -> %s\n", kiln::to_string(route), max_error, ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "matmul_demo_cpp: %s\n", e.what());
  return 1;
}
