/* matmul_routes ARCHIVE TRUSTED_KEYS: the route of kernel matmul_relu on device 0, and why. */
#include <stdio.h>
#include <kiln/kiln.h>

/* Runs instead of the kernel where no verified code object fits: the launch's own arguments. */
static int matmul_relu_on_cpu(const kiln_call_info* info, void* const* args, size_t n_args, void* stream, void* user) {
  const float *a = *(float* const*)args[0], *b = *(float* const*)args[1];
  float* c = *(float* const*)args[2];
  int m = *(const int*)args[3], n = *(const int*)args[4], k = *(const int*)args[5], i, j, p;
  (void)n_args, (void)stream, (void)user;
  printf("reference runs: %s\n", info->reason_text);
  for (i = 0; i < m; ++i)
    for (j = 0; j < n; ++j) {
      float sum = 0;
      for (p = 0; p < k; ++p) sum += a[i * k + p] * b[p * n + j];
      c[i * n + j] = sum > 0 ? sum : 0;
    }
  return 0;
}

int main(int argc, char** argv) {
  static float a[256 * 256], b[256 * 256], c[256 * 256];
  float *pa = a, *pb = b, *pc = c;
  int m = 256, n = 256, k = 256;
  void* args[] = {&pa, &pb, &pc, &m, &n, &k};  /* one pointer per kernel parameter */
  kiln_runtime_options options;
  kiln_runtime* runtime;
  kiln_archive* archive;
  kiln_kernel* kernel;
  kiln_route route;
  kiln_stats stats;
  char error[1024] = "";
  if (argc != 3) return fprintf(stderr, "usage: %s ARCHIVE TRUSTED_KEYS\n", argv[0]), 2;

  kiln_runtime_options_init(&options, sizeof options);  /* a function, not a macro: ctypes and cgo call it too */
  options.trust_path = argv[2];                         /* a PEM public key or a folder of them */
  options.error_buffer = error, options.error_buffer_size = sizeof error;
  if (kiln_runtime_create(&runtime, &options) != KILN_OK) return fprintf(stderr, "%s\n", error), 1;
  kiln_runtime_register_reference(runtime, "matmul_relu", matmul_relu_on_cpu, NULL);
  if (kiln_archive_open(runtime, argv[1], &archive) != KILN_OK || /* signatures checked here */
      kiln_archive_warm(archive, 0) != KILN_OK ||                 /* every kernel loaded for device 0 */
      kiln_archive_get_kernel(archive, "matmul_relu", 0, &kernel) != KILN_OK) {
    kiln_last_error(error, sizeof error, NULL);                   /* why, from this thread */
    return fprintf(stderr, "%s\n", error), 1;
  }
  printf("%s: %s\n", kiln_route_string(kiln_kernel_route(kernel)), kiln_kernel_reason_text(kernel));
  if (kiln_kernel_route(kernel) == KILN_ROUTE_REFERENCE) {  /* on a GPU, args would hold device pointers */
    a[0] = b[0] = 2;
    if (kiln_kernel_launch(kernel, args, 6, NULL, &route) != KILN_OK) return 1;
    stats.size = sizeof stats;
    kiln_runtime_stats(runtime, &stats);
    printf("c[0] = %g via %s; launches through the reference: %llu\n", c[0], kiln_route_string(route),
           (unsigned long long)stats.launches_reference);
  }
  kiln_archive_destroy(archive);
  kiln_runtime_destroy(runtime);
  return 0;
}
