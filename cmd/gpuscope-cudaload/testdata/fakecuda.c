/*
 * A stand-in for the driver's libcuda.so.1, for testing gpuscope-cudaload
 * where there is no GPU. It keeps the driver API's contract for the calls
 * the load makes (out-parameters, result codes, a context needed before
 * memory and modules, PTX checked for the entry point) and writes one line
 * per call to the file $FAKECUDA_LOG. $FAKECUDA_FAIL names one call that
 * returns CUDA_ERROR_OUT_OF_MEMORY instead. Where $FAKEGPU_STATE names a
 * file, the load's state (pid, bytes held, bytes copied, start and now in
 * ns) is written there after each call that changes it, for a fake NVML
 * (test/e2e/testdata/fakenvml) to show the GPU as a driver would. Built
 * by the tests with `cc -shared -fPIC`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
	OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3,
	NO_DEVICE = 100, INVALID_DEVICE = 101, INVALID_PTX = 218,
	INVALID_CONTEXT = 201, NOT_FOUND = 500,
};

static int inited, ctx_current;
static uint64_t next_ptr = 0x7f0000000000ull;
static uint64_t held;
static char module_tag, function_tag, context_tag;

static int logcall(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static int logcall(const char *name, const char *fmt, ...) {
	const char *fail = getenv("FAKECUDA_FAIL");
	int rc = (fail && strcmp(fail, name) == 0) ? OUT_OF_MEMORY : OK;
	const char *path = getenv("FAKECUDA_LOG");
	if (path) {
		FILE *f = fopen(path, "a");
		if (f) {
			va_list ap;
			va_start(ap, fmt);
			fprintf(f, "%s ", name);
			vfprintf(f, fmt, ap);
			fprintf(f, " rc=%d\n", rc);
			va_end(ap);
			fclose(f);
		}
	}
	return rc;
}

static uint64_t copied, started_ns;

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void publish(void) {
	const char *path = getenv("FAKEGPU_STATE");
	if (!path) return;
	if (!started_ns) started_ns = now_ns();
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f) return;
	fprintf(f, "%d %llu %llu %llu %llu\n", (int)getpid(), (unsigned long long)held, (unsigned long long)copied,
	        (unsigned long long)started_ns, (unsigned long long)now_ns());
	fclose(f);
	rename(tmp, path);
}

static void nap(long ns) {
	struct timespec t = {ns / 1000000000L, ns % 1000000000L};
	nanosleep(&t, NULL);
}

int cuGetErrorName(int rc, const char **s) {
	switch (rc) {
	case OK: *s = "CUDA_SUCCESS"; return OK;
	case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
	case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
	case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
	case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
	case INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; return OK;
	case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
	case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
	}
	return INVALID_VALUE;
}

int cuInit(unsigned int flags) {
	int rc = logcall("cuInit", "flags=%u", flags);
	if (flags != 0) return INVALID_VALUE;
	inited = rc == OK;
	return rc;
}

int cuDeviceGetCount(int *n) {
	if (!inited) return NOT_INITIALIZED;
	*n = 1;
	return logcall("cuDeviceGetCount", "n=1");
}

int cuDeviceGet(int *d, int i) {
	if (!inited) return NOT_INITIALIZED;
	if (i != 0) return INVALID_DEVICE;
	*d = 0;
	return logcall("cuDeviceGet", "ordinal=%d", i);
}

int cuDeviceGetName(char *b, int n, int d) {
	if (d != 0) return INVALID_DEVICE;
	snprintf(b, n, "Fake H200");
	return logcall("cuDeviceGetName", "device=%d", d);
}

int cuDeviceGetAttribute(int *v, int attr, int d) {
	if (d != 0) return INVALID_DEVICE;
	if (attr != 16) return INVALID_VALUE;
	*v = 132;
	return logcall("cuDeviceGetAttribute", "attr=%d", attr);
}

int cuDevicePrimaryCtxRetain(void **c, int d) {
	if (!inited) return NOT_INITIALIZED;
	if (d != 0) return INVALID_DEVICE;
	*c = &context_tag;
	return logcall("cuDevicePrimaryCtxRetain", "device=%d", d);
}

int cuDevicePrimaryCtxRelease_v2(int d) {
	ctx_current = 0;
	return logcall("cuDevicePrimaryCtxRelease_v2", "device=%d held=%llu", d, (unsigned long long)held);
}

int cuCtxSetCurrent(void *c) {
	if (c != &context_tag) return INVALID_CONTEXT;
	ctx_current = 1;
	return logcall("cuCtxSetCurrent", "ok");
}

int cuCtxSynchronize(void) {
	if (!ctx_current) return INVALID_CONTEXT;
	return logcall("cuCtxSynchronize", "ok");
}

int cuModuleLoadData(void **m, const void *img) {
	if (!ctx_current) return INVALID_CONTEXT;
	const char *ptx = img;
	if (!strstr(ptx, ".entry fma_loop") || !strstr(ptx, ".target sm_") || !strstr(ptx, "fma.rn.f32"))
		return INVALID_PTX;
	*m = &module_tag;
	return logcall("cuModuleLoadData", "ptx_bytes=%zu", strlen(ptx));
}

int cuModuleUnload(void *m) {
	if (m != &module_tag) return INVALID_VALUE;
	return logcall("cuModuleUnload", "ok");
}

int cuModuleGetFunction(void **f, void *m, const char *name) {
	if (m != &module_tag) return INVALID_VALUE;
	if (strcmp(name, "fma_loop") != 0) return NOT_FOUND;
	*f = &function_tag;
	return logcall("cuModuleGetFunction", "name=%s", name);
}

int cuMemAlloc_v2(uint64_t *p, size_t n) {
	if (!ctx_current) return INVALID_CONTEXT;
	int rc = logcall("cuMemAlloc_v2", "bytes=%zu", n);
	if (rc != OK) return rc;
	*p = next_ptr;
	next_ptr += (n + 0xfffff) & ~(uint64_t)0xfffff;
	held += n;
	publish();
	return OK;
}

int cuMemFree_v2(uint64_t p) {
	return logcall("cuMemFree_v2", "ptr=%#llx", (unsigned long long)p);
}

int cuMemsetD32_v2(uint64_t p, unsigned int v, size_t words) {
	if (!ctx_current) return INVALID_CONTEXT;
	return logcall("cuMemsetD32_v2", "ptr=%#llx value=%#x bytes=%zu", (unsigned long long)p, v, words * 4);
}

int cuMemAllocHost_v2(void **p, size_t n) {
	if (!ctx_current) return INVALID_CONTEXT;
	int rc = logcall("cuMemAllocHost_v2", "bytes=%zu", n);
	if (rc != OK) return rc;
	*p = malloc(n);
	return *p ? OK : OUT_OF_MEMORY;
}

int cuMemFreeHost(void *p) {
	free(p);
	return logcall("cuMemFreeHost", "ok");
}

/* Copies and kernels take time, as on a GPU: 10 GB/s and 1 ms a launch. */
int cuMemcpyHtoD_v2(uint64_t d, const void *h, size_t n) {
	if (!ctx_current) return INVALID_CONTEXT;
	if (d < 0x7f0000000000ull || d + n > next_ptr || !h) return INVALID_VALUE;
	nap((long)(n / 10));
	copied += n;
	publish();
	return logcall("cuMemcpyHtoD_v2", "bytes=%zu", n);
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shmem, void *stream, void **params, void **extra) {
	if (!ctx_current) return INVALID_CONTEXT;
	if (f != &function_tag || !params || extra) return INVALID_VALUE;
	uint64_t buf = *(uint64_t *)params[0];
	unsigned n = *(unsigned *)params[1], iters = *(unsigned *)params[2];
	if (buf < 0x7f0000000000ull || (uint64_t)n * 4 > held || n > gx * bx) return INVALID_VALUE;
	nap(1000000);
	return logcall("cuLaunchKernel", "grid=%ux%ux%u block=%ux%ux%u n=%u iters=%u", gx, gy, gz, bx, by, bz, n, iters);
}
