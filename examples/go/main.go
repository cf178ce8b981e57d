// A Go embedder of libkiln through cgo, built against the installed library (pkg-config kiln):
// opens an archive, registers a reference written in Go (exported with exactly the C callback
// type kiln_reference_cb, so no C trampoline), and launches one kernel from 8 goroutines at once,
// each with its own buffers, checking every result. On a machine without a GPU every call runs
// the Go reference; with one, kernels that fit run natively (pass device memory there).
//
// Errors without runtime.LockOSThread: libkiln keeps a failed call's message per OS thread, and Go
// may move a goroutine to another thread between two cgo calls. So each kiln call is made by a
// small C function of the preamble that also reads the message (kiln_last_error) before it
// returns: one cgo call runs on one thread, so the message is that call's own. main_test.go checks
// it from 8 goroutines under `go test -race`.
//
//	usage: kiln-go ARCHIVE TRUSTED_KEYS   (a "scale" kernel: y = a * x over n floats)
package main

/*
#cgo pkg-config: kiln
#include <stdlib.h>
#include <kiln/kiln.h>
// Exported from Go below; cgo writes these prototypes, which equal kiln_reference_cb and
// kiln_release_cb, so the Go functions are passed to libkiln as they are.
extern int goScaleReference(kiln_call_info* info, void** args, size_t arg_count, void* stream, void* user);
extern void goRelease(void* user);

// A call's status and, when it failed, its message, read on the thread that made the call.
typedef struct { char text[2048]; } go_error;
static kiln_status with_error(kiln_status status, go_error* e) {
  e->text[0] = 0;
  if (status != KILN_OK) kiln_last_error(e->text, sizeof e->text, NULL);
  return status;
}
static kiln_status go_archive_open(kiln_runtime* rt, const char* path, kiln_archive** out, go_error* e) {
  return with_error(kiln_archive_open(rt, path, out), e);
}
static kiln_status go_archive_get_kernel(kiln_archive* a, const char* name, int device, kiln_kernel** out, go_error* e) {
  return with_error(kiln_archive_get_kernel(a, name, device, out), e);
}
static kiln_status go_runtime_set_reference(kiln_runtime* rt, const char* name, kiln_reference_cb fn, void* user,
                                            kiln_release_cb release, go_error* e) {
  return with_error(kiln_runtime_set_reference(rt, name, fn, user, release), e);
}
static kiln_status go_kernel_launch_checked(kiln_kernel* k, void** args, const size_t* sizes, size_t count, go_error* e) {
  return with_error(kiln_kernel_launch_checked(k, args, sizes, count, NULL, NULL), e);
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// referenceState is what the registered reference works with; libkiln holds it as a cgo.Handle
// in C memory (Go pointers may not be kept by C) and gives it back to goRelease exactly once.
type referenceState struct {
	calls    atomic.Int64
	released atomic.Bool
}

//export goScaleReference
func goScaleReference(info *C.kiln_call_info, args *unsafe.Pointer, argCount C.size_t, stream unsafe.Pointer, user unsafe.Pointer) C.int {
	state := cgo.Handle(*(*C.uintptr_t)(user)).Value().(*referenceState)
	argv := unsafe.Slice(args, int(argCount))
	y := *(**C.float)(argv[0])
	x := *(**C.float)(argv[1])
	a := *(*C.float)(argv[2])
	n := int(*(*C.uint32_t)(argv[3]))
	ys, xs := unsafe.Slice(y, n), unsafe.Slice(x, n)
	for i := range ys {
		ys[i] = a * xs[i]
	}
	state.calls.Add(1)
	return 0
}

//export goRelease
func goRelease(user unsafe.Pointer) {
	handle := cgo.Handle(*(*C.uintptr_t)(user))
	handle.Value().(*referenceState).released.Store(true)
	handle.Delete()
	C.free(user)
}

// kilnError is a failed call's status and its own message (read in the same cgo call).
type kilnError struct {
	status C.kiln_status
	text   string
}

func (e *kilnError) Error() string {
	return C.GoString(C.kiln_status_string(e.status)) + ": " + e.text
}

// check turns a status and the message read with it into an error.
func check(status C.kiln_status, e *C.go_error) error {
	if status == C.KILN_OK {
		return nil
	}
	return &kilnError{status, C.GoString(&e.text[0])}
}

func newRuntime(trustPath string) (*C.kiln_runtime, error) {
	var options C.kiln_runtime_options
	C.kiln_runtime_options_init(&options, C.size_t(unsafe.Sizeof(options)))
	trust := C.CString(trustPath)
	defer C.free(unsafe.Pointer(trust))
	options.trust_path = trust
	// kiln_runtime_create explains a failure in the caller's buffer: no runtime, no thread needed.
	buf := (*C.char)(C.calloc(2048, 1))
	defer C.free(unsafe.Pointer(buf))
	options.error_buffer, options.error_buffer_size = buf, 2048
	var rt *C.kiln_runtime
	if status := C.kiln_runtime_create(&rt, &options); status != C.KILN_OK {
		return nil, &kilnError{status, C.GoString(buf)}
	}
	return rt, nil
}

func destroyRuntime(rt *C.kiln_runtime) { C.kiln_runtime_destroy(rt) }

func openArchive(rt *C.kiln_runtime, path string) (*C.kiln_archive, error) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	var e C.go_error
	var archive *C.kiln_archive
	return archive, check(C.go_archive_open(rt, p, &archive, &e), &e)
}

// failuresAcrossGoroutines opens a missing archive, a different path each time, from `goroutines`
// goroutines at once, `calls` times each, yielding between calls so that Go moves them between OS
// threads; each error must name its own path. Returns how many did not.
func failuresAcrossGoroutines(rt *C.kiln_runtime, goroutines, calls int) int64 {
	var wrong atomic.Int64
	var group sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		group.Add(1)
		go func(g int) {
			defer group.Done()
			for i := 0; i < calls; i++ {
				path := fmt.Sprintf("/nonexistent/goroutine-%d-call-%d.kiln", g, i)
				_, err := openArchive(rt, path)
				if err == nil || !strings.Contains(err.Error(), path) {
					wrong.Add(1)
				}
				runtime.Gosched()
			}
		}(g)
	}
	group.Wait()
	return wrong.Load()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kiln-go: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kiln-go ARCHIVE TRUSTED_KEYS")
		os.Exit(2)
	}
	rt, err := newRuntime(os.Args[2])
	if err != nil {
		fail("runtime: %v", err)
	}
	defer C.kiln_runtime_destroy(rt)

	if _, err := openArchive(rt, "/nonexistent/archive.kiln"); err == nil {
		fail("a missing archive opened")
	} else {
		fmt.Printf("a missing archive is refused: %v\n", err)
	}
	if wrong := failuresAcrossGoroutines(rt, 8, 200); wrong != 0 {
		fail("%d of 1600 failed calls from 8 goroutines read another call's message", wrong)
	}
	fmt.Println("8 goroutines x 200 failed calls: each error names its own call (no runtime.LockOSThread)")

	archive, err := openArchive(rt, os.Args[1])
	if err != nil {
		fail("open: %v", err)
	}
	defer C.kiln_archive_destroy(archive)

	state := &referenceState{}
	user := (*C.uintptr_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	*user = C.uintptr_t(cgo.NewHandle(state))
	name := C.CString("scale")
	defer C.free(unsafe.Pointer(name))
	var e C.go_error
	if err := check(C.go_runtime_set_reference(rt, name, C.kiln_reference_cb(C.goScaleReference), unsafe.Pointer(user),
		C.kiln_release_cb(C.goRelease), &e), &e); err != nil {
		fail("set_reference: %v", err)
	}
	var kernel *C.kiln_kernel
	if err := check(C.go_archive_get_kernel(archive, name, 0, &kernel, &e), &e); err != nil {
		fail("get_kernel: %v", err)
	}
	fmt.Printf("kernel scale on device 0: %s: %s\n", C.GoString(C.kiln_route_string(C.kiln_kernel_route(kernel))),
		C.GoString(C.kiln_kernel_reason_text(kernel)))

	const goroutines, launches, n = 8, 200, 1024
	var wrong, failed atomic.Int64
	var group sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		group.Add(1)
		go func(g int) {
			defer group.Done()
			// Arguments live in C memory: cgo forbids handing C a Go pointer to Go pointers.
			y := (*C.float)(C.calloc(n, 4))
			x := (*C.float)(C.calloc(n, 4))
			values := (*[4]unsafe.Pointer)(C.calloc(4, C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
			slots := (*struct {
				y, x *C.float
				a    C.float
				n    C.uint32_t
			})(C.calloc(1, 32))
			sizes := (*[4]C.size_t)(C.calloc(4, C.size_t(unsafe.Sizeof(C.size_t(0)))))
			defer func() {
				C.free(unsafe.Pointer(y))
				C.free(unsafe.Pointer(x))
				C.free(unsafe.Pointer(values))
				C.free(unsafe.Pointer(slots))
				C.free(unsafe.Pointer(sizes))
			}()
			xs, ys := unsafe.Slice(x, n), unsafe.Slice(y, n)
			for i := range xs {
				xs[i] = C.float(i % 97)
			}
			slots.y, slots.x, slots.a, slots.n = y, x, C.float(g+1), n
			values[0], values[1] = unsafe.Pointer(&slots.y), unsafe.Pointer(&slots.x)
			values[2], values[3] = unsafe.Pointer(&slots.a), unsafe.Pointer(&slots.n)
			*sizes = [4]C.size_t{8, 8, 4, 4} // checked against the manifest's parameter types
			for l := 0; l < launches; l++ {
				var e C.go_error
				if err := check(C.go_kernel_launch_checked(kernel, &values[0], &sizes[0], 4, &e), &e); err != nil {
					failed.Add(1)
					fmt.Fprintf(os.Stderr, "goroutine %d: %v\n", g, err)
					return
				}
				if C.kiln_kernel_route(kernel) == C.KILN_ROUTE_REFERENCE {
					for i := range ys {
						if ys[i] != C.float(g+1)*xs[i] {
							wrong.Add(1)
							break
						}
					}
				}
			}
		}(g)
	}
	group.Wait()

	// Replace the reference with none: libkiln releases the Go state once, now that no call runs it.
	if err := check(C.go_runtime_set_reference(rt, name, nil, nil, nil, &e), &e); err != nil {
		fail("remove reference: %v", err)
	}
	fmt.Printf("%d goroutines x %d launches: %d ran the Go reference, %d wrong, %d failed; state released: %v\n",
		goroutines, launches, state.calls.Load(), wrong.Load(), failed.Load(), state.released.Load())
	if wrong.Load() != 0 || failed.Load() != 0 || !state.released.Load() {
		os.Exit(1)
	}
}
