package dcgm

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
)

// go-dcgm does not wrap dcgmProfPause/dcgmProfResume, and keeps its
// connection handle (a dcgmHandle_t, that is a uintptr_t, in a one-field
// struct) unexported; this reads it so the calls go over the same connection.
//
//go:linkname goDCGMHandle github.com/NVIDIA/go-dcgm/pkg/dcgm.handle
var goDCGMHandle uintptr

// profCall calls a DCGM profiling function by name. It must only run after a
// successful go-dcgm Init, which loaded libdcgm.
func profCall(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var found C.int
	ret := C.gpuscope_prof_call(cname, C.uintptr_t(goDCGMHandle), &found)
	if found == 0 {
		return fmt.Errorf("%s not found in libdcgm.so.4: %w", name, ErrNotSupported)
	}
	if ret != 0 {
		return fmt.Errorf("%s failed with error code %d", name, int(ret))
	}
	return nil
}
