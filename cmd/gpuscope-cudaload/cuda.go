package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// The few CUDA driver API entry points the load needs, by their exported
// (versioned) symbol names, with the types of cuda.h reduced to their ABI:
// CUdevice is an int, CUdeviceptr a 64-bit integer, the handles pointers.
typedef int (*fn_i)(unsigned int);
typedef int (*fn_pi)(int *);
typedef int (*fn_dev_get)(int *, int);
typedef int (*fn_dev_name)(char *, int, int);
typedef int (*fn_dev_attr)(int *, int, int);
typedef int (*fn_ctx_retain)(void **, int);
typedef int (*fn_ctx_release)(int);
typedef int (*fn_ctx_set)(void *);
typedef int (*fn_void)(void);
typedef int (*fn_mod_load)(void **, const void *);
typedef int (*fn_mod_unload)(void *);
typedef int (*fn_mod_func)(void **, void *, const char *);
typedef int (*fn_alloc)(uint64_t *, size_t);
typedef int (*fn_free)(uint64_t);
typedef int (*fn_memset)(uint64_t, unsigned int, size_t);
typedef int (*fn_alloc_host)(void **, size_t);
typedef int (*fn_free_host)(void *);
typedef int (*fn_htod)(uint64_t, const void *, size_t);
typedef int (*fn_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
typedef int (*fn_err_name)(int, const char **);

static void *lib;
static void *syms[19];
static const char *names[19] = {
	"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute",
	"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize",
	"cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction",
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemsetD32_v2", "cuMemAllocHost_v2", "cuMemFreeHost",
	"cuMemcpyHtoD_v2", "cuLaunchKernel",
};

// cl_open loads libcuda.so.1 and resolves every entry point; it returns
// NULL or the first symbol it could not find (dlerror's text on dlopen).
static const char *cl_open(void) {
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return dlerror();
	for (int i = 0; i < 19; i++) {
		syms[i] = dlsym(lib, names[i]);
		if (!syms[i]) return names[i];
	}
	return NULL;
}

static const char *cl_err_name(int rc) {
	const char *s = NULL;
	fn_err_name f = (fn_err_name)dlsym(lib, "cuGetErrorName");
	if (f && f(rc, &s) == 0 && s) return s;
	return "CUDA_ERROR_UNKNOWN_CODE";
}

static int cl_init(void) { return ((fn_i)syms[0])(0); }
static int cl_count(int *n) { return ((fn_pi)syms[1])(n); }
static int cl_device(int *d, int i) { return ((fn_dev_get)syms[2])(d, i); }
static int cl_name(char *b, int n, int d) { return ((fn_dev_name)syms[3])(b, n, d); }
static int cl_attr(int *v, int a, int d) { return ((fn_dev_attr)syms[4])(v, a, d); }
static int cl_ctx_retain(void **c, int d) { return ((fn_ctx_retain)syms[5])(c, d); }
static int cl_ctx_release(int d) { return ((fn_ctx_release)syms[6])(d); }
static int cl_ctx_set(void *c) { return ((fn_ctx_set)syms[7])(c); }
static int cl_sync(void) { return ((fn_void)syms[8])(); }
static int cl_mod_load(void **m, const void *img) { return ((fn_mod_load)syms[9])(m, img); }
static int cl_mod_unload(void *m) { return ((fn_mod_unload)syms[10])(m); }
static int cl_mod_func(void **f, void *m, const char *n) { return ((fn_mod_func)syms[11])(f, m, n); }
static int cl_alloc(uint64_t *p, size_t n) { return ((fn_alloc)syms[12])(p, n); }
static int cl_free(uint64_t p) { return ((fn_free)syms[13])(p); }
static int cl_memset(uint64_t p, unsigned int v, size_t n) { return ((fn_memset)syms[14])(p, v, n); }
static int cl_alloc_host(void **p, size_t n) { return ((fn_alloc_host)syms[15])(p, n); }
static int cl_free_host(void *p) { return ((fn_free_host)syms[16])(p); }
static int cl_htod(uint64_t d, const void *h, size_t n) { return ((fn_htod)syms[17])(d, h, n); }

// cl_launch runs fma_loop(buf, n, iters) on blocks of 256 threads.
static int cl_launch(void *f, unsigned blocks, uint64_t buf, unsigned n, unsigned iters) {
	void *args[3] = {&buf, &n, &iters};
	return ((fn_launch)syms[18])(f, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cuda is the driver API of libcuda.so.1, opened with dlopen so that the
// binary starts (and says what is missing) where no driver is installed.
type cuda struct{}

// cuError is a failed driver call, named as the driver names its result.
type cuError struct {
	call string
	rc   C.int
}

func (e *cuError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.call, C.GoString(C.cl_err_name(e.rc)), int(e.rc))
}

func check(call string, rc C.int) error {
	if rc != 0 {
		return &cuError{call: call, rc: rc}
	}
	return nil
}

func openCUDA() (*cuda, error) {
	if msg := C.cl_open(); msg != nil {
		return nil, fmt.Errorf("libcuda.so.1 (the NVIDIA driver's CUDA library): %s", C.GoString(msg))
	}
	if err := check("cuInit", C.cl_init()); err != nil {
		return nil, err
	}
	return &cuda{}, nil
}

func (*cuda) deviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.cl_count(&n))
	return int(n), err
}

