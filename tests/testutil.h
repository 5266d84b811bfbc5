// Tiny test harness shared by the test programs: every check counts, failures print what and
// where, and the last line is always "N passed, N failed" (exit status 1 if any failed).
#ifndef MN_TESTUTIL_H
#define MN_TESTUTIL_H
#include <stdio.h>
#include <math.h>

static int tu_pass = 0, tu_fail = 0;
#define TU_CHECK(cond, ...) do { if (cond) tu_pass++; else { tu_fail++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
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
#endif
#endif
