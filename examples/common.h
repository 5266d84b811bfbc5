// Helpers shared by the example programs (not part of the library): timing, folders, reading
// text, and the byte-level data sampler. POSIX is fine here; mesanet.h itself stays C99.
#ifndef MN_EXAMPLES_COMMON_H
#define MN_EXAMPLES_COMMON_H
#define _POSIX_C_SOURCE 200809L
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1   // flock (train's lock on --out); in mesanet.h, Linux's renameat2 (the checkpoint swap)
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

// Number parsers for command lines: the whole string must be the number (no sign for the unsigned
// ones, no trailing text, no overflow; doubles finite). They return 0, or print what was wrong and -1.
static inline int ex_parse_u64(const char* name, const char* v, uint64_t max, uint64_t* out) {
    uint64_t x = 0; const char* p = v;
    if (!*p) goto bad;
    for (; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9 || x > (max - d) / 10) goto bad;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
bad:
    fprintf(stderr, "option %s: '%s' is not a whole number in [0, %llu]\n", name, v, (unsigned long long)max);
    return -1;
}
static inline int ex_parse_size(const char* name, const char* v, size_t* out) {
    uint64_t x;
    if (ex_parse_u64(name, v, (uint64_t)SIZE_MAX, &x)) return -1;
    *out = (size_t)x;
    return 0;
}
static inline int ex_parse_double(const char* name, const char* v, double* out) {
    char* e; double x;
    errno = 0;
    x = strtod(v, &e);
    if (!*v || *e || !isfinite(x)) { fprintf(stderr, "option %s: '%s' is not a finite number\n", name, v); return -1; }
    *out = x;
    return 0;
}
static inline int ex_parse_int(const char* name, const char* v, long lo, long hi, int* out) {
    char* e; long x;
    errno = 0;
    x = strtol(v, &e, 10);
    if (!*v || *e || errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "option %s: '%s' is not a whole number in [%ld, %ld]\n", name, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

// Option matchers for the examples' argument loops, used as
//   for (i = 1; i < argc; i++) { const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
//       EX_OPT_S("--out", out) EX_OPT_U("--steps", steps) EX_OPT_D("--lr", lr) ... }
// each matches "--name value", stores the value into o->field (string / size_t / double), skips it;
// a value that is not a number of that kind exits with status 2 (ranges are the program's to check).
#define EX_OPT_S(name, field) if (!strcmp(a, name) && v) { o->field = v; i++; continue; }
#define EX_OPT_U(name, field) \
    if (!strcmp(a, name) && v) { if (ex_parse_size(name, v, &o->field)) exit(2); i++; continue; }
#define EX_OPT_D(name, field) \
    if (!strcmp(a, name) && v) { if (ex_parse_double(name, v, &o->field)) exit(2); i++; continue; }

static inline double ex_now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// mkdir -p
static inline int ex_mkdirs(const char* path) {
    char tmp[1024]; size_t i, n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++)
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i]; tmp[i] = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            tmp[i] = c;
        }
    return 0;
}

static inline int ex_cmpstr(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

// Appends the bytes of one file to *buf (grown with realloc). Returns 0, or -1 with a message.
static inline int ex_append_file(const char* path, unsigned char** buf, size_t* len) {
    FILE* f = fopen(path, "rb"); long n = -1; unsigned char* nb;
    if (!f) { fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno)); return -1; }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno)); fclose(f); return -1;
    }
    if (!(nb = (unsigned char*)realloc(*buf, *len + (size_t)n + 1))) {
        fprintf(stderr, "cannot read %s: out of memory\n", path);
        fclose(f);
        return -1;
    }
    *buf = nb;
    if (fread(*buf + *len, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s: %s\n", path, ferror(f) ? strerror(errno) : "it shrank while being read");
        fclose(f);
        return -1;
    }
    *len += (size_t)n;
    fclose(f);
    return 0;
}
// Reads a text file, or every regular file of a folder in name order, symlinks skipped (the built-in corpus is the
// folder /usr/share/common-licenses, which Debian's base-files package puts on every machine).
static inline int ex_read_text(const char* path, unsigned char** buf, size_t* len) {
    struct stat st;
    *buf = NULL; *len = 0;
    if (stat(path, &st) != 0) { fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno)); return -1; }
    if (S_ISDIR(st.st_mode)) {
        DIR* d = opendir(path); struct dirent* e; char* names[512]; size_t n = 0, i; int rc = 0;
        if (!d) { fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno)); return -1; }
        while ((e = readdir(d)) && n < 512) if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, n, sizeof(char*), ex_cmpstr);
        for (i = 0; i < n; i++) {
            char p[2048]; struct stat s2;
            snprintf(p, sizeof p, "%s/%s", path, names[i]);
            // lstat: symbolic links (GPL -> GPL-3, ...) would only duplicate text
            if (lstat(p, &s2) == 0 && S_ISREG(s2.st_mode) && ex_append_file(p, buf, len) != 0) rc = -1;
            free(names[i]);
        }
        return rc;
    }
    return ex_append_file(path, buf, len);
}

#ifdef MN_USE_BLAS
#include <cblas.h>
#ifdef _OPENMP
extern void openblas_set_num_threads(int);
#endif
// The machine's sgemm ceiling for the benchmarks: OpenBLAS's own sgemm on all cores (its threads,
// not ours), n x n x n, best of reps, in GFLOP/s. Afterwards BLAS is single-threaded again, the
// arrangement mn_gemm uses under OpenMP (OpenMP splits the rows, BLAS runs inside each thread).
static inline double ex_sgemm_gflops(size_t n, int reps) {
    float *a = (float*)malloc(n * n * sizeof(float)), *b = (float*)malloc(n * n * sizeof(float)),
          *c = (float*)malloc(n * n * sizeof(float));
    size_t i; double best = 1e30; int r;
    if (!a || !b || !c) { free(a); free(b); free(c); return 0.0; }
    for (i = 0; i < n * n; i++) { a[i] = (float)((i % 7) * 0.1); b[i] = (float)((i % 5) * 0.1); }
#ifdef _OPENMP
    openblas_set_num_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f,
                c, (int)n);
    for (r = 0; r < reps; r++) {
        double t = ex_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f,
                    c, (int)n);
        t = ex_now() - t;
        if (t < best) best = t;
    }
    free(a); free(b); free(c);
#ifdef _OPENMP
    openblas_set_num_threads(1);
#endif
    return 2.0 * (double)n * (double)n * (double)n / best / 1e9;
}
#endif
static inline void ex_fmt_time(char* out, size_t cap, double s) {
    if (s < 0 || s != s) s = 0;
    if (s >= 3600) snprintf(out, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else snprintf(out, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
}
#endif
