/* Embedding libkiln from C: open a signed archive, warm it up, launch the matmul + ReLU,
 * check the answer. On a GPU the kernel runs natively; on a machine without one every call
 * routes to the CPU reference registered below, and the program prints why.
 * usage: matmul_demo ARCHIVE TRUSTED_KEY */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

enum { M = 256, N = 256, K = 256 };

/* The few CUDA driver calls the demo needs for device memory, loaded only if present. */
typedef int (*cu_fn)();
static struct { cu_fn init, device_get, ctx_retain, ctx_set, alloc, h2d, d2h, sync; } cu;
static int gpu_memory(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  int dev = 0;
  void* ctx = NULL;
  if (!lib) return 0;
  cu.init = (cu_fn)dlsym(lib, "cuInit"), cu.device_get = (cu_fn)dlsym(lib, "cuDeviceGet");
  cu.ctx_retain = (cu_fn)dlsym(lib, "cuDevicePrimaryCtxRetain"), cu.ctx_set = (cu_fn)dlsym(lib, "cuCtxSetCurrent");
  cu.alloc = (cu_fn)dlsym(lib, "cuMemAlloc_v2"), cu.h2d = (cu_fn)dlsym(lib, "cuMemcpyHtoD_v2");
  cu.d2h = (cu_fn)dlsym(lib, "cuMemcpyDtoH_v2"), cu.sync = (cu_fn)dlsym(lib, "cuCtxSynchronize");
  return cu.init(0) == 0 && cu.device_get(&dev, 0) == 0 && cu.ctx_retain(&ctx, dev) == 0 && cu.ctx_set(ctx) == 0;
}

/* The reference: relu(A x B) on the CPU. With GPU memory it copies through the host. */
static void cpu_matmul_relu(const float* a, const float* b, float* c, int m, int n, int k) {
  int i, j, p;
  for (i = 0; i < m; ++i)
    for (j = 0; j < n; ++j) {
      float acc = 0;
      for (p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc > 0 ? acc : 0;
    }
}
static int reference(const kiln_call_info* info, void* const* args, size_t n_args, void* stream, void* on_gpu) {
  int m = *(int*)args[3], n = *(int*)args[4], k = *(int*)args[5];
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c = malloc(sizeof(float) * m * n);
  (void)stream, (void)n_args;
  printf("reference runs for '%s': %s\n", info->kernel, info->reason_text);
  if (*(int*)on_gpu) {
    cu.d2h(a, *(unsigned long long*)args[0], sizeof(float) * m * k);
    cu.d2h(b, *(unsigned long long*)args[1], sizeof(float) * k * n);
  } else {
    memcpy(a, *(float**)args[0], sizeof(float) * m * k), memcpy(b, *(float**)args[1], sizeof(float) * k * n);
  }
  cpu_matmul_relu(a, b, c, m, n, k);
  if (*(int*)on_gpu) cu.h2d(*(unsigned long long*)args[2], c, sizeof(float) * m * n);
  else memcpy(*(float**)args[2], c, sizeof(float) * m * n);
  free(a), free(b), free(c);
  return 0;
}

int main(int argc, char** argv) {
  static float a[M * K], b[K * N], c[M * N], want[M * N];
  int m = M, n = N, k = K, on_gpu = gpu_memory(), i;
  unsigned long long da = 0, db = 0, dc = 0;
  void *pa = a, *pb = b, *pc = c, *args[8];
  unsigned long long no_scratch = 0; /* Triton 3.x kernels take two scratch pointers; NULL here */
  kiln_runtime_options options;
  kiln_runtime* runtime = NULL;
  kiln_archive* archive = NULL;
  kiln_kernel* kernel = NULL;
  kiln_route route;
  double max_error = 0;
  char error[1024];

  if (argc != 3) return fprintf(stderr, "usage: %s ARCHIVE TRUSTED_KEY\n", argv[0]), 2;
  kiln_runtime_options_init(&options, sizeof options);
  options.trust_path = argv[2];
  options.error_buffer = error, options.error_buffer_size = sizeof error;
  if (kiln_runtime_create(&runtime, &options) != KILN_OK) return fprintf(stderr, "runtime: %s\n", error), 1;
  kiln_runtime_register_reference(runtime, "matmul_relu", reference, &on_gpu);
  if (kiln_archive_open(runtime, argv[1], &archive) != KILN_OK || kiln_archive_warm(archive, 0) != KILN_OK ||
      kiln_archive_get_kernel(archive, "matmul_relu", 0, &kernel) != KILN_OK) {
    kiln_runtime_last_error(runtime, error, sizeof error, NULL);
    return fprintf(stderr, "kiln: %s\n", error), 1;
  }
  printf("archive %s: %s %s\n", kiln_archive_digest(archive), kiln_archive_package(archive), kiln_archive_revision(archive));
  printf("kernel matmul_relu on device 0: route %s (%s)\n  %s\n", kiln_route_string(kiln_kernel_route(kernel)),
         kiln_reason_string(kiln_kernel_reason(kernel)), kiln_kernel_reason_text(kernel));

  srand(42);
  for (i = 0; i < M * K; ++i) a[i] = (float)rand() / (float)RAND_MAX * 2 - 1;
  for (i = 0; i < K * N; ++i) b[i] = (float)rand() / (float)RAND_MAX * 2 - 1;
  for (i = 0; i < M * N; ++i) c[i] = NAN; /* poison: an output never written shows as NaN */
  if (on_gpu) {
    cu.alloc(&da, sizeof a), cu.alloc(&db, sizeof b), cu.alloc(&dc, sizeof c);
    cu.h2d(da, a, sizeof a), cu.h2d(db, b, sizeof b);
    args[0] = &da, args[1] = &db, args[2] = &dc;
  } else {
    args[0] = &pa, args[1] = &pb, args[2] = &pc;
  }
  args[3] = &m, args[4] = &n, args[5] = &k, args[6] = &no_scratch, args[7] = &no_scratch;
  if (kiln_kernel_launch(kernel, args, kiln_kernel_param_count(kernel), NULL, &route) != KILN_OK) {
    kiln_runtime_last_error(runtime, error, sizeof error, NULL);
    return fprintf(stderr, "launch: %s\n", error), 1;
  }
  if (on_gpu) cu.sync(), cu.d2h(c, dc, sizeof c);
  cpu_matmul_relu(a, b, want, M, N, K);
  for (i = 0; i < M * N; ++i) max_error = isnan(c[i]) ? INFINITY : fmax(max_error, fabs(c[i] - want[i]));
  printf("launched via %s: max abs error %.3g -> %s\n", kiln_route_string(route), max_error, max_error < 1e-3 ? "correct" : "WRONG");
  kiln_archive_destroy(archive);
  kiln_runtime_destroy(runtime);
  return max_error < 1e-3 ? 0 : 1;
}
