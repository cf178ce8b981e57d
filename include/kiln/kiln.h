/*
 * libkiln: open a signed kiln archive, match its kernels to the GPU in front of it, launch
 * them, and route every call the archive cannot serve natively to a reference function the
 * host registered, saying why.
 *
 * This header is the whole public API and the contract. Conventions:
 *  - Every function that can fail returns a kiln_status. Values are fixed and never reused.
 *  - Opaque handles come in create/destroy pairs; every destroy function accepts NULL.
 *  - An `out` pointer-to-pointer parameter receives an object the caller owns and destroys.
 *    A function returning a pointer (a getter) lends it: it lives as long as its parent.
 *  - Strings are UTF-8, NUL-terminated, and borrowed for the duration of the call unless
 *    stated. Buffers go as pointer + length.
 *  - Option structs carry their own size in their first field; fill them with the matching
 *    *_init function, which works from any language (no macros to expand).
 *  - The library never prints (logging goes to a callback you set), never exits or aborts,
 *    and no C++ exception crosses this boundary.
 *  - Threading is stated per object below.
 *  - Errors (0.2): every function returning a kiln_status records the outcome for the calling
 *    thread: a failure (argument errors included) stores its message, a success clears it.
 *    kiln_last_error reads it, on the same thread, right after the call; so it also explains
 *    a failed kiln_runtime_create. Go may move a goroutine to another OS thread between two
 *    cgo calls: make the call and read its message in one C function of the cgo preamble, as
 *    examples/go does (one cgo call runs on one thread), or hold runtime.LockOSThread across
 *    both. The two error-reading functions themselves change nothing.
 *  - Destroying a handle twice is a caller error; libkiln recognises a handle it no longer
 *    knows and ignores it rather than freeing it again (0.2).
 *  - A getter given a NULL handle returns "" for a string, 0 for a number.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KILN_BUILDING_LIBRARY)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/* ---- Version --------------------------------------------------------------------------- */

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 7
#define KILN_VERSION_PATCH 3
#define KILN_VERSION_NUMBER (KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH)

/* The version of the library actually loaded, as KILN_VERSION_NUMBER computes it. */
KILN_API unsigned kiln_version(void);
/* The same as "MAJOR.MINOR.PATCH"; a static string. */
KILN_API const char* kiln_version_string(void);

/* ---- Status ---------------------------------------------------------------------------- */

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a bad option, a wrong argument count */
  KILN_ERR_IO = 2,               /* the operating system refused: missing file, permission */
  KILN_ERR_MALFORMED = 3,        /* the archive does not follow the format */
  KILN_ERR_INTEGRITY = 4,        /* a digest does not match: the archive was changed */
  KILN_ERR_SIGNATURE = 5,        /* no valid signature from enough trusted keys */
  KILN_ERR_MANIFEST = 6,         /* kiln.toml inside the archive is not valid */
  KILN_ERR_CODE_OBJECT = 7,      /* a code object is not what the index says */
  KILN_ERR_LIMIT = 8,            /* a size or count above a fixed bound */
  KILN_ERR_UNSUPPORTED = 9,      /* valid, but this build lacks the feature */
  KILN_ERR_NOT_FOUND = 10,       /* no kernel of that name; no reference of that name */
  KILN_ERR_REFUSED = 11,         /* the call cannot run: no fitting kernel and no usable reference */
  KILN_ERR_DRIVER = 12,          /* the GPU driver failed a call; the message has its error */
  KILN_ERR_REFERENCE_FAILED = 13,/* the host's reference function returned non-zero */
  KILN_ERR_BUFFER_TOO_SMALL = 14,/* the output buffer is too small; the needed size is returned */
  KILN_ERR_OUT_OF_MEMORY = 15,
  KILN_ERR_INTERNAL = 16         /* a bug in kiln; the message says where */
} kiln_status;

/* A short static description of a status, e.g. "integrity check failed". Never NULL. */
KILN_API const char* kiln_status_string(kiln_status status);

/* ---- Routes ---------------------------------------------------------------------------- */

typedef enum kiln_route {
  KILN_ROUTE_NATIVE = 1,    /* a cubin (or fatbin cubin) built for this device runs */
  KILN_ROUTE_PTX_JIT = 2,   /* PTX compiled by the driver for this device runs */
  KILN_ROUTE_REFERENCE = 3, /* the host's registered reference function runs instead */
  KILN_ROUTE_REFUSED = 4    /* nothing runs; the call fails with KILN_ERR_REFUSED */
} kiln_route;