func (*cuda) device(i int) (int, error) {
	var d C.int
	err := check(fmt.Sprintf("cuDeviceGet(%d)", i), C.cl_device(&d, C.int(i)))
	return int(d), err
}

func (*cuda) deviceName(d int) (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.cl_name(&buf[0], C.int(len(buf)), C.int(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// attrSMCount is CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
const attrSMCount = 16

func (*cuda) smCount(d int) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", C.cl_attr(&v, attrSMCount, C.int(d)))
	return int(v), err
}

// useDevice makes the device's primary context current; release undoes it.
func (*cuda) useDevice(d int) (release func(), err error) {
	var ctx unsafe.Pointer
	if err := check("cuDevicePrimaryCtxRetain", C.cl_ctx_retain(&ctx, C.int(d))); err != nil {
		return nil, err
	}
	if err := check("cuCtxSetCurrent", C.cl_ctx_set(ctx)); err != nil {
		C.cl_ctx_release(C.int(d))
		return nil, err
	}
	return func() { C.cl_ctx_release(C.int(d)) }, nil
}

func (*cuda) sync() error { return check("cuCtxSynchronize", C.cl_sync()) }

// loadKernel hands the PTX to the driver, which compiles it for the GPU.
func (*cuda) loadKernel(ptx, name string) (fn unsafe.Pointer, unload func(), err error) {
	img := C.CString(ptx)
	defer C.free(unsafe.Pointer(img))
	var mod unsafe.Pointer
	if err := check("cuModuleLoadData", C.cl_mod_load(&mod, unsafe.Pointer(img))); err != nil {
		return nil, nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if err := check("cuModuleGetFunction("+name+")", C.cl_mod_func(&fn, mod, cname)); err != nil {
		C.cl_mod_unload(mod)
		return nil, nil, err
	}
	return fn, func() { C.cl_mod_unload(mod) }, nil
}

func (*cuda) alloc(n uint64) (uint64, error) {
	var p C.uint64_t
	err := check(fmt.Sprintf("cuMemAlloc_v2(%d bytes)", n), C.cl_alloc(&p, C.size_t(n)))
	return uint64(p), err
}

func (*cuda) free(p uint64) { C.cl_free(C.uint64_t(p)) }

func (*cuda) memset32(p uint64, v uint32, words uint64) error {
	return check("cuMemsetD32_v2", C.cl_memset(C.uint64_t(p), C.uint(v), C.size_t(words)))
}

// allocHost returns page-locked host memory, which the copy engines read
// at the link's full rate.
func (*cuda) allocHost(n uint64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check(fmt.Sprintf("cuMemAllocHost_v2(%d bytes)", n), C.cl_alloc_host(&p, C.size_t(n)))
	return p, err
}

func (*cuda) freeHost(p unsafe.Pointer) { C.cl_free_host(p) }

func (*cuda) copyToDevice(dst uint64, src unsafe.Pointer, n uint64) error {
	return check("cuMemcpyHtoD_v2", C.cl_htod(C.uint64_t(dst), src, C.size_t(n)))
}

func (*cuda) launch(fn unsafe.Pointer, blocks uint32, buf uint64, n, iters uint32) error {
	return check("cuLaunchKernel(fma_loop)", C.cl_launch(fn, C.uint(blocks), C.uint64_t(buf), C.uint(n), C.uint(iters)))
}
