/* A minimal C embedder, built against an *installed* libkiln (find_package(kiln) or
 * pkg-config kiln): opens an archive and prints, for every kernel, the route it takes on
 * device 0 and why. usage: kiln_routes ARCHIVE TRUSTED_KEY */
#include <stdio.h>

#include <kiln/kiln.h>

int main(int argc, char** argv) {
  kiln_runtime_options options;
  kiln_runtime* runtime = NULL;
  kiln_archive* archive = NULL;
  char error[1024] = "";
  size_t i;
  if (argc != 3) return fprintf(stderr, "usage: %s ARCHIVE TRUSTED_KEY\n", argv[0]), 2;
  kiln_runtime_options_init(&options, sizeof options);
  options.trust_path = argv[2];
  options.error_buffer = error;
  options.error_buffer_size = sizeof error;
  if (kiln_runtime_create(&runtime, &options) != KILN_OK) return fprintf(stderr, "%s\n", error), 1;
  if (kiln_archive_open(runtime, argv[1], &archive) != KILN_OK) {
    kiln_runtime_last_error(runtime, error, sizeof error, NULL);
    fprintf(stderr, "%s\n", error);
    kiln_runtime_destroy(runtime);
    return 1;
  }
  printf("libkiln %s: %s %s (%s)\n", kiln_version_string(), kiln_archive_package(archive), kiln_archive_revision(archive),
         kiln_archive_digest(archive));
  for (i = 0; i < kiln_archive_kernel_count(archive); ++i) {
    kiln_kernel* kernel = NULL;
    if (kiln_archive_get_kernel(archive, kiln_archive_kernel_name(archive, i), 0, &kernel) != KILN_OK) continue;
    printf("  %-16s %-9s %s\n", kiln_archive_kernel_name(archive, i), kiln_route_string(kiln_kernel_route(kernel)),
           kiln_kernel_reason_text(kernel));
  }
  kiln_archive_destroy(archive);
  kiln_runtime_destroy(runtime);
  return 0;
}