/* Why a route was chosen. Values are fixed and never reused. */
typedef enum kiln_reason {
  KILN_REASON_MATCH = 0,              /* native or PTX-JIT: the code fits this device */
  KILN_REASON_NO_DRIVER = 1,          /* the GPU driver library could not be loaded */
  KILN_REASON_NO_DEVICE = 2,          /* the driver reports no such device */
  KILN_REASON_ARCH_MISMATCH = 3,      /* no code object targets this device's architecture */
  KILN_REASON_DRIVER_TOO_OLD = 4,     /* the driver is older than the manifest or the PTX needs */
  KILN_REASON_LOAD_FAILED = 5,        /* every fitting code object failed to load (JIT log kept) */
  KILN_REASON_UNDECLARED_SHAPE = 6,   /* the arguments match no shape the manifest declares */
  KILN_REASON_BACKEND_UNAVAILABLE = 7, /* the kernel's backend (e.g. hip) is not built or present */
  KILN_REASON_DEVICE_FEATURE = 8,      /* the device or driver lacks what the launch needs: tensor
                                          maps, clusters (compute capability 9.0), scratch memory */
  KILN_REASON_UNATTESTED = 9           /* the runtime requires attestations (0.6) and none given for
                                          the archive reports a passing run on this kind of device */
} kiln_reason;

KILN_API const char* kiln_route_string(kiln_route route);
KILN_API const char* kiln_reason_string(kiln_reason reason);

/* ---- Logging --------------------------------------------------------------------------- */

typedef enum kiln_log_level { KILN_LOG_ERROR = 1, KILN_LOG_WARN = 2, KILN_LOG_INFO = 3, KILN_LOG_DEBUG = 4 } kiln_log_level;

/* Called on whichever thread produced the message; `message` is valid only during the call.
 * Must not call back into the runtime that logs. */
typedef void (*kiln_log_fn)(kiln_log_level level, const char* message, void* user);

/* ---- Runtime --------------------------------------------------------------------------- */

/* A runtime holds the trust keys, the policy, the registered references, the device
 * backends and the statistics. Thread-safe: every function taking a kiln_runtime may be
 * called from any thread at once. It must outlive every archive opened through it. */
typedef struct kiln_runtime kiln_runtime;

typedef enum kiln_policy {
  KILN_POLICY_FALLBACK = 0, /* default: a call no kernel fits goes to the registered reference */
  KILN_POLICY_STRICT = 1    /* a call no kernel fits is refused, reference or not */
} kiln_policy;

typedef struct kiln_runtime_options {
  uint32_t size;                 /* sizeof(kiln_runtime_options) as the caller was compiled */
  uint32_t signature_threshold;  /* distinct trusted signers required, 1 to 64; default 1. Other
                                    values (0 would accept unsigned archives) are refused by
                                    kiln_runtime_create with KILN_ERR_INVALID_ARGUMENT */
  const char* trust_path;        /* PEM public key file or a directory of *.pub / *.pem; required */
  uint32_t policy;               /* a kiln_policy; default KILN_POLICY_FALLBACK */
  uint32_t log_level;            /* most verbose kiln_log_level passed to the callback; default WARN */
  kiln_log_fn log_fn;            /* NULL: no logging (the default) */
  void* log_user;
  uint64_t max_member_size;      /* largest member decompressed, bytes; default 4 GiB */
  const char* cuda_driver_path;  /* library to dlopen for CUDA; default "libcuda.so.1" */
  char* error_buffer;            /* optional: where kiln_runtime_create writes why it failed */
  size_t error_buffer_size;      /*   (there is no runtime yet to ask); NUL-terminated */
  const char* diag_dir;          /* where to write a diagnostic bundle when a load or launch fails;
                                    NULL: the KILN_DIAG_DIR environment variable, else none */
  const char* hip_runtime_path;  /* library to dlopen for HIP; default "libamdhip64.so.5", then ".so" */
  const char* attestation_trust_path; /* (0.6) PEM key or folder of keys: when set, a kernel runs on a
                                    device only if an attestation of its archive signed by them reports
                                    a passing run on that kind of device (kiln_archive_add_attestation);
                                    else it routes as KILN_REASON_UNATTESTED. NULL: not required */
  uint32_t attestation_threshold; /* (0.6) distinct attestation keys each attestation needs, 1 to 64;
                                    0 (a zeroed struct) means the default, 1; above 64 is refused */
} kiln_runtime_options;

