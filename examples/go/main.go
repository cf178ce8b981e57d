// A Go embedder of libkiln through cgo, built against the installed library (pkg-config kiln):
// opens an archive, registers a reference written in Go (exported with exactly the C callback
// type kiln_reference_cb, so no C trampoline), and launches one kernel from 8 goroutines at once,
// each with its own buffers, checking every result. On a machine without a GPU every call runs
// the Go reference; with one, kernels that fit run natively (pass device memory there).
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
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
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

// lastError reads libkiln's message for the call that just failed on this OS thread: callers
// hold runtime.LockOSThread from the call to here, since the message is kept per thread.
func lastError() string {
	var buf [2048]C.char
	C.kiln_last_error(&buf[0], C.size_t(len(buf)), nil)
	return C.GoString(&buf[0])
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
	runtime.LockOSThread() // main's calls and their messages stay on one thread

	var options C.kiln_runtime_options
	C.kiln_runtime_options_init(&options, C.size_t(unsafe.Sizeof(options)))
	trust := C.CString(os.Args[2])
	defer C.free(unsafe.Pointer(trust))
	options.trust_path = trust
	var rt *C.kiln_runtime
	if C.kiln_runtime_create(&rt, &options) != C.KILN_OK {
		fail("runtime: %s", lastError())
	}
	defer C.kiln_runtime_destroy(rt)

	missing := C.CString("/nonexistent/archive.kiln")
	defer C.free(unsafe.Pointer(missing))
	var archive *C.kiln_archive
	if C.kiln_archive_open(rt, missing, &archive) == C.KILN_OK {
		fail("a missing archive opened")
	}
	fmt.Printf("a missing archive is refused: %s\n", lastError())

	path := C.CString(os.Args[1])
	defer C.free(unsafe.Pointer(path))
	if C.kiln_archive_open(rt, path, &archive) != C.KILN_OK {
		fail("open: %s", lastError())
	}
	defer C.kiln_archive_destroy(archive)

	state := &referenceState{}
	user := (*C.uintptr_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	*user = C.uintptr_t(cgo.NewHandle(state))
	name := C.CString("scale")
	defer C.free(unsafe.Pointer(name))
	if C.kiln_runtime_set_reference(rt, name, C.kiln_reference_cb(C.goScaleReference), unsafe.Pointer(user),
		C.kiln_release_cb(C.goRelease)) != C.KILN_OK {
		fail("set_reference: %s", lastError())
	}
	var kernel *C.kiln_kernel
	if C.kiln_archive_get_kernel(archive, name, 0, &kernel) != C.KILN_OK {
		fail("get_kernel: %s", lastError())
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
			runtime.LockOSThread() // a failed launch's message is read on the thread that made it
			defer runtime.UnlockOSThread()
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
				if C.kiln_kernel_launch_checked(kernel, &values[0], &sizes[0], 4, nil, nil) != C.KILN_OK {
					failed.Add(1)
					fmt.Fprintf(os.Stderr, "goroutine %d: %s\n", g, lastError())
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
	if C.kiln_runtime_set_reference(rt, name, nil, nil, nil) != C.KILN_OK {
		fail("remove reference: %s", lastError())
	}
	fmt.Printf("%d goroutines x %d launches: %d ran the Go reference, %d wrong, %d failed; state released: %v\n",
		goroutines, launches, state.calls.Load(), wrong.Load(), failed.Load(), state.released.Load())
	if wrong.Load() != 0 || failed.Load() != 0 || !state.released.Load() {
		os.Exit(1)
	}
}
