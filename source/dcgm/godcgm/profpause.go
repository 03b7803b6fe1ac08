package godcgm

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*gpuscope_prof_fn)(uintptr_t);

// gpuscope_prof_call calls dcgmProfPause or dcgmProfResume in the libdcgm
// that go-dcgm loaded. It returns 1 in *found when the symbol exists.
static int gpuscope_prof_call(const char *name, uintptr_t handle, int *found) {
	void *lib = dlopen("libdcgm.so.4", RTLD_LAZY | RTLD_NOLOAD);
	*found = 0;
	if (lib == NULL) {
		return 0;
	}
	gpuscope_prof_fn fn = (gpuscope_prof_fn)dlsym(lib, name);
	int ret = 0;
	if (fn != NULL) {
		*found = 1;
		ret = fn(handle);
	}
	dlclose(lib);
	return ret;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	_ "github.com/NVIDIA/go-dcgm/pkg/dcgm" // provides the handle below

	"github.com/gpuscope/gpuscope/source/dcgm"
)

// go-dcgm does not wrap dcgmProfPause/dcgmProfResume, and keeps its
// connection handle (a dcgmHandle_t, that is a uintptr_t, in a one-field
// struct) unexported; this reads it so the calls go over the same connection.
// The linker checks neither the name nor the type of a linknamed variable: a
// renamed handle would leave this a zero of its own, a retyped one would be
// read wrongly. TestLinkedHandleMatchesGoDCGM compiles an assertion into
// go-dcgm's package that fails to build in either case, and profCall refuses
// a zero handle at run time.
//
// Once go-dcgm exposes the calls (a ProfPause/ProfResume pair, or an
// accessor for the handle), call those instead and delete this file with its
// linkname, its cgo and its guard test.
//
//go:linkname goDCGMHandle github.com/NVIDIA/go-dcgm/pkg/dcgm.handle
var goDCGMHandle uintptr

// profCall calls a DCGM profiling function by name. It must only run after a
// successful go-dcgm Init, which loaded libdcgm and set the handle.
func profCall(name string) error {
	if goDCGMHandle == 0 {
		// Init succeeded, so a zero here means the link above no longer
		// reaches go-dcgm's handle; calling with it would act on no
		// connection at all.
		return fmt.Errorf("%s: go-dcgm's connection handle is not readable (go-dcgm changed): %w", name, dcgm.ErrNotSupported)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var found C.int
	ret := C.gpuscope_prof_call(cname, C.uintptr_t(goDCGMHandle), &found)
	if found == 0 {
		return fmt.Errorf("%s not found in libdcgm.so.4: %w", name, dcgm.ErrNotSupported)
	}
	if ret != 0 {
		return fmt.Errorf("%s failed with error code %d", name, int(ret))
	}
	return nil
}