/* Fills `options` with defaults. `size` is sizeof(kiln_runtime_options) as the caller knows
 * it: a caller compiled against an older, shorter struct still works. A size below 4 or above
 * KILN_MAX_STRUCT_SIZE is refused with KILN_ERR_INVALID_ARGUMENT and touches nothing; so is
 * such an options->size in kiln_runtime_create. */
#define KILN_MAX_STRUCT_SIZE 4096
KILN_API kiln_status kiln_runtime_options_init(kiln_runtime_options* options, size_t size);

/* Creates a runtime. Loads the trust keys now (an unreadable key is an error); the GPU driver
 * is loaded on first need. Fields beyond what this library knows must be zero. */
KILN_API kiln_status kiln_runtime_create(kiln_runtime** out, const kiln_runtime_options* options);
KILN_API void kiln_runtime_destroy(kiln_runtime* runtime);

/* The message of the most recent failure of a call on this runtime (or on an archive open
 * through it), e.g. which file, member, key or check failed: the calling thread's own when it
 * made one (0.2), else the latest of any thread. Copied into `buffer` (always NUL-terminated
 * when capacity > 0); `needed` (may be NULL) receives the full length + 1;
 * KILN_ERR_BUFFER_TOO_SMALL when it does not fit (capacity 0 included). Prefer kiln_last_error. */
KILN_API kiln_status kiln_runtime_last_error(const kiln_runtime* runtime, char* buffer, size_t capacity, size_t* needed);

/* The calling thread's last error (0.2): the message of its most recent failed call, "" after
 * a success (see the conventions above). Same buffer rules as kiln_runtime_last_error. */
KILN_API kiln_status kiln_last_error(char* buffer, size_t capacity, size_t* needed);

/* ---- References ------------------------------------------------------------------------ */

/* What a reference function is told about the call it replaces. Valid during the call. */
typedef struct kiln_call_info {
  uint32_t size;             /* sizeof(kiln_call_info) */
  const char* kernel;        /* the kernel's name in the manifest */
  int device;                /* the device index the call was for */
  uint32_t reason;           /* a kiln_reason: why the reference runs */
  const char* reason_text;   /* the same in words, with the detail (arch, shape values...) */
  const char* archive_digest;/* "sha256:..." of the archive the kernel came from */
} kiln_call_info;

/* A reference implementation of one kernel: receives the same argument array and stream the
 * launch was given. Return 0 on success; anything else makes the launch fail with
 * KILN_ERR_REFERENCE_FAILED. Called on the launching thread. */
typedef int (*kiln_reference_fn)(const kiln_call_info* info, void* const* args, size_t arg_count, void* stream,
                                 void* user);

/* Registers (or replaces) the reference for kernels named `kernel` in any archive. `fn` NULL
 * removes it. `user` is passed back unchanged; it must stay valid until every call that may
 * still use it has returned (a launch in flight keeps running the reference it started
 * with). kiln_runtime_set_reference says when that is. */
KILN_API kiln_status kiln_runtime_register_reference(kiln_runtime* runtime, const char* kernel, kiln_reference_fn fn,
                                                     void* user);

/* The same callback without `const` in its parameters, so that cgo can export a Go function
 * of exactly this type (0.2). The arguments are the same; the reference must not change the
 * argument array itself. */
typedef int (*kiln_reference_cb)(kiln_call_info* info, void** args, size_t arg_count, void* stream, void* user);
/* Called once with `user` when no call can use it any more. */
typedef void (*kiln_release_cb)(void* user);

/* Registers (or replaces, or with `fn` NULL removes) the reference for `kernel`, as
 * kiln_runtime_register_reference does, and calls `release(user)` (if not NULL) exactly once,
 * after it has been replaced or removed (or the runtime destroyed) and the last call running
 * it has returned: freeing `user` there is safe under any load (0.2). `release` runs on the
 * thread that lets go last (one replacing the reference, or one whose launch was running it),
 * holding no libkiln lock. With `fn` NULL,
 * `release(user)` is called at once. If the call itself fails, `release` is not called and
 * `user` stays the caller's. */
