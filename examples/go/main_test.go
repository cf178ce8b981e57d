package main

// go test -race with KILN_GO_TRUST set to a trusted key (tests/install/check_install.sh sets it):
// failed calls from 8 goroutines at once, moved between OS threads by Go as it likes, each read
// their own message, with no runtime.LockOSThread anywhere.

import (
	"os"
	"testing"
)

func TestEachGoroutineReadsItsOwnErrorWithoutPinningItsThread(t *testing.T) {
	trust := os.Getenv("KILN_GO_TRUST")
	if trust == "" {
		t.Skip("KILN_GO_TRUST (a trusted public key) is not set")
	}
	rt, err := newRuntime(trust)
	if err != nil {
		t.Fatal(err)
	}
	defer destroyRuntime(rt)
	if wrong := failuresAcrossGoroutines(rt, 8, 500); wrong != 0 {
		t.Fatalf("%d of 4000 failed calls read another call's message", wrong)
	}
}
