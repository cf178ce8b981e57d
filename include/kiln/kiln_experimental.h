/*
 * libkiln's experimental calls: what kiln's own tools need beyond kiln.h, offered to any
 * embedder on weaker terms.
 *
 *  - Not part of the stable ABI. Every function here is exported under the version node
 *    KILN_EXPERIMENTAL of runtime/api/kiln.map and may change or go in any release, minor ones
 *    included. An embedder that uses them checks kiln_version() == KILN_VERSION_NUMBER at start.
 *  - Otherwise kiln.h's conventions hold: a kiln_status per call, the calling thread's message in
 *    kiln_last_error, borrowed strings valid while their parent lives, caller-sized structs filled
 *    by their *_init function, no exception across the boundary, nothing printed.
 *
 * What is here:
 *  - described targets: checking one, and the members a sparse pull for it must fetch (`kiln
 *    pull --target/--device`, `kiln preflight --target`);
 *  - members by position: their paths, roles and sizes, present or absent;
 *  - device tools on a resolved kernel's device: memory, copies, synchronisation and timing
 *    (`kiln verify --run` runs an archive's test vectors with them), and which code a call takes.
 */
#ifndef KILN_KILN_EXPERIMENTAL_H
#define KILN_KILN_EXPERIMENTAL_H

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Described targets ----------------------------------------------------------------- */

/* KILN_OK when `target` names a GPU kiln can judge ("sm_80", "gfx90a:xnack-"; as
 * kiln_archive_preflight_target takes it) and `driver` is NULL, "" or a CUDA driver version
 * ("12.4"); else KILN_ERR_INVALID_ARGUMENT with the reason (the target named). Needs no archive. */
KILN_API kiln_status kiln_x_target_check(const char* target, const char* driver);

/* The members (positions in the archive's index, ascending, each once) that the routes of every
 * kernel read on a described target: the code each would load, its variants' code for the same
 * entry, and code the resolver must read to judge (PTX, where no native code fits). Judged on the
 * signed index alone, so it works on a sparse archive that holds no code yet: what a sparse pull
 * for that target must fetch. `count` receives how many there are; KILN_ERR_BUFFER_TOO_SMALL when
 * more than `capacity` (call with 0 to ask). Target and driver as kiln_x_target_check. */
KILN_API kiln_status kiln_x_archive_plan_target(kiln_archive* archive, const char* target, const char* driver,
                                                size_t* members, size_t capacity, size_t* count);

/* The same for every GPU of this host (CUDA and HIP ordinals from 0 up to the first neither
 * backend has). `devices` (may be NULL with `devices_capacity` 0) receives each device's
 * description, one per line, NUL-terminated; `devices_needed` (may be NULL) its size with the NUL.
 * KILN_ERR_NOT_FOUND when this host has no GPU; KILN_ERR_BUFFER_TOO_SMALL when either list does
 * not fit (`count` and `devices_needed` are set: call again). */
KILN_API kiln_status kiln_x_archive_plan_host(kiln_archive* archive, size_t* members, size_t capacity, size_t* count,
                                              char* devices, size_t devices_capacity, size_t* devices_needed);

/* ---- Members by position --------------------------------------------------------------- */

typedef struct kiln_x_member_info {
  uint32_t size;             /* sizeof(kiln_x_member_info), set by kiln_x_member_info_init */
  const char* path;          /* "kiln.toml", "kernels/scale.sm_90.cubin"; borrowed from the archive */
  const char* role;          /* the index's role byte by name (schema/FORMAT.md §3): "manifest",
                                "code", "source", "ir", "testdata" or "meta" */
  uint64_t content_size;     /* bytes of content (after decompression) */
  uint64_t stored_size;      /* bytes the file holds for it (compressed, unpadded) */
  int present;               /* 0 when a sparse archive lacks its bytes, else 1 */
} kiln_x_member_info;

KILN_API kiln_status kiln_x_member_info_init(kiln_x_member_info* info, size_t size);
/* How many members the archive's index lists (present or not). */
KILN_API size_t kiln_x_archive_member_count(const kiln_archive* archive);
/* Member `index` (< kiln_x_archive_member_count) as the signed index states it; nothing is read.
 * KILN_ERR_NOT_FOUND past the end. */
KILN_API kiln_status kiln_x_archive_member(const kiln_archive* archive, size_t index, kiln_x_member_info* info);

/* ---- Device tools on a kernel's device ------------------------------------------------- */

typedef struct kiln_x_device_info {
  uint32_t size;               /* sizeof(kiln_x_device_info), set by kiln_x_device_info_init */
  const char* vendor;          /* "CUDA", "HIP" */
  const char* name;            /* "NVIDIA H200" */
  const char* arch;            /* what code must target: "sm_90", "gfx90a:sramecc+:xnack-" */
  const char* driver_version;  /* "13.0"; the HIP runtime's for AMD */
  int cc_major, cc_minor;      /* CUDA's compute capability; 0 elsewhere */
  uint64_t memory_bytes;       /* the device's memory; 0 when its driver cannot say */
} kiln_x_device_info;

KILN_API kiln_status kiln_x_device_info_init(kiln_x_device_info* info, size_t size);

/* The device `kernel` was judged against (strings borrowed from the runtime). KILN_ERR_NOT_FOUND
 * when there was none (no driver, no such device): the kernel's reason says which. */
KILN_API kiln_status kiln_x_kernel_device(const kiln_kernel* kernel, kiln_x_device_info* info);

/* Device memory, copies and synchronisation on the device `kernel` runs on (its route native or
 * PTX-JIT; any other route is KILN_ERR_INVALID_ARGUMENT saying so). Addresses are the device's,
 * passed to a launch as a pointer argument's value. Every copy and fill is synchronous. A driver
 * failure is KILN_ERR_DRIVER with the driver's name and text of it; a driver or runtime without
 * these calls (they are optional to libkiln) KILN_ERR_UNSUPPORTED saying so. */
KILN_API kiln_status kiln_x_device_alloc(const kiln_kernel* kernel, size_t bytes, uint64_t* address);
KILN_API kiln_status kiln_x_device_free(const kiln_kernel* kernel, uint64_t address);
KILN_API kiln_status kiln_x_device_fill(const kiln_kernel* kernel, uint64_t address, unsigned char byte, size_t bytes);
KILN_API kiln_status kiln_x_device_write(const kiln_kernel* kernel, uint64_t address, const void* data, size_t bytes);
KILN_API kiln_status kiln_x_device_read(const kiln_kernel* kernel, void* data, uint64_t address, size_t bytes);
/* Waits for all work on the kernel's device; a kernel that failed on it is KILN_ERR_DRIVER. */
KILN_API kiln_status kiln_x_device_synchronize(const kiln_kernel* kernel);

/* Launches `kernel` `repeats` times (1 to 100000) on the default stream as kiln_kernel_launch
 * does, each between two device events, and writes the median of their times in microseconds. */
KILN_API kiln_status kiln_x_kernel_time(kiln_kernel* kernel, void* const* args, size_t arg_count, unsigned repeats,
                                        double* median_us);

/* Which code a call with these arguments takes on the kernel's device (nothing is launched):
 * `variant` the manifest's name of the variant ("" for the kernel's own code) and `code_path`
 * the member it runs ("" when the kernel does not run on the device). Borrowed from the kernel. */
KILN_API kiln_status kiln_x_kernel_choice(const kiln_kernel* kernel, void* const* args, size_t arg_count,
                                          const char** variant, const char** code_path);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_EXPERIMENTAL_H */