KILN_API kiln_status kiln_runtime_set_reference(kiln_runtime* runtime, const char* kernel, kiln_reference_cb fn,
                                                void* user, kiln_release_cb release);

/* Called by a reference during its call, on the thread that runs it, before it returns
 * non-zero: `message` becomes the launch's error message (KILN_ERR_REFERENCE_FAILED), which
 * otherwise says only the return value (0.2). `info` is the one the reference was given; any
 * other pointer, NULL, or a call outside a reference is ignored. */
KILN_API void kiln_call_set_error(kiln_call_info* info, const char* message);

/* ---- Archives -------------------------------------------------------------------------- */

/* An opened, authenticated archive. Thread-safe. Destroy it only when no launch through its
 * kernels is in flight. */
typedef struct kiln_archive kiln_archive;

/* Opens the archive at `path` through a read-only mapping (never a whole-file read), checks
 * its signatures against the runtime's trust keys and policy, then its index and manifest.
 * Member digests are checked lazily, right before each member is first used. A sparse archive
 * (0.7; schema/FORMAT.md §9: `kiln pull --target`) opens the same way, with the same digest;
 * code it lacks is never read: a kernel takes the code it holds, and one whose only fitting code
 * is absent routes as KILN_REASON_ARCH_MISMATCH, its reason text naming the absent member. */
KILN_API kiln_status kiln_archive_open(kiln_runtime* runtime, const char* path, kiln_archive** out);

/* The same from memory. The bytes are copied, so the caller may free them on return. */
KILN_API kiln_status kiln_archive_open_memory(kiln_runtime* runtime, const void* data, size_t size, kiln_archive** out);

KILN_API void kiln_archive_destroy(kiln_archive* archive);

/* Gives the archive an attestation of a GPU run (0.6): `envelope` is what `kiln verify --run
 * --attest` writes (schema/ATTESTATION.md), `size` its bytes (at most 16 MiB). It must be signed
 * by at least attestation_threshold keys of the runtime's attestation_trust_path, have this
 * archive's digest as its subject and report that every test passed; else KILN_ERR_REFUSED (a
 * signature) or KILN_ERR_MALFORMED (content) saying why, and nothing changes. Without
 * attestation_trust_path: KILN_ERR_INVALID_ARGUMENT. Kernels resolved from then on count it;
 * a kernel already resolved keeps its route. kiln_package_open gives a package's archive the
 * attestations its store keeps (kiln store attest) that pass these checks. */
KILN_API kiln_status kiln_archive_add_attestation(kiln_archive* archive, const void* envelope, size_t size);

/* Borrowed strings, valid while the archive lives. */
KILN_API const char* kiln_archive_digest(const kiln_archive* archive);   /* "sha256:<hex>" */
KILN_API const char* kiln_archive_package(const kiln_archive* archive);
KILN_API const char* kiln_archive_revision(const kiln_archive* archive); /* kernel_revision */
KILN_API uint64_t kiln_archive_sequence(const kiln_archive* archive);
KILN_API size_t kiln_archive_kernel_count(const kiln_archive* archive);
/* The name of kernel `index` (< kiln_archive_kernel_count), or NULL. Kernels are in name order. */
KILN_API const char* kiln_archive_kernel_name(const kiln_archive* archive, size_t index);

/* Resolves every kernel of the archive for `device` now: chooses code objects, verifies and
 * loads them (JIT-compiling PTX where that is the route), so that no launch pays for a load.
 * Kernels are resolved in parallel where the driver allows. Kernels that route to the
 * reference are not an error; a driver failure on a fitting code object is logged, counted
 * and routes the kernel to the reference (or refuses it under the strict policy). */
KILN_API kiln_status kiln_archive_warm(kiln_archive* archive, int device);

/* Preflight: resolves every kernel for `device` (loading, never launching) and writes a JSON
 * report into `buffer`: {"digest":..., "device":N, "kernels":[{"kernel", "route", "reason",
 * "target", "detail"}, ...]}. KILN_ERR_BUFFER_TOO_SMALL with `needed` set when it does not fit
 * (call again with a larger buffer; resolution is done once). */
