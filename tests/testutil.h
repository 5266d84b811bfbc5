// Tiny test harness shared by the test programs: every check counts, failures print what and
// where, and the last line is always "N passed, N failed" (exit status 1 if any failed).
#ifndef MN_TESTUTIL_H
#define MN_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static int tu_pass = 0, tu_fail = 0;
#define TU_CHECK(cond, ...) do { if (cond) tu_pass++; else { tu_fail++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)
static inline int tu_finish(const char* name) {
    printf("%s: %d passed, %d failed\n", name, tu_pass, tu_fail);
    return tu_fail ? 1 : 0;
}
// max|a-b| / max|b| (the vectors README metric); NaN anywhere gives +inf so it can never pass.
static inline double tu_relerr(const double* a, const double* b, size_t n) {
    double num = 0, den = 0; size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d != d || a[i] != a[i]) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}
#ifdef MESANET_H
// The same metric on the library's element type (mn_real against mn_real, or against double).
static inline double tu_rel(const mn_real* a, const mn_real* b, size_t n) {
    double num = 0, den = 0; size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d != d) return INFINITY;
        if (d > num) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return den > 0 ? num / den : num;
}
static inline double tu_rel_d(const mn_real* a, const double* b, size_t n) {
    double num = 0, den = 0; size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

// ---- scratch buffers of the op tests: every allocation is recorded and tu_free_all() (at the end of
// each test) frees them all, so LeakSanitizer stays quiet. Zero-filled; running out exits with 2.
#define TU_MAX_ALLOCS 1024
static void* tu_allocs[TU_MAX_ALLOCS];
static size_t tu_n_allocs;
static mn_rng tu_rng;                       // the random source of tu_fill (each test seeds it in main)
static inline void* tu_mem(size_t bytes) {
    void* p = calloc(bytes ? bytes : 1, 1);
    if (p == NULL || tu_n_allocs >= TU_MAX_ALLOCS) { printf("out of memory\n"); exit(2); }
    tu_allocs[tu_n_allocs++] = p;
    return p;
}
static inline mn_real* tu_buf(size_t n) { return (mn_real*)tu_mem(n * sizeof(mn_real)); }
// tu_mark() then tu_free_to(mark) gives back what was allocated in between (a finite-difference loss
// called thousands of times); tu_free_all() frees everything.
static inline size_t tu_mark(void) { return tu_n_allocs; }
static inline void tu_free_to(size_t mark) { while (tu_n_allocs > mark) free(tu_allocs[--tu_n_allocs]); }
static inline void tu_free_all(void) { tu_free_to(0); }
static inline mn_real* tu_copy(const mn_real* x, size_t n) {
    mn_real* p = tu_buf(n); memcpy(p, x, n * sizeof(mn_real)); return p;
}
// x_i = mean + s z_i with z_i ~ N(0,1) drawn from tu_rng.
static inline void tu_fill(mn_real* x, size_t n, double mean, double s) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = (mn_real)(mean + s * mn_rng_normal(&tu_rng));
}
// Workspace filled with NaN, so a form that reads scratch it did not write fails loudly.
static inline mn_real* tu_work(size_t n) {
    mn_real* w = tu_buf(n); size_t i;
    for (i = 0; i < n; i++) w[i] = (mn_real)NAN;
    return w;
}
#ifdef MN_VECFILE_H
// Golden-vector access (include reference/vecfile.h first): a tensor of exactly n values, or a
// failed check and NULL; vt_real copies it into a tu_buf of the build's mn_real.
static inline const double* vt_get(const mn_vec_file* f, const char* name, size_t n) {
    const mn_vec_tensor* t = mn_vec_get(f, name);
    if (t == NULL || t->n != n) { TU_CHECK(0, "%s: tensor %s missing or of the wrong size", f->op, name); return NULL; }
    return t->data;
}
static inline mn_real* vt_real(const mn_vec_file* f, const char* name, size_t n) {
    const double* d = vt_get(f, name, n);
    mn_real* p = tu_buf(n); size_t i;
    for (i = 0; d && i < n; i++) p[i] = (mn_real)d[i];
    return p;
}
#endif
#endif
#endif
