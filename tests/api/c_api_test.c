/* The C API used from C, as an embedder would. On a machine without a GPU (or with the
 * driver path pointed at a missing library) every call routes to the registered reference.
 * usage: c_api_test ARCHIVE TRUSTED_KEY */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

static int failures = 0;
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

struct calls {
  int count;
  float seen_a;
  void* seen_stream;
  unsigned seen_reason;
  char reason_text[512];
};

/* The reference: the same y = a * x on the CPU, over the same argument array. */
static int scale_reference(const kiln_call_info* info, void* const* args, size_t arg_count, void* stream, void* user) {
  struct calls* calls = (struct calls*)user;
  float* y = *(float**)args[0];
  const float* x = *(const float**)args[1];
  float a = *(const float*)args[2];
  unsigned n = *(const unsigned*)args[3];
  unsigned i;
  if (arg_count != 4) return 1;
  for (i = 0; i < n; ++i) y[i] = a * x[i];
  calls->count++;
  calls->seen_a = a;
  calls->seen_stream = stream;
  calls->seen_reason = info->reason;
  strncpy(calls->reason_text, info->reason_text, sizeof calls->reason_text - 1);
  return 0;
}

static kiln_runtime* make_runtime(const char* trust, unsigned policy) {
  kiln_runtime_options options;
  kiln_runtime* runtime = NULL;
  kiln_runtime_options_init(&options, sizeof options);
  options.trust_path = trust;
  options.policy = policy;
  options.cuda_driver_path = "libcuda-not-installed-here.so.1"; /* the no-driver route, deterministically */
  CHECK(kiln_runtime_create(&runtime, &options) == KILN_OK);
  return runtime;
}

int main(int argc, char** argv) {
  kiln_runtime* runtime;
  kiln_archive* archive = NULL;
  kiln_kernel* kernel = NULL;
  struct calls calls;
  float x[1024], y[1024];
  float* y_ptr = y;
  const float* x_ptr = x;
  float a = 2.5f;
  unsigned n = 1024, i;
  void* args[4];
  kiln_route route = KILN_ROUTE_NATIVE;
  int stream_token = 0;
  char message[1024];
  kiln_stats stats;
  size_t needed = 0;

  if (argc != 3) {
    fprintf(stderr, "usage: %s ARCHIVE TRUSTED_KEY\n", argv[0]);
    return 2;
  }
  memset(&calls, 0, sizeof calls);
  runtime = make_runtime(argv[2], KILN_POLICY_FALLBACK);
  if (runtime == NULL) return 1;

  CHECK(kiln_archive_open(runtime, argv[1], &archive) == KILN_OK);
  if (archive == NULL) return 1;
  CHECK(strncmp(kiln_archive_digest(archive), "sha256:", 7) == 0);
  CHECK(strcmp(kiln_archive_package(archive), "scale") == 0);
  CHECK(kiln_archive_sequence(archive) == 4);
  CHECK(kiln_archive_kernel_count(archive) == 2);

  CHECK(kiln_archive_get_kernel(archive, "scale", 0, &kernel) == KILN_OK);
  CHECK(kiln_kernel_route(kernel) == KILN_ROUTE_REFERENCE);
  CHECK(kiln_kernel_reason(kernel) == KILN_REASON_NO_DRIVER);
  CHECK(strstr(kiln_kernel_reason_text(kernel), "libcuda-not-installed-here.so.1") != NULL);
  CHECK(strcmp(kiln_kernel_revision(kernel), "test-1") == 0);
  CHECK(kiln_kernel_param_count(kernel) == 4);
  printf("route %s (%s): %s\n", kiln_route_string(kiln_kernel_route(kernel)),
         kiln_reason_string(kiln_kernel_reason(kernel)), kiln_kernel_reason_text(kernel));

  /* Without a registered reference, the call is refused with a reason, not a crash. */
  args[0] = &y_ptr;
  args[1] = &x_ptr;
  args[2] = &a;
  args[3] = &n;
  CHECK(kiln_kernel_launch(kernel, args, 4, &stream_token, &route) == KILN_ERR_REFUSED);
  kiln_runtime_last_error(runtime, message, sizeof message, &needed);
  CHECK(strstr(message, "no reference is registered") != NULL);

  /* With one, the reference runs with the same arguments and stream. */
  CHECK(kiln_runtime_register_reference(runtime, "scale", scale_reference, &calls) == KILN_OK);
  for (i = 0; i < n; ++i) {
    x[i] = (float)i * 0.5f - 7.0f;
    y[i] = -1.0f;
  }
  CHECK(kiln_kernel_launch(kernel, args, 4, &stream_token, &route) == KILN_OK);
  CHECK(route == KILN_ROUTE_REFERENCE);
  CHECK(calls.count == 1);
  CHECK(calls.seen_a == 2.5f);
  CHECK(calls.seen_stream == &stream_token);
  CHECK(calls.seen_reason == KILN_REASON_NO_DRIVER);
  for (i = 0; i < n; ++i) CHECK(y[i] == 2.5f * x[i]);

  /* A wrong argument count is an error that names the kernel. */
  CHECK(kiln_kernel_launch(kernel, args, 3, NULL, NULL) == KILN_ERR_INVALID_ARGUMENT);
  kiln_runtime_last_error(runtime, message, sizeof message, NULL);
  CHECK(strstr(message, "takes 4 arguments") != NULL);

  /* fallback = "refuse" in the manifest: refused even with a reference registered. */
  CHECK(kiln_runtime_register_reference(runtime, "scale_strict", scale_reference, &calls) == KILN_OK);
  CHECK(kiln_archive_get_kernel(archive, "scale_strict", 0, &kernel) == KILN_OK);
  CHECK(kiln_kernel_route(kernel) == KILN_ROUTE_REFUSED);
  CHECK(kiln_kernel_launch(kernel, args, 4, NULL, NULL) == KILN_ERR_REFUSED);

  CHECK(kiln_archive_get_kernel(archive, "no_such_kernel", 0, &kernel) == KILN_ERR_NOT_FOUND);
  CHECK(kernel == NULL);

  stats.size = sizeof stats;
  CHECK(kiln_runtime_stats(runtime, &stats) == KILN_OK);
  CHECK(stats.launches_reference == 1);
  CHECK(stats.launches_refused == 2);
  CHECK(stats.archives_opened == 1);

  kiln_archive_destroy(archive);
  kiln_runtime_destroy(runtime);

  /* The strict runtime policy refuses where the manifest would allow the reference. */
  runtime = make_runtime(argv[2], KILN_POLICY_STRICT);
  CHECK(kiln_archive_open(runtime, argv[1], &archive) == KILN_OK);
  CHECK(kiln_runtime_register_reference(runtime, "scale", scale_reference, &calls) == KILN_OK);
  CHECK(kiln_archive_get_kernel(archive, "scale", 0, &kernel) == KILN_OK);
  CHECK(kiln_kernel_route(kernel) == KILN_ROUTE_REFUSED);
  CHECK(kiln_kernel_launch(kernel, args, 4, NULL, &route) == KILN_ERR_REFUSED);
  kiln_runtime_last_error(runtime, message, sizeof message, NULL);
  CHECK(strstr(message, "strict") != NULL);
  kiln_archive_destroy(archive);
  kiln_runtime_destroy(runtime);

  /* Destroy functions accept NULL. */
  kiln_archive_destroy(NULL);
  kiln_runtime_destroy(NULL);

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