KILN_API kiln_status kiln_archive_preflight(kiln_archive* archive, int device, char* buffer, size_t capacity,
                                            size_t* needed);

/* Preflight for a GPU described rather than present (0.3): every kernel judged for `target`, a
 * CUDA compute capability ("sm_80", "sm_90"; an a/f suffix names code, not GPUs, and is ignored)
 * or an AMD target ID ("gfx942", "gfx90a:xnack-"), with the CUDA driver version `driver`
 * ("12.4"; NULL or "" judges as if the driver were new enough for every code object). Nothing
 * is loaded and no GPU is needed: the same resolver, matching and reasons as a real device of
 * that kind, except what only its driver can tell (code it then refuses to load). The JSON is
 * kiln_archive_preflight's with "target" and "driver" in place of "device". An unparsable
 * target, or one no GPU can be (a compute capability NVIDIA has made no GPU of, such as sm_999;
 * an AMD processor LLVM does not know), is KILN_ERR_INVALID_ARGUMENT naming it. Buffer rules as
 * kiln_archive_preflight. */
KILN_API kiln_status kiln_archive_preflight_target(kiln_archive* archive, const char* target, const char* driver,
                                                   char* buffer, size_t capacity, size_t* needed);

/* The content of one member (0.3), by its path in the archive ("kiln.toml", or a file the
 * manifest named, as `kiln inspect` lists them): its stored bytes copied out of the file, their
 * SHA-256 checked against the signed index, decompressed within max_member_size, and the
 * content's SHA-256 checked, before any byte reaches `buffer`. `size` (may be NULL) receives
 * the content's length, known from the index: call with capacity 0 to ask it (nothing is read
 * then) and KILN_ERR_BUFFER_TOO_SMALL; KILN_ERR_NOT_FOUND when the archive has no such member;
 * KILN_ERR_LIMIT when it declares more content than max_member_size (also for a size query);
 * KILN_ERR_INTEGRITY when its bytes were changed; KILN_ERR_MALFORMED when it is itself an
 * archive (archives do not nest). Thread-safe. */
KILN_API kiln_status kiln_archive_read_member(kiln_archive* archive, const char* path, void* buffer, size_t capacity,
                                             size_t* size);

/* ---- Kernels --------------------------------------------------------------------------- */

/* A kernel resolved for one device. Borrowed from its archive; thread-safe; launches may run
 * from any number of threads at once. */
typedef struct kiln_kernel kiln_kernel;

/* Finds `name` and resolves it for `device` (the 0-based ordinal of the kernel's backend: the
 * CUDA device, or the HIP device for AMD code), loading its code object
 * unless kiln_archive_warm already did. Returns KILN_OK with a reference or refused route too:
 * read the route and reason. KILN_ERR_NOT_FOUND if the archive has no such kernel. */
KILN_API kiln_status kiln_archive_get_kernel(kiln_archive* archive, const char* name, int device, kiln_kernel** out);

KILN_API kiln_route kiln_kernel_route(const kiln_kernel* kernel);
KILN_API kiln_reason kiln_kernel_reason(const kiln_kernel* kernel);
/* The reason in words with its detail, e.g. "device sm_90 (cc 9.0): chose sm_90a cubin
 * 'k.sm_90a.cubin' (exact); rejected sm_80 (needs cc 8.x)". Borrowed. */
KILN_API const char* kiln_kernel_reason_text(const kiln_kernel* kernel);
/* The chosen target ("sm_90a", "compute_90") or "" on the reference or refused routes. */
KILN_API const char* kiln_kernel_target(const kiln_kernel* kernel);
/* What ran, for the serving layer's logs: borrowed from the archive. */
KILN_API const char* kiln_kernel_name(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_archive_digest(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_package(const kiln_kernel* kernel);
KILN_API const char* kiln_kernel_revision(const kiln_kernel* kernel);
KILN_API size_t kiln_kernel_param_count(const kiln_kernel* kernel);

/* Element types, as the manifest names them (i8 ... f8e5m2). Values are fixed. F8E4M3 and F8E5M2
   are the OCP 8-bit formats (PyTorch's float8_e4m3fn and float8_e5m2, Triton's fp8e4nv and
   fp8e5), from 0.4: an older libkiln refuses an archive that uses them. */
typedef enum kiln_dtype {
  KILN_DTYPE_I8 = 1, KILN_DTYPE_I16 = 2, KILN_DTYPE_I32 = 3, KILN_DTYPE_I64 = 4,
  KILN_DTYPE_U8 = 5, KILN_DTYPE_U16 = 6, KILN_DTYPE_U32 = 7, KILN_DTYPE_U64 = 8,
  KILN_DTYPE_F16 = 9, KILN_DTYPE_BF16 = 10, KILN_DTYPE_F32 = 11, KILN_DTYPE_F64 = 12,
  KILN_DTYPE_F8E4M3 = 13, KILN_DTYPE_F8E5M2 = 14
} kiln_dtype;

typedef struct kiln_param_info {
  uint32_t size;       /* sizeof(kiln_param_info) as the caller knows it; set before the call */
  uint32_t is_pointer; /* 1: a device pointer (passed as a 64-bit address); 0: a scalar */
  uint32_t dtype;      /* a kiln_dtype: the scalar's type, or the pointee's */
  uint32_t access;     /* pointers: 0 read, 1 write, 2 read-write */
  const char* name;    /* borrowed from the kernel */
} kiln_param_info;

/* Describes parameter `index` (< kiln_kernel_param_count) as the manifest declares it, so a
 * binding (Python, Rust, Go) can marshal arguments without reading the manifest itself. */
KILN_API kiln_status kiln_kernel_param(const kiln_kernel* kernel, size_t index, kiln_param_info* info);

/* Zero-fills `info` and sets its size field; `size` as for kiln_runtime_options_init (0.2). */
KILN_API kiln_status kiln_param_info_init(kiln_param_info* info, size_t size);

/* Launches the kernel on `stream` (a CUstream, or a hipStream_t for AMD code; NULL is the
 * device's default stream: for CUDA, that of its primary context). `args` holds one pointer
 * per manifest parameter, each pointing at the parameter's value, as cuLaunchKernel takes them; `arg_count` must equal the parameter count.
 * The launch configuration (grid, block, dynamic shared memory) is the one of the declared
 * shape whose values equal the scalar arguments; with no such shape, or on a reference route,
 * the reference runs with the same `args` and `stream` (or, with none registered or under the
 * strict policy, KILN_ERR_REFUSED). `route_taken` (may be NULL) receives the route this call
 * took. Asynchronous like cuLaunchKernel: errors of the kernel itself surface on the stream.
 * A shape's or variant's conditions may read a pointer argument's address (`addr(p)`, 0.6): a
 * variant compiled for aligned tensors takes only calls whose tensors are aligned. */
KILN_API kiln_status kiln_kernel_launch(kiln_kernel* kernel, void* const* args, size_t arg_count, void* stream,
                                        kiln_route* route_taken);

/* kiln_kernel_launch with each argument's size in bytes (0.2): `arg_sizes[i]` must be the size
 * of parameter i as the manifest declares it (8 for a pointer; 1, 2, 4 or 8 for a scalar of
 * that type), else KILN_ERR_INVALID_ARGUMENT naming the parameter, and nothing runs. A binding
 * that cannot know the manifest's types at compile time (Python, Go) catches a 64-bit value
 * passed for a 32-bit parameter here, instead of the kernel reading half of it. */
KILN_API kiln_status kiln_kernel_launch_checked(kiln_kernel* kernel, void* const* args, const size_t* arg_sizes,
                                                size_t arg_count, void* stream, kiln_route* route_taken);

/* What a launch with these arguments would do, in words, launching nothing (0.5): the shape the
 * call matches and the launch it computes, then the route; on a device, the variant it takes
 * (the first whose conditions hold: "variant k16 (k % 16 == 0)") or "the kernel's own code", with
 * why each variant before it does not take it; off a device, the route and its reason. The
 * arguments are checked as kiln_kernel_launch checks them (KILN_ERR_INVALID_ARGUMENT). Buffer
 * rules as kiln_archive_preflight. Archives with variants need libkiln 0.5: an older one refuses
 * such a kernel's record. */
KILN_API kiln_status kiln_kernel_explain(const kiln_kernel* kernel, void* const* args, size_t arg_count, char* buffer,
                                         size_t capacity, size_t* needed);

/* ---- Following a store: hot swap by digest ---------------------------------------------- */

/* The active archive of one package in a kiln store (a folder made by `kiln store init`),
 * resolved and warmed for one device, and swapped atomically on reload: calls in flight finish
 * on the archive they started with, new calls use the new one, and no call sees half of each.
 * Thread-safe: launches from any number of threads while another thread reloads. The runtime's
 * trust keys decide what opens; the store's own keys decided what was added. */
typedef struct kiln_package kiln_package;

KILN_API kiln_status kiln_package_open(kiln_runtime* runtime, const char* store_dir, const char* package, int device,
                                       kiln_package** out);
KILN_API void kiln_package_destroy(kiln_package* package);

/* kiln_package_open with a witness (0.4). The store's history is hash-chained, but whoever can
 * write the store folder can replace the whole history with another consistent one (an older
 * active archive, say); only a head kept elsewhere reveals that. `witness_head` is such a head:
 * the 64 hex digits `kiln store head PACKAGE` prints (the record count it prints after them may
 * follow, after a space). The package opens, and each kiln_package_reload switches, only while
 * the history still holds that head, as the genesis value or as the hash of one of its records
 * (a longer history that grew from it passes, as `kiln store verify --package P --head H`
 * checks); otherwise KILN_ERR_INTEGRITY, the message naming the head, and a reload keeps the
 * archive in use. A witness that is not 64 lower-case hex digits is KILN_ERR_INVALID_ARGUMENT.
 * NULL or "": no witness, as kiln_package_open. */
KILN_API kiln_status kiln_package_open_witnessed(kiln_runtime* runtime, const char* store_dir, const char* package,
                                                 int device, const char* witness_head, kiln_package** out);

/* Reads the store's active pointer; if it names another archive, opens and warms it, then
 * switches. `switched` (may be NULL) is set to 1 when a switch happened. On any failure the
 * current archive stays in place. */
KILN_API kiln_status kiln_package_reload(kiln_package* package, int* switched);

/* Copies the digest of the archive in use ("sha256:<hex>") into `buffer` (72 bytes suffice). */
KILN_API kiln_status kiln_package_digest(kiln_package* package, char* buffer, size_t capacity);
/* The same with `needed` (may be NULL) like every other buffer call (0.2). */
KILN_API kiln_status kiln_package_active_digest(kiln_package* package, char* buffer, size_t capacity, size_t* needed);

/* Launches kernel `kernel` of the archive in use, as kiln_kernel_launch does. */
KILN_API kiln_status kiln_package_launch(kiln_package* package, const char* kernel, void* const* args, size_t arg_count,
                                         void* stream, kiln_route* route_taken);

/* ---- Statistics ------------------------------------------------------------------------ */

typedef struct kiln_stats {
  uint32_t size;                 /* sizeof(kiln_stats) as the caller knows it; set before the call */
  uint32_t reserved;
  uint64_t archives_opened;
  uint64_t archive_open_failures;
  uint64_t loads;                /* code objects loaded (cubin, fatbin or PTX) */
  uint64_t load_failures;
  uint64_t load_time_ns;         /* total, cubin and fatbin loads */
  uint64_t jit_compiles;         /* PTX loads */
  uint64_t jit_failures;
  uint64_t jit_time_ns;
  uint64_t launches_native;
  uint64_t launches_ptx_jit;
  uint64_t launches_reference;
  uint64_t launches_refused;
  uint64_t launch_failures;      /* driver errors at launch, reference failures */
  uint64_t undeclared_shape_calls;
} kiln_stats;

/* Zero-fills `stats` and sets its size field; `size` as for kiln_runtime_options_init (0.2). */
KILN_API kiln_status kiln_stats_init(kiln_stats* stats, size_t size);

/* Copies the runtime's counters (monotonic since creation) into `stats`, as many fields as
 * stats->size covers. */
KILN_API kiln_status kiln_runtime_stats(const kiln_runtime* runtime, kiln_stats* stats);

/* The same counters in the Prometheus text exposition format. Copied into `buffer`
 * (NUL-terminated); KILN_ERR_BUFFER_TOO_SMALL with `needed` set when it does not fit. */
KILN_API kiln_status kiln_runtime_stats_prometheus(const kiln_runtime* runtime, char* buffer, size_t capacity,
                                                   size_t* needed);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
