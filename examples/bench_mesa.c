// bench_mesa: accuracy, stability and speed of the Mesa op, and dynamic CG stopping in a small
// trained MesaNet, printed as markdown tables and written to results/mesa_bench.md (with the
// machine, the date and the command). Every number in the tables is measured by this program in
// the same run; nothing is copied from elsewhere.
//
//   ./build/bench_mesa [out.md] [sections] [ckpt]   sections: any of "123456" (default: 12345)
//
//   1 accuracy vs CG iterations (chunkwise and recurrent CG, textbook and fla arithmetic)
//   2 accuracy vs the dynamic tolerance eps (the paper's per-token stop ||r|| <= eps ||r0||)
//   3 stability at T = 16384 with gamma close to 1 (finiteness, condition numbers, CG needed)
//   4 speed: chunkwise forward + backward, T scaling, the decode step
//   5 dynamic CG in a small trained MesaNet (held-out loss vs mean CG steps)
//   6 warm-started CG at decode in a checkpoint of ./build/train (ckpt, default runs/mesa_warm): CG steps and
//     held-out loss per start (cfg.mesa_cg_warm 0-6, Woodbury included) and tolerance; its command is in
//     results/mesa_warm.md
//
// Float build (mn_real = float) with OpenBLAS. Truth: the float build's exact recurrent form
// (Cholesky per token, MN_MESA_EXACT) and the independent float64 oracle reference/mesa_oracle.h,
// fed the same float-rounded inputs. Mesa FLOPs are counted by the formula of section 4 (mesa_fwd_flops).
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#include "../reference/mesa_oracle.h"
#include <math.h>
#include <stdarg.h>
#include <sys/utsname.h>
#ifndef MN_USE_BLAS
#error "bench_mesa measures the sgemm ceiling with OpenBLAS: build with -DMN_USE_BLAS"
#endif
#ifdef MESANET_DOUBLE
#error "bench_mesa benchmarks the float build (compare with the float64 oracle): build without MESANET_DOUBLE"
#endif


// ---- output: every table goes to stdout and into the markdown file; progress goes to stderr ----
static char* md_buf;
static size_t md_len, md_cap;
static void out(const char* fmt, ...) {
    char tmp[8192]; int n; va_list ap;
    va_start(ap, fmt); n = vsnprintf(tmp, sizeof tmp, fmt, ap); va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = (int)sizeof tmp - 1;
    fputs(tmp, stdout); fflush(stdout);
    if (md_len + (size_t)n + 1 > md_cap) {
        size_t nc = (md_cap ? 2 * md_cap : 65536) + (size_t)n;
        char* nb = (char*)realloc(md_buf, nc);
        if (!nb) return;
        md_buf = nb; md_cap = nc;
    }
    memcpy(md_buf + md_len, tmp, (size_t)n + 1); md_len += (size_t)n;
}
static double t_start;
static void progress(const char* fmt, ...) {
    va_list ap;
    fprintf(stderr, "[%6.1fs] ", ex_now() - t_start);
    va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap);
    fputc('\n', stderr);
}

// ---- small helpers ----
static mn_real* falloc(size_t n) {
    mn_real* p = (mn_real*)calloc(n ? n : 1, sizeof(mn_real)); if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}
static double* dalloc(size_t n) {
    double* p = (double*)calloc(n ? n : 1, sizeof(double)); if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}
static int cmpd(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y;
}
static double median(double* x, size_t n) {
    qsort(x, n, sizeof(double), cmpd); return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
static void to_double(double* d, const mn_real* f, size_t n) { size_t i; for (i = 0; i < n; i++) d[i] = f[i]; }
// max|a - b| / max|b| (infinity when a holds a NaN or Inf)
static double relerr(const mn_real* a, const double* b, size_t n) {
    double num = 0, den = 0; size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d == d) || !isfinite((double)a[i])) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}
static double relerr_dd(const double* a, const double* b, size_t n) {
    double num = 0, den = 0; size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d == d) || !isfinite(a[i])) return INFINITY;
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}
static size_t count_nonfinite(const mn_real* a, size_t n) {
    size_t i, c = 0; for (i = 0; i < n; i++) c += !isfinite((double)a[i]); return c;
}
static double maxabs(const mn_real* a, size_t n) {
    size_t i; double m = 0; for (i = 0; i < n; i++) if (fabs((double)a[i]) > m) m = fabs((double)a[i]); return m;
}

// ---- problems: inputs as the layer produces them (tests/test_mesa.c): q, k L2-normalised;
// g = logsigmoid(u), u ~ N(2, 2^2) clamped to [-4.9, 12] (or a constant g); beta = sigmoid(N(0,1));
// lambda uniform in (0.25, 1). B = 1. The float inputs are the ones the op sees; the double copies
// hold exactly the same (float-rounded) values for the float64 oracle.
typedef struct {
    size_t T, H, K, V;
    mn_real *q, *k, *v, *g, *beta, *lamb, *dout;
    double *dq, *dk, *dv, *dg, *dbeta, *dlamb;
} prob;
// rows of D values: normalise(diag(decay^j) z), z ~ N(0, I) (decay 1: uniform on the sphere)
static void fill_unit_rows(mn_real* f, double* d, size_t rows, size_t D, double decay, mn_rng* r) {
    size_t i, j; double x[1024];
    for (i = 0; i < rows; i++) {
        double s = 0, sc = 1;
        for (j = 0; j < D; j++) { x[j] = sc * mn_rng_normal(r); s += x[j] * x[j]; sc *= decay; }
        s = 1.0 / sqrt(s);
        for (j = 0; j < D; j++) { f[i * D + j] = (mn_real)(x[j] * s); d[i * D + j] = f[i * D + j]; }
    }
}
// kdecay: keys normalise(diag(kdecay^i) z) (1 = isotropic); q is always isotropic
static prob make_prob(size_t T, size_t H, size_t K, size_t V, int gconst, double gval, int with_dout, double kdecay,
                      uint64_t seed) {
    prob p; size_t i, N = T * H; mn_rng r;
    mn_rng_seed(&r, seed);
    p.T = T; p.H = H; p.K = K; p.V = V;
    p.q = falloc(N * K); p.k = falloc(N * K); p.v = falloc(N * V); p.g = falloc(N); p.beta = falloc(N);
    p.lamb = falloc(H * K);
    p.dq = dalloc(N * K); p.dk = dalloc(N * K); p.dv = dalloc(N * V); p.dg = dalloc(N); p.dbeta = dalloc(N);
    p.dlamb = dalloc(H * K);
    p.dout = with_dout ? falloc(N * V) : NULL;
    fill_unit_rows(p.q, p.dq, N, K, 1.0, &r);
    fill_unit_rows(p.k, p.dk, N, K, kdecay, &r);
    for (i = 0; i < N * V; i++) { p.v[i] = (mn_real)mn_rng_normal(&r); p.dv[i] = p.v[i]; }
    for (i = 0; i < N; i++) {
        double u = 2 + 2 * mn_rng_normal(&r);
        u = u < -4.9 ? -4.9 : u > 12 ? 12 : u;
        p.g[i] = (mn_real)(gconst ? gval : -log1p(exp(-u))); p.dg[i] = p.g[i];
        p.beta[i] = (mn_real)(1 / (1 + exp(-mn_rng_normal(&r)))); p.dbeta[i] = p.beta[i];
    }
    for (i = 0; i < H * K; i++) { p.lamb[i] = (mn_real)(0.25 + 0.75 * mn_rng_uniform(&r)); p.dlamb[i] = p.lamb[i]; }
    if (p.dout) for (i = 0; i < N * V; i++) p.dout[i] = (mn_real)mn_rng_normal(&r);
    return p;
}
static void free_prob(prob* p) {
    free(p->q); free(p->k); free(p->v); free(p->g); free(p->beta); free(p->lamb); free(p->dout);
    free(p->dq); free(p->dk); free(p->dv); free(p->dg); free(p->dbeta); free(p->dlamb);
}
static mn_mesa_opts mkopts(int solver, int cg, double tol, int fla, size_t chunk) {
    mn_mesa_opts o; memset(&o, 0, sizeof o);
    o.solver = solver; o.cg_iters = cg; o.cg_tol = tol; o.fla = fla; o.chunk = chunk;
    return o;
}

// ---- the Mesa FLOP count used for every Mesa speed figure here (the PyTorch anchors count the same), forward,
// per head and token:
//   2K^2 + 2KV (state pass) + n (4CK + 2K^2) (n CG steps) + 2CK + 2CV + 2KV (output)
// with C = min(chunk, T) as mn_flops_per_token counts it; forward + backward = 3 x forward.
static double mesa_fwd_flops(size_t T, size_t H, size_t K, size_t V, size_t chunk, int n) {
    double k = (double)K, v = (double)V, c = (double)(chunk < T ? chunk : T);
    return (double)T * (double)H *
           (2 * k * k + 2 * k * v + n * (4 * c * k + 2 * k * k) + 2 * c * k + 2 * c * v + 2 * k * v);
}
// the decode step per head and token (counted the same way: every product and vector update of the step):
// state update 2K^2 + 2KV, n CG steps of 2K^2 (A p) + 10K (vector updates and dots), read-out 2KV
static double mesa_step_flops(size_t H, size_t K, size_t V, int n) {
    double k = (double)K, v = (double)V;
    return (double)H * (2 * k * k + 2 * k * v + n * (2 * k * k + 10 * k) + 2 * k * v);
}

// ---- small dense linear algebra in double (section 3) ----
// Eigenvalues of the symmetric n x n matrix A (destroyed) by cyclic Jacobi rotations.
static void sym_eig(double* A, size_t n, double* ev) {
    size_t sweep, p, q, i;
    for (sweep = 0; sweep < 100; sweep++) {
        double off = 0, tot = 0;
        for (p = 0; p < n; p++)
            for (q = 0; q < n; q++) {
                tot += A[p * n + q] * A[p * n + q]; if (p != q) off += A[p * n + q] * A[p * n + q];
            }
        if (off <= 1e-26 * tot) break;
        for (p = 0; p < n; p++)
            for (q = p + 1; q < n; q++) {
                double apq = A[p * n + q], app, aqq, theta, t, c, s;
                if (fabs(apq) < 1e-300) continue;
                app = A[p * n + p]; aqq = A[q * n + q];
                theta = (aqq - app) / (2 * apq);
                t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                c = 1 / sqrt(t * t + 1); s = t * c;
                for (i = 0; i < n; i++) {   // columns p, q
                    double aip = A[i * n + p], aiq = A[i * n + q];
                    A[i * n + p] = c * aip - s * aiq; A[i * n + q] = s * aip + c * aiq;
                }
                for (i = 0; i < n; i++) {   // rows p, q
                    double api = A[p * n + i], aqi = A[q * n + i];
                    A[p * n + i] = c * api - s * aqi; A[q * n + i] = s * api + c * aqi;
                }
            }
    }
    for (i = 0; i < n; i++) ev[i] = A[i * n + i];
}
// x = A^-1 b for SPD A (n x n) by Cholesky; L (n*n) scratch. Returns -1 when not SPD.
static int chol_solve(double* x, const double* A, const double* b, size_t n, double* L) {
    size_t i, j, p;
    for (j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (p = 0; p < j; p++) d -= L[j * n + p] * L[j * n + p];
        if (!(d > 0)) return -1;
        d = sqrt(d); L[j * n + j] = d;
        for (i = j + 1; i < n; i++) {
            double a = A[i * n + j];
            for (p = 0; p < j; p++) a -= L[i * n + p] * L[j * n + p];
            L[i * n + j] = a / d;
        }
    }
    for (i = 0; i < n; i++) {
        double a = b[i]; for (p = 0; p < i; p++) a -= L[i * n + p] * x[p]; x[i] = a / L[i * n + i];
    }
    for (i = n; i-- > 0;) {
        double a = x[i]; for (p = i + 1; p < n; p++) a -= L[p * n + i] * x[p]; x[i] = a / L[i * n + i];
    }
    return 0;
}


// =================================================================================================
// 1 + 2: accuracy against the exact solve (B=1, T=1024, H=4, D=64)
static void section_accuracy(int do1, int do2) {
    const size_t T = 1024, H = 4, K = 64, V = 64, N = T * H, C = 64;
    const int cgs[4] = { 1, 3, 10, 30 };
    const double tols[5] = { 0, 1e-2, 1e-3, 1e-4, 1e-6 };
    prob p = make_prob(T, H, K, V, 0, 0, 0, 1.0, 11);
    mn_mesa_opts ox = mkopts(MN_MESA_EXACT, 0, 0, 0, C), oc = mkopts(MN_MESA_CG, 30, 0, 0, C);
    mn_real *o = falloc(N * V), *wrec = falloc(mn_mesa_work_size_recurrent(1, T, H, K, V, &oc));
    mn_real* wch = falloc(mn_mesa_work_size(1, T, H, K, V, &oc));
    double *o_or = dalloc(N * V), *o_ex = dalloc(N * V), *o_cg = dalloc(N * V), e_ex;
    int* iters = (int*)calloc(N, sizeof(int));
    size_t i, c, m;
    progress("accuracy: float64 oracle and the float exact form, T=%zu H=%zu D=%zu", T, H, K);
    if (mo_mesa_exact(1, (int)T, (int)H, (int)K, (int)V, p.dq, p.dk, p.dv, p.dg, p.dbeta, p.dlamb, NULL, NULL, o_or,
                      NULL, NULL, NULL) != MO_OK) {
        out("\n(section 1/2 skipped: the float64 oracle failed)\n");
        goto done;
    }
    mn_mesa_forward_recurrent(o, NULL, NULL, NULL, NULL, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V, &ox, wrec);
    to_double(o_ex, o, N * V);
    e_ex = relerr_dd(o_ex, o_or, N * V);
    if (do1) {
        out("\n## 1. Accuracy vs CG iterations\n\n"
            "Random problem as in tests/test_mesa.c: B=1, T=%zu, H=%zu, D=%zu (K=V), L2-normalised q, k; "
            "g = logsigmoid(N(2, 2^2)) clamped; beta = sigmoid(N(0,1)); lambda uniform in (0.25, 1). "
            "Error = max|o - o_ref| / max|o_ref| over all outputs. Chunkwise form: chunk %zu, x0 = 0; recurrent form: "
            "the per-token CG, x0 = 0 (same iterates). Reference \"exact f32\" is the float build's own MN_MESA_EXACT "
            "recurrent form (Cholesky per token); \"f64 oracle\" is reference/mesa_oracle.h's mo_mesa_exact on the "
            "same float-rounded inputs; the last column is the oracle's float64 CG of the same count and arithmetic "
            "(mo_mesa_cg_fla, x0 = 0) against the oracle's exact solve, i.e. what the iteration count alone allows. "
            "fla = 1 adds fla's 1e-5 to CG's alpha and beta denominators.\n\n"
            "Float exact form vs float64 oracle: **%.1e**.\n\n"
            "| mode | CG | chunkwise vs exact f32 | chunkwise vs f64 oracle | recurrent vs exact f32 "
            "| recurrent vs f64 oracle | f64 CG vs f64 oracle |\n"
            "|---|---|---|---|---|---|---|\n", T, H, K, C, e_ex);
        for (m = 0; m < 2; m++)
            for (c = 0; c < 4; c++) {
                mn_mesa_opts o1 = mkopts(MN_MESA_CG, cgs[c], 0, (int)m, C);
                double ec, eco, er, ero, ed;
                progress("accuracy: fla=%zu CG=%d", m, cgs[c]);
                mn_mesa_forward(o, NULL, NULL, NULL, NULL, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V, &o1, wch);
                ec = relerr(o, o_ex, N * V); eco = relerr(o, o_or, N * V);
                mn_mesa_forward_recurrent(o, NULL, NULL, NULL, NULL, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V,
                                          &o1, wrec);
                er = relerr(o, o_ex, N * V); ero = relerr(o, o_or, N * V);
                if (mo_mesa_cg_fla(1, (int)T, (int)H, (int)K, (int)V, p.dq, p.dk, p.dv, p.dg, p.dbeta, p.dlamb,
                                   NULL, NULL, cgs[c], MO_CG_X0_ZERO,
                                   m ? MO_FLA_CG_EPS : 0.0, o_cg, NULL, NULL, NULL) == MO_OK)
                    ed = relerr_dd(o_cg, o_or, N * V);
                else ed = NAN;
                out("| %s | %d | %.1e | %.1e | %.1e | %.1e | %.1e |\n", m ? "fla (eps 1e-5)" : "textbook", cgs[c], ec,
                    eco, er, ero, ed);
            }
    }
    if (do2) {
        out("\n## 2. Accuracy vs the dynamic tolerance\n\n"
            "The same problem; recurrent form (the decode path: textbook CG, x0 = 0, "
            "k_max = 30) with the paper's per-token, per-head stop ||r|| <= eps ||r0||. "
            "Iterations from mn_mesa_forward_recurrent's iters output, over all %zu (token, head) pairs; "
            "\"at k_max\" counts systems that ran all 30 steps (eps = 0: no tolerance; "
            "the library still stops a system whose residual is exactly zero).\n\n"
            "| eps | mean CG iters | max | at k_max | vs exact f32 | vs f64 oracle |\n|---|---|---|---|---|---|\n", N);
        for (c = 0; c < 5; c++) {
            mn_mesa_opts o1 = mkopts(MN_MESA_CG, 30, tols[c], 0, C);
            long sum = 0; int mx = 0; size_t cap = 0;
            progress("dynamic tolerance: eps=%g", tols[c]);
            mn_mesa_forward_recurrent(o, NULL, iters, NULL, NULL, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V,
                                      &o1, wrec);
            for (i = 0; i < N; i++) { sum += iters[i]; if (iters[i] > mx) mx = iters[i]; cap += iters[i] >= 30; }
            if (tols[c] == 0) out("| 0 (30 steps) ");
            else out("| %g ", tols[c]);
            out("| %.2f | %d | %.1f %% | %.1e | %.1e |\n", (double)sum / (double)N, mx, 100.0 * (double)cap / (double)N,
                relerr(o, o_ex, N * V), relerr(o, o_or, N * V));
        }
    }
done:
    free(o); free(wrec); free(wch); free(o_or); free(o_ex); free(o_cg); free(iters); free_prob(&p);
}


// =================================================================================================
// 3: stability at long T with gamma close to 1 (B=1, T=16384, H=2, D=64)
typedef struct { size_t t; double lmax, lmin, kap, err; int need; } stab_row;
static void section_stability(void) {
    const size_t T = 16384, H = 2, K = 64, V = 64, N = T * H, C = 64, NS = 5;
    const size_t samp[5] = { 100, 1000, 4000, 10000, 16383 };
    const double gvals[2] = { -0.0010005003335835344 /* log(0.999) */, 0.0 };
    const char* gname[2] = { "log(0.999)", "0" };
    const double kdec[2] = { 1.0, 0.9 };
    const char* kname[2] = { "isotropic keys", "keys with a decaying spectrum" };
    mn_mesa_opts o30 = mkopts(MN_MESA_CG, 30, 0, 0, C), odec = mkopts(MN_MESA_CG, 30, 1e-4, 0, C),
                 oneed = mkopts(MN_MESA_CG, 5000, 1e-4, 0, C);
    mn_real *o = falloc(N * V), *xs = falloc(N * K), *wch = falloc(mn_mesa_work_size(1, T, H, K, V, &o30));
    mn_real* wrec = falloc(mn_mesa_work_size_recurrent(1, T, H, K, V, &o30));
    mn_real *gq = falloc(N * K), *gk = falloc(N * K), *gv = falloc(N * V), *gg = falloc(N), *gb = falloc(N),
            *gl = falloc(H * K);
    mn_real *hkk = falloc(H * K * K), *hkv = falloc(H * K * V), *ckk = falloc(H * K * K), *ckv = falloc(H * K * V),
            *so = falloc(H * V);
    double *A = dalloc(K * K), *L = dalloc(K * K), *ev = dalloc(K), *xe = dalloc(K), *oe = dalloc(V), *qd = dalloc(K);
    int* iters = (int*)calloc(N, sizeof(int));
    int itn[16];
    size_t ci, gi, ki, s, i, h, a, j;
    out("\n## 3. Stability at T = %zu with gamma close to 1\n\n"
        "B=1, H=%zu, D=%zu, g constant (gamma = exp(g)), otherwise the inputs of section 1, with two kinds of keys: "
        "isotropic (k uniform on the sphere, as in section 1: H_t then grows evenly in every direction and the systems "
        "get *better* conditioned with t), and keys with a decaying spectrum, k = normalise(diag(0.9^i) z), z ~ N(0, "
        "I), i = 0..D-1 (most of the key energy in a few directions, the rest seen rarely: the non-forgetting, "
        "step-hungry heads the paper describes; q stays isotropic). \"Non-finite\" counts every value checked with "
        "isfinite: the chunkwise CG-30 forward's outputs and final states, the chunkwise backward's gradients for a "
        "random upstream gradient, and the decode run's outputs and final states. Decode run: "
        "the recurrent form with the paper's stop eps = 1e-4 and k_max = 30, "
        "run segment by segment through the sampled positions (states carried in and out). At each sampled t, "
        "from the library's own float state after the decode run's first t tokens, per head: "
        "A_t = H_t + diag(lambda) after token t's update; its extreme eigenvalues by cyclic Jacobi in double (kappa: "
        "the largest condition number over the heads; lambda_max / lambda_min: over the heads); "
        "the CG iterations mn_mesa_step needs for eps = 1e-4 with no cap (max over the heads); "
        "the decode run's count at t (capped at 30, max over the heads); and the relative error max|o - o*| / max|o*| "
        "of the fixed-30-step output o_t against a double Cholesky solve o* of the same float state (max over the "
        "heads).\n\n", T, H, K);
    for (ci = 0; ci < 4; ci++) {
        prob p;
        stab_row rows[5];
        size_t bad_c, bad_b, bad_d, pos = 0, cap = 0;
        long sum = 0;
        double tc, td;
        ki = ci / 2; gi = ci % 2;
        p = make_prob(T, H, K, V, 1, gvals[gi], 1, kdec[ki], 21 + ci);
        progress("stability %s, g=%s: chunkwise CG-30 forward + backward", kname[ki], gname[gi]);
        tc = ex_now();
        memset(hkk, 0, H * K * K * sizeof(mn_real)); memset(hkv, 0, H * K * V * sizeof(mn_real));
        mn_mesa_forward(o, xs, NULL, hkk, hkv, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V, &o30, wch);
        bad_c = count_nonfinite(o, N * V) + count_nonfinite(hkk, H * K * K) + count_nonfinite(hkv, H * K * V);
        {
            double mo = maxabs(o, N * V);
            mn_mesa_backward(gq, gk, gv, gg, gb, gl, NULL, NULL, p.dout, NULL, NULL, xs, p.q, p.k, p.v, p.g, p.beta,
                             p.lamb, NULL, NULL, 1, T, H, K, V, &o30, wch);
            bad_b = count_nonfinite(gq, N * K) + count_nonfinite(gk, N * K) + count_nonfinite(gv, N * V) +
                    count_nonfinite(gg, N) + count_nonfinite(gb, N) + count_nonfinite(gl, H * K);
            tc = ex_now() - tc;
            out("**%s, g = %s** (gamma = %.6g):\n\n- chunkwise CG-30 forward: %zu non-finite of %zu values "
                "(max |o| = %.3g); backward: %zu non-finite of %zu gradient values (%.1f s for both)\n",
                kname[ki], gname[gi], exp(gvals[gi]), bad_c, N * V + H * K * (K + V), mo, bad_b,
                2 * N * K + N * V + 2 * N + H * K, tc);
        }
        td = ex_now();
        memset(hkk, 0, H * K * K * sizeof(mn_real)); memset(hkv, 0, H * K * V * sizeof(mn_real));
        for (s = 0; s <= NS; s++) {
            size_t end = s < NS ? samp[s] : T;
            if (end > pos) {   // decode run over tokens [pos, end): states in and out
                progress("stability %s, g=%s: decode run to t=%zu", kname[ki], gname[gi], end);
                mn_mesa_forward_recurrent(o + pos * H * V, NULL, iters + pos * H, hkk, hkv, p.q + pos * H * K,
                                          p.k + pos * H * K, p.v + pos * H * V, p.g + pos * H, p.beta + pos * H, p.lamb,
                                          1, end - pos, H, K, V, &odec, wrec);
                pos = end;
            }
            if (s == NS) break;
            {
                stab_row* rw = &rows[s];
                size_t t = samp[s];
                rw->t = t; rw->lmax = 0; rw->lmin = 1e300; rw->kap = 0; rw->err = 0; rw->need = 0;
                // the uncapped iteration count on a copy of the state; the copy becomes H_t, S_t
                memcpy(ckk, hkk, H * K * K * sizeof(mn_real)); memcpy(ckv, hkv, H * K * V * sizeof(mn_real));
                mn_mesa_step(so, itn, ckk, ckv, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V, p.g + t * H,
                             p.beta + t * H, p.lamb, H, K, V, &oneed, wrec);
                for (h = 0; h < H; h++) if (itn[h] > rw->need) rw->need = itn[h];
                // the fixed-30 output, from the state before token t (another copy)
                {
                    mn_real *hk2 = gq, *hv2 = gk;   // free scratch (the gradients were counted above)
                    memcpy(hk2, hkk, H * K * K * sizeof(mn_real)); memcpy(hv2, hkv, H * K * V * sizeof(mn_real));
                    mn_mesa_step(so, NULL, hk2, hv2, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V, p.g + t * H,
                                 p.beta + t * H, p.lamb, H, K, V, &o30, wrec);
                }
                for (h = 0; h < H; h++) {
                    double num = 0, den = 0, mx, mn;
                    for (a = 0; a < K * K; a++) A[a] = ckk[h * K * K + a];
                    for (a = 0; a < K; a++) { A[a * K + a] += p.lamb[h * K + a]; qd[a] = p.q[(t * H + h) * K + a]; }
                    if (chol_solve(xe, A, qd, K, L) != 0) rw->err = INFINITY;
                    else {
                        for (j = 0; j < V; j++) {
                            double acc = 0; for (a = 0; a < K; a++) acc += (double)ckv[h * K * V + a * V + j] * xe[a];
                            oe[j] = acc;
                        }
                        for (j = 0; j < V; j++) {
                            double d = fabs((double)so[h * V + j] - oe[j]); if (!(d <= num)) num = d;
                            if (fabs(oe[j]) > den) den = fabs(oe[j]);
                        }
                        if (!(num / den <= rw->err)) rw->err = num / den;
                    }
                    sym_eig(A, K, ev);
                    mx = mn = ev[0];
                    for (a = 1; a < K; a++) { if (ev[a] > mx) mx = ev[a]; if (ev[a] < mn) mn = ev[a]; }
                    if (mx / mn > rw->kap) rw->kap = mx / mn;
                    if (mx > rw->lmax) rw->lmax = mx;
                    if (mn < rw->lmin) rw->lmin = mn;
                }
            }
        }
        td = ex_now() - td;
        bad_d = count_nonfinite(o, N * V) + count_nonfinite(hkk, H * K * K) + count_nonfinite(hkv, H * K * V);
        for (i = 0; i < N; i++) { sum += iters[i]; cap += iters[i] >= 30; }
        out("- decode run (eps 1e-4, k_max 30): %zu non-finite of %zu values (max |o| = %.3g); "
            "mean CG iterations %.2f per (token, head), %.1f %% of the systems stopped at k_max (%.1f s, "
            "with the samples)\n\n",
            bad_d, N * V + H * K * (K + V), maxabs(o, N * V), (double)sum / (double)N,
            100.0 * (double)cap / (double)N, td);
        out("| t | lambda_max | lambda_min | kappa | CG iters for eps 1e-4, uncapped | decode run's iters at t "
            "| CG-30 error of o_t |\n"
            "|---|---|---|---|---|---|---|\n");
        for (s = 0; s < NS; s++) {
            int dmx = 0;
            for (h = 0; h < H; h++) if (iters[rows[s].t * H + h] > dmx) dmx = iters[rows[s].t * H + h];
            out("| %zu | %.4g | %.4g | %.4g | %d | %d | %.1e |\n", rows[s].t, rows[s].lmax, rows[s].lmin, rows[s].kap,
                rows[s].need, dmx, rows[s].err);
        }
        out("\n");
        free_prob(&p);
    }
    free(o); free(xs); free(wch); free(wrec); free(gq); free(gk); free(gv); free(gg); free(gb); free(gl);
    free(hkk); free(hkv); free(ckk); free(ckv); free(so); free(A); free(L); free(ev); free(xe); free(oe); free(qd);
    free(iters);
}

// =================================================================================================
// 4: speed
// Chunkwise forward and backward of one layer's op at B=1, H=4, D=64, chunk 64: median of reps
// after one warm-up. The gradient buffers are zeroed outside the timed region.
static void time_chunk(size_t T, int cg, int reps, double* fwd_ms, double* bwd_ms, double* tot_ms) {
    const size_t H = 4, K = 64, V = 64, N = T * H, C = 64;
    prob p = make_prob(T, H, K, V, 0, 0, 1, 1.0, 31 + T);
    mn_mesa_opts op = mkopts(MN_MESA_CG, cg, 0, 0, C);
    mn_real *o = falloc(N * V), *xs = falloc(N * K), *w = falloc(mn_mesa_work_size(1, T, H, K, V, &op));
    mn_real *gq = falloc(N * K), *gk = falloc(N * K), *gv = falloc(N * V), *gg = falloc(N), *gb = falloc(N),
            *gl = falloc(H * K);
    double tf[16], tb[16], tt[16];
    int r;
    if (reps > 15) reps = 15;
    for (r = -1; r < reps; r++) {
        double t0, t1, t2;
        memset(gq, 0, N * K * sizeof(mn_real)); memset(gk, 0, N * K * sizeof(mn_real));
        memset(gv, 0, N * V * sizeof(mn_real));
        memset(gg, 0, N * sizeof(mn_real)); memset(gb, 0, N * sizeof(mn_real)); memset(gl, 0, H * K * sizeof(mn_real));
        t0 = ex_now();
        mn_mesa_forward(o, xs, NULL, NULL, NULL, p.q, p.k, p.v, p.g, p.beta, p.lamb, 1, T, H, K, V, &op, w);
        t1 = ex_now();
        mn_mesa_backward(gq, gk, gv, gg, gb, gl, NULL, NULL, p.dout, NULL, NULL, xs, p.q, p.k, p.v, p.g, p.beta, p.lamb,
                         NULL, NULL, 1, T, H, K, V, &op, w);
        t2 = ex_now();
        if (r >= 0) { tf[r] = (t1 - t0) * 1e3; tb[r] = (t2 - t1) * 1e3; tt[r] = (t2 - t0) * 1e3; }
    }
    if (count_nonfinite(o, N * V) + count_nonfinite(gq, N * K) + count_nonfinite(gk, N * K) != 0)
        fprintf(stderr, "warning: non-finite values in the speed run (T=%zu)\n", T);
    *fwd_ms = median(tf, (size_t)reps); *bwd_ms = median(tb, (size_t)reps); *tot_ms = median(tt, (size_t)reps);
    free(o); free(xs); free(w); free(gq); free(gk); free(gv); free(gg); free(gb); free(gl); free_prob(&p);
}

static void section_speed(void) {
    const size_t H = 4, K = 64, V = 64, C = 64;
    const size_t Ts[5] = { 1024, 2048, 4096, 8192, 16384 };
    const int cgs[2] = { 10, 30 };
    double peak2048, peak256, peak64, ms1024 = 0, ms16384 = 0;
    size_t i;
    progress("speed: sgemm ceiling");
    peak2048 = ex_sgemm_gflops(2048, 3); peak256 = ex_sgemm_gflops(256, 50); peak64 = ex_sgemm_gflops(64, 2000);
    out("\n## 4. Speed\n\n"
        "sgemm ceiling measured in this run (OpenBLAS's own sgemm on all %ld cores, its threads, best of reps): "
        "2048^3 **%.1f** GFLOP/s, 256^3 %.1f, 64^3 %.1f.\n\n"
        "FLOPs of Mesa, forward, per head and token: 2K^2 + 2KV (state pass) + n (4CK + 2K^2) (n CG steps) + 2CK + 2CV "
        "+ 2KV (output), C = chunk; forward + backward is counted as 3 x forward (the backward is one adjoint CG of n "
        "steps plus the state and output passes). One layer's op, B=1, H=%zu, D=%zu (K=V), C=%zu, "
        "all cores (OpenMP over heads, single-threaded BLAS inside); median of the repetitions after one warm-up.\n\n",
        sysconf(_SC_NPROCESSORS_ONLN), peak2048, peak256, peak64, H, K, C);
    out("| T | CG | forward ms | backward ms | fwd+bwd ms | forward GFLOP | forward GFLOP/s "
        "| fwd+bwd GFLOP/s (3 x fwd) | fraction of 2048^3 ceiling |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    for (i = 0; i < 2; i++) {
        double f, b, t, fl = mesa_fwd_flops(4096, H, K, V, C, cgs[i]);
        progress("speed: T=4096 CG=%d", cgs[i]);
        time_chunk(4096, cgs[i], 5, &f, &b, &t);
        out("| 4096 | %d | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.0f %% |\n", cgs[i], f, b, t, fl / 1e9,
            fl / f / 1e6, 3 * fl / t / 1e6, 100.0 * (3 * fl / t / 1e6) / peak2048);
    }
    out("\nT scaling, CG = 10 (same setup; the chunkwise form is linear in T):\n\n"
        "| T | reps | forward ms | fwd+bwd ms | fwd+bwd us per token | fwd+bwd GFLOP/s | per-token time / T=1024's |\n"
        "|---|---|---|---|---|---|---|\n");
    for (i = 0; i < 5; i++) {
        double f, b, t, fl = mesa_fwd_flops(Ts[i], H, K, V, C, 10);
        int reps = Ts[i] <= 4096 ? 5 : 3;
        progress("speed: T scaling T=%zu", Ts[i]);
        time_chunk(Ts[i], 10, reps, &f, &b, &t);
        if (i == 0) ms1024 = t;
        if (i == 4) ms16384 = t;
        out("| %zu | %d | %.1f | %.1f | %.2f | %.1f | %.2f |\n", Ts[i], reps, f, t, t * 1e3 / (double)Ts[i],
            3 * fl / t / 1e6, (t / (double)Ts[i]) / (ms1024 / 1024.0));
    }
    out("\nPer-token fwd+bwd time at T=16384 vs T=1024: **%.2f x** (1 = linear in T).\n",
        (ms16384 / 16384.0) / (ms1024 / 1024.0));
    {   // decode: the step, one sequence, fixed 30 CG steps; every step timed, medians over two windows
        const size_t P1 = 100, P2 = 10000, W = 200, TT = P2 + W;
        prob p = make_prob(TT, H, K, V, 0, 0, 0, 1.0, 51);
        mn_mesa_opts op = mkopts(MN_MESA_CG, 30, 0, 0, C);
        mn_real *hkk = falloc(H * K * K), *hkv = falloc(H * K * V), *o = falloc(H * V),
                *w = falloc(mn_mesa_work_size_recurrent(1, 1, H, K, V, &op));
        double ta[200], tb2[200], med1, med2, fl = mesa_step_flops(H, K, V, 30);
        int it[8], itmin = 1 << 30, itmax = 0;
        size_t t, h, bad = 0;
        progress("speed: decode step to t=%zu", TT);
        for (t = 0; t < TT; t++) {
            double t0 = ex_now(), dt;
            mn_mesa_step(o, it, hkk, hkv, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V, p.g + t * H,
                         p.beta + t * H, p.lamb, H, K, V, &op, w);
            dt = ex_now() - t0;
            if (t >= P1 && t < P1 + W) ta[t - P1] = dt;
            if (t >= P2) tb2[t - P2] = dt;
            for (h = 0; h < H; h++) { if (it[h] < itmin) itmin = it[h]; if (it[h] > itmax) itmax = it[h]; }
            bad += count_nonfinite(o, H * V);
        }
        med1 = median(ta, W); med2 = median(tb2, W);
        out("\nDecode: mn_mesa_step, one sequence, H=%zu, D=%zu, CG fixed at 30 (no tolerance), "
            "textbook CG from x0 = 0, on one thread (as mn_step runs it: one thread per sequence); every step timed, "
            "median of %zu consecutive steps from each position. FLOPs per token (our count): "
            "per head 2K^2 + 2KV (state) + 30 (2K^2 + 10K) (CG) + 2KV (read-out) = %.2f M for the %zu heads. "
            "CG iterations per head seen over all %zu steps: %d to %d; non-finite outputs: %zu.\n\n"
            "| position | us per token | GFLOP/s |\n|---|---|---|\n"
            "| %zu..%zu | %.1f | %.2f |\n| %zu..%zu | %.1f | %.2f |\n\nRatio late / early: "
            "**%.3f** (the step's work does not depend on the position: a fixed K x K + K x V state per head and 30 CG "
            "steps; a ratio near 1 says the time does not grow either).\n",
            H, K, W, fl / 1e6, H, TT, itmin, itmax, bad, P1, P1 + W - 1, med1 * 1e6, fl / med1 / 1e9, P2, P2 + W - 1,
            med2 * 1e6, fl / med2 / 1e9, med2 / med1);
        free(hkk); free(hkv); free(o); free(w); free_prob(&p);
    }
}

// =================================================================================================
// 5: dynamic CG stopping in a small trained MesaNet
static void section_model(void) {
    const char* data = "/usr/share/common-licenses";
    const size_t B = 4, T = 256, STEPS = 250, WARM = 25, NW = 8, W = 256;
    const double lr = 3e-3, tols[4] = { 0, 1e-2, 1e-3, 1e-4 };
    unsigned char* text; size_t len, split, i, s, t, n;
    mn_config c; mn_model m; mn_state st; mn_rng r;
    int *tok, *tgt, stepbuf[64];
    mn_real *logits, loss;
    double t0, ttrain, first_loss = 0, last_loss = 0, base_loss = 0, fwd_loss = 0;
    size_t offs[64];
    if (ex_read_text(data, &text, &len) != 0 || len < 100000) {
        out("\n## 5. Dynamic computation in a trained MesaNet\n\n(skipped: cannot read the text %s)\n", data);
        free(text);
        return;
    }
    split = len - len / 10;   // train on the first 90 %, validate on the last 10 % (as examples/train.c)
    memset(&c, 0, sizeof c);
    c.vocab_size = 256; c.d_model = 128; c.n_layer = 2; c.n_head = 2; c.head_dim = 64; c.max_seq_len = W > T ? W : T;
    c.pattern = "mesa"; c.mesa_cg_train = 30; c.mesa_cg_decode = 30; c.mesa_chunk = 64; c.seed = 1;
    if (mn_model_init(&m, &c) != MN_OK) { out("\n(section 5 skipped: model init failed)\n"); free(text); return; }
    tok = (int*)malloc(B * (W > T ? W : T) * NW * sizeof(int));
    tgt = (int*)malloc(B * (W > T ? W : T) * NW * sizeof(int));
    logits = falloc(NW * 256);
    mn_rng_seed(&r, 7);
    progress("model: training %zu steps, B=%zu T=%zu", STEPS, B, T);
    t0 = ex_now();
    for (s = 0; s < STEPS; s++) {
        double acc = 0;
        size_t b;
        for (b = 0; b < B; b++) {
            size_t off = (size_t)(mn_rng_u32(&r) % (uint32_t)(split - T - 1));
            for (t = 0; t < T; t++) { tok[b * T + t] = text[off + t]; tgt[b * T + t] = text[off + t + 1]; }
        }
        if (mn_forward(&m, tok, tgt, B, T, &loss) != MN_OK) break;
        mn_zero_grad(&m);
        if (mn_backward(&m) != MN_OK) break;
        mn_clip_grad_norm(&m, 1.0);
        if (mn_adamw_step(&m, mn_lr_schedule(s, WARM, STEPS, lr, lr / 10), NULL) != MN_OK) break;
        acc = loss;
        if (s < 20) first_loss += acc / 20;
        if (s >= STEPS - 20) last_loss += acc / 20;
        if (s % 50 == 0) progress("model: step %zu loss %.3f", s, acc);
    }
    ttrain = ex_now() - t0;
    // fixed validation windows, evenly spaced over the held-out 10 %
    for (n = 0; n < NW; n++) offs[n] = split + (len - split - W - 2) * n / (NW - 1);
    {   // the training path's loss on the same windows (chunkwise CG 30): a consistency check for the decode path
        for (n = 0; n < NW; n++)
            for (t = 0; t < W; t++) { tok[n * W + t] = text[offs[n] + t]; tgt[n * W + t] = text[offs[n] + t + 1]; }
        if (mn_forward(&m, tok, tgt, NW, W, &loss) == MN_OK) fwd_loss = loss; else fwd_loss = NAN;
    }
    out("\n## 5. Dynamic computation in a trained MesaNet\n\n"
        "A small MesaNet trained in this run: pattern \"mesa\", byte vocab, d_model %zu, %zu layers, %zu heads of %zu, "
        "SwiGLU %zu, %zu parameters; %zu AdamW steps (lr %g, %zu warm-up, cosine to %g, "
        "clip 1.0) of B=%zu x T=%zu bytes of %s (first 90 %%), CG = 30 in training (chunkwise, chunk %zu): %.0f s, "
        "training loss %.3f (first 20 steps) -> %.3f (last 20).\n\n"
        "Evaluation: %zu fixed validation windows of %zu bytes from the held-out last 10 %%, "
        "decoded token by token with mn_state_init / mn_step (the %zu windows in lockstep, "
        "state reset before each row), cfg.mesa_cg_decode = 30 = k_max and cfg.mesa_cg_tol = eps per row (eps = 0: "
        "no tolerance, 30 steps, except that the library stops a system early when its residual reaches exactly zero "
        "or p.Ap underflows in float, so its mean can be below 30); loss = mean next-byte cross-entropy over all %zu "
        "positions (nats/byte). Mean CG iterations per (token, head, layer) from mn_state_cg_stats, "
        "over all positions and over each half of the windows. Training path (mn_forward, "
        "chunkwise CG 30) on the same windows: %.4f.\n\n"
        "| eps | mean CG iters | positions 1-%zu | positions %zu-%zu | validation loss | loss - loss(eps = 0) |\n"
        "|---|---|---|---|---|---|\n",
        m.cfg.d_model, m.cfg.n_layer, m.cfg.n_head, m.cfg.head_dim, m.cfg.d_ff, m.n_trainable, s, lr, WARM, lr / 10, B,
        T, data, m.cfg.mesa_chunk, ttrain, first_loss, last_loss, NW, W, NW, NW * W, fwd_loss, W / 2, W / 2 + 1, W);
    if (mn_state_init(&st, &m, NW) != MN_OK) { out("(evaluation skipped: state init failed)\n"); goto done; }
    for (i = 0; i < 4; i++) {
        double sum = 0, it_all, so_all, it_h1 = 0, so_h1 = 0, m1;
        progress("model: decode eval eps=%g", tols[i]);
        m.cfg.mesa_cg_tol = tols[i];
        mn_state_reset(&st);
        for (t = 0; t < W; t++) {
            for (n = 0; n < NW; n++) stepbuf[n] = text[offs[n] + t];
            if (mn_step(&m, &st, stepbuf, logits) != MN_OK) { sum = NAN; break; }
            for (n = 0; n < NW; n++) {   // cross-entropy of the next byte, in double
                const mn_real* lg = logits + n * 256;
                double mx = lg[0], z = 0; size_t v;
                for (v = 1; v < 256; v++) if (lg[v] > mx) mx = lg[v];
                for (v = 0; v < 256; v++) z += exp((double)lg[v] - mx);
                sum += log(z) + mx - lg[text[offs[n] + t + 1]];
            }
            if (t == W / 2 - 1) { m1 = mn_state_cg_stats(&m, &st, &so_h1); it_h1 = m1 * so_h1; }
        }
        it_all = mn_state_cg_stats(&m, &st, &so_all);
        sum /= (double)(NW * W);
        if (i == 0) base_loss = sum;
        if (tols[i] == 0) out("| 0 (30 steps) ");
        else out("| %g ", tols[i]);
        out("| %.2f | %.2f | %.2f | %.4f | %+.4f |\n", it_all, so_h1 > 0 ? it_h1 / so_h1 : 0.0,
            so_all > so_h1 ? (it_all * so_all - it_h1) / (so_all - so_h1) : 0.0, sum, sum - base_loss);
    }
    out("\nThe paper (1B model, 50B tokens): eps = 1e-4 matches fixed 30 steps at about 9 steps on average.\n");
    mn_state_free(&st);
done:
    m.cfg.mesa_cg_tol = 0;
    free(tok); free(tgt); free(logits); free(text); mn_model_free(&m);
}

// =================================================================================================
// 6: warm-started CG at decode (cfg.mesa_cg_warm) in a MesaNet trained by ./build/train, loaded from a checkpoint

// ||x0 - x*||_A / ||x*||_A with A = Hm + diag(lamb) (K,K): the error CG minimises, relative to that of x0 = 0
static double anorm_rel(const mn_real* Hm, const mn_real* lamb, const double* x0, const mn_real* xs, size_t K) {
    double num = 0, den = 0; size_t i, j;
    for (i = 0; i < K; i++) {
        double a = lamb[i] * (x0[i] - xs[i]), b = lamb[i] * xs[i];
        for (j = 0; j < K; j++) { a += Hm[i * K + j] * (x0[j] - xs[j]); b += Hm[i * K + j] * xs[j]; }
        num += a * (x0[i] - xs[i]); den += b * xs[i];
    }
    return den > 0 ? sqrt(num / den) : NAN;
}
// CG iterations the library's solver takes from the start x0 to ||r|| <= 1e-4 ||q|| (at most 30): x0 passed as the
// "previous solution" of MN_MESA_WARM, which starts from it as it is and measures the stop against ||q||, so every
// start faces the same demand. xg, pg (K) scratch; work K*K + 3K.
static double cg_from(const double* x0, const mn_real* Hm, const mn_real* lamb, const mn_real* q, size_t K,
                      mn_real* xg, mn_real* pg, mn_real* work) {
    mn_mesa_opts o; size_t i;
    memset(&o, 0, sizeof o); o.cg_iters = 30; o.cg_tol = 1e-4; o.warm = MN_MESA_WARM;
    for (i = 0; i < K; i++) pg[i] = (mn_real)x0[i];
    return (double)mn__mesa_solve(xg, pg, Hm, lamb, q, K, &o, work);
}
// Why the starts do what they do: the model's own systems (the forward's q, k, v, gates and lambda of every Mesa
// layer on the m->act_B windows of the last mn_forward), solved exactly token by token (Cholesky), and each start's
// error in the A-norm relative to x0 = 0's, with the mean forget gate and the cosine of consecutive queries.
static void section_warm_why(mn_model* m, size_t NW, size_t W) {
    const mn_config* c = &m->cfg;
    size_t H = c->n_head, K = c->head_dim, V = K, l, h, n, t, i;
    mn_real *Hm = falloc(K * K), *Sm = falloc(K * V), *x = falloc(K), *xp = falloc(K), *wk = falloc(K * K + 8 * K);
    mn_real *o1 = falloc(V), *x0r = falloc(K), *rr = falloc(K), *u = falloc(K), *w2 = falloc(K);
    double* x0 = dalloc(K);
    // the library's Woodbury windows (mn_mesa_step_woodbury's ring and start) for r = 4, 8, 16, one ring each
    mn_real *ring[3], *xg = falloc(K), *pg = falloc(K);
    for (i = 0; i < 3; i++) ring[i] = falloc(mn__mesa_ring_slot(K, (size_t)4 << i));
    mn_mesa_opts ex; memset(&ex, 0, sizeof ex); ex.solver = MN_MESA_EXACT;
    out("\nWhy: the model's own systems. The forward's q, k, v, gates and lambda of every Mesa layer on the same "
        "windows, each system solved exactly (Cholesky) token by token; per head, the mean forget gate gamma, the mean "
        "cosine of consecutive queries q_t . q_{t-1} (unit vectors), and each start's error ||x0 - x*||_A / ||x*||_A "
        "(the A-norm error CG minimises, relative to x0 = 0's, which is 1), means over positions 2-%zu.\n\n"
        "| layer | head | gamma | q_t . q_{t-1} | Jacobi | x_{t-1} | scaled x_{t-1} | blend "
        "| Woodbury r 4 | r 8 | r 16 "
        "| CG steps at 1e-4 from Jacobi | from r 4 | r 8 | r 16 |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", W);
    for (l = 0; l < c->n_layer; l++) {
        mn__block_act blk; mn__mesa_act A;
        if (strcmp(mn__mixers[m->mixer[l]].name, "mesa")) continue;
        mn__block_act_layout(&blk, m->acts + m->act_layer[l], m, l, NW, W);
        mn__mesa_act_layout(&A, blk.mix, c, NW, W);
        for (h = 0; h < H; h++) {
            double sg = 0, sq = 0, e[7] = { 0, 0, 0, 0, 0, 0, 0 }, st[4] = { 0, 0, 0, 0 }, cnt = 0;
            const mn_real* lamb = A.lamb + h * K;
            for (n = 0; n < NW; n++) {
                memset(Hm, 0, K * K * sizeof(mn_real)); memset(Sm, 0, K * V * sizeof(mn_real));
                for (i = 0; i < 3; i++) memset(ring[i], 0, mn__mesa_ring_slot(K, (size_t)4 << i) * sizeof(mn_real));
                for (t = 0; t < W; t++) {
                    size_t r = (n * W + t) * H + h, s;
                    const mn_real* q = A.q + r * K;
                    mn__mesa_token(o1, x, NULL, Hm, Sm, q, A.k + r * K, A.v + r * V, A.g[r], A.beta[r], lamb, K, V,
                                   &ex, wk);
                    for (i = 0; i < 3; i++)   // token t enters each window, as in mn_mesa_step_woodbury
                        mn__mesa_ring_push(ring[i], A.k + r * K, A.beta[r], A.g[r], K, (size_t)4 << i);
                    if (t > 0) {
                        double cq = 0;
                        for (i = 0; i < K; i++) cq += (double)q[i] * A.q[r * K - H * K + i];
                        sg += exp(A.g[r]); sq += cq; cnt++;
                        for (i = 0; i < K; i++) x0[i] = q[i] / ((double)Hm[i * K + i] + lamb[i]);
                        e[0] += anorm_rel(Hm, lamb, x0, x, K);
                        st[0] += cg_from(x0, Hm, lamb, q, K, xg, pg, wk);
                        for (s = 1; s < 4; s++) {   // the warm starts as the library forms them
                            mn__mesa_warm(x0r, rr, u, w2, xp, Hm, lamb, q, K, (int)s);
                            for (i = 0; i < K; i++) x0[i] = x0r[i];
                            e[s] += anorm_rel(Hm, lamb, x0, x, K);
                        }
                        for (s = 0; s < 3; s++) {   // the library's Woodbury start on the last 4, 8, 16 tokens
                            int have = mn__mesa_woodbury(x0r, ring[s], lamb, q, K, (size_t)4 << s);
                            for (i = 0; i < K; i++)   // no usable window: the Jacobi guess, as the step falls back
                                x0[i] = have ? (double)x0r[i] : q[i] / ((double)Hm[i * K + i] + lamb[i]);
                            e[4 + s] += anorm_rel(Hm, lamb, x0, x, K);
                            st[1 + s] += cg_from(x0, Hm, lamb, q, K, xg, pg, wk);
                        }
                    }
                    memcpy(xp, x, K * sizeof(mn_real));
                }
            }
            out("| %zu | %zu | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f "
                "| %.4f | %.4f | %.4f | %.2f | %.2f | %.2f | %.2f |\n",
                l, h, sg / cnt, sq / cnt, e[0] / cnt, e[1] / cnt, e[2] / cnt, e[3] / cnt, e[4] / cnt, e[5] / cnt,
                e[6] / cnt, st[0] / cnt, st[1] / cnt, st[2] / cnt, st[3] / cnt);
        }
    }
    free(Hm); free(Sm); free(x); free(xp); free(wk); free(o1); free(x0r); free(rr); free(u); free(w2); free(x0);
    for (i = 0; i < 3; i++) free(ring[i]);
    free(xg); free(pg);
}
static const char* warm_ckpt = "runs/mesa_warm";
static void section_warm(void) {
    const char* data = "/usr/share/common-licenses";   // train.c's default text: the same held-out 10 %
    enum { NW = 16, W = 256, NB = 4, NROW = 22, NS = 7 };
    static const size_t bin_end[NB] = { 16, 64, 128, 256 };   // position bins 1-16, 17-64, 65-128, 129-256
    // the rows: CG start (mesa_cg_warm) and tolerance; the first is the fixed 30 steps of the reference loss
    static const int start[NROW] = { 0, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6 };
    static const double tol[NROW] = { 0, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3,
                                      1e-3, 1e-3, 1e-2, 1e-2, 1e-2, 1e-2, 1e-2, 1e-2, 1e-2 };
    static const char* names[NS] = { "x0 = 0", "Jacobi", "warm x_{t-1}", "warm, scaled", "warm, blend with Jacobi",
                                     "Woodbury, last 8", "Woodbury, last 16" };
    double start_products[NS] = { 0, 1, 1, 1, 2, 0, 0 };   // products with A before CG's first step (5, 6: below)
    unsigned char* text; size_t len, split, i, t, n, b;
    mn_model m; mn_state st; mn_train_meta meta;
    int tok[NW], *ftok = NULL, *ftgt = NULL, err;
    double row_it[NROW], row_loss[NROW];
    mn_real *logits = NULL, loss;
    double base_loss = 0, fwd_loss = NAN;
    size_t offs[NW];
    out("\n## 6. Warm-started CG at decode\n\n");
    if (ex_read_text(data, &text, &len) != 0 || len < 100000) {
        out("(skipped: cannot read %s)\n", data);
        free(text); return;
    }
    memset(&meta, 0, sizeof meta);
    if ((err = mn_load(&m, warm_ckpt, &meta)) != MN_OK) {
        out("(skipped: cannot load the checkpoint %s: %s; results/mesa_warm.md says how to train it)\n", warm_ckpt,
            mn_strerror(err));
        free(text); return;
    }
    split = len - len / 10;   // train.c trains on the first 90 % and validates on the last 10 %
    for (n = 0; n < NW; n++) offs[n] = split + (len - split - W - 2) * n / (NW - 1);
    ftok = (int*)malloc(NW * W * sizeof(int)); ftgt = (int*)malloc(NW * W * sizeof(int));
    logits = falloc(NW * m.cfg.vocab_size);
    for (n = 0; n < NW; n++)
        for (t = 0; t < W; t++) { ftok[n * W + t] = text[offs[n] + t]; ftgt[n * W + t] = text[offs[n] + t + 1]; }
    if (mn_forward(&m, ftok, ftgt, NW, W, &loss) == MN_OK) fwd_loss = loss;
    for (i = 5; i < NS; i++) {   // the Woodbury start (mn__mesa_woodbury) in products with A (K^2 multiply-adds)
        double K = (double)m.cfg.head_dim, r = i == 5 ? MN__MESA_WINDOW_SHORT : MN__MESA_WINDOW_LONG;
        start_products[i] = 1 + (r * (r + 1) / 2 * K + 3 * r * K + r * r * r / 6 + r * r) / (K * K);
    }
    out("Checkpoint `%s`: pattern \"%s\", d_model %zu, %zu layers, %zu heads of %zu, %zu parameters, trained with %d "
        "CG steps (chunkwise). Evaluation: %d windows of %d bytes evenly spaced over the held-out last 10 %% of %s, "
        "decoded token by token with mn_step (all windows in lockstep, mn_state_reset before each row), at most 30 CG "
        "steps per solve (cfg.mesa_cg_decode) and the row's start (cfg.mesa_cg_warm) and tolerance eps "
        "(cfg.mesa_cg_tol). Every start but x0 = 0 stops at ||r|| <= eps ||q_t||, the same accuracy demand whatever "
        "the start (x0 = 0 has r_0 = q_t: the paper's stop); the warm starts begin each window at the Jacobi guess. CG "
        "steps: mean per (token, head, layer) from mn_state_cg_stats, overall and per position bin; products: CG steps "
        "plus the products with A (K^2 multiply-adds each) that the start costs, the cost that is comparable across "
        "starts: 0 for x0 = 0, 1 for Jacobi, warm and scaled (r_0 = q - A x0), 2 for the blend, and for the Woodbury "
        "starts (cfg.mesa_cg_warm 5 and 6: the exact solve of the last r = 8 or 16 tokens' part of H_t, "
        "mn_mesa_step_woodbury) 1 for r_0 plus the start itself, its Gram matrix recomputed every token: "
        "(r(r+1)/2 K + 3 r K + r^3/6 + r^2) / K^2 = %.2f and %.2f at K = %zu. Loss: mean next-byte cross-entropy "
        "(nats) over all %d positions; "
        "the training forward (chunkwise CG %d) on the same windows: %.4f. Time: the whole row's decode (s). The "
        "training settings stored with the checkpoint: `%s`. The default checkpoint (runs/mesa_warm) is made by "
        "`OMP_NUM_THREADS=1 ./build/train --steps 600 --heads 2 --sample 0 --out runs/mesa_warm` (all else train's "
        "defaults: d_model 128, 4 layers, T = 256, B = 8, 10 CG steps in training).\n\n"
        "| start | eps | CG steps | products | pos 1-16 | 17-64 | 65-128 | 129-256 | loss | loss - loss(30 steps) "
        "| s |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        warm_ckpt, m.cfg.pattern, m.cfg.d_model, m.cfg.n_layer, m.cfg.n_head, m.cfg.head_dim, m.n_trainable,
        m.cfg.mesa_cg_train, NW, W, data, start_products[5] - 1, start_products[6] - 1, m.cfg.head_dim, NW * W,
        m.cfg.mesa_cg_train, fwd_loss, meta.notes[0] ? meta.notes : "none");
    m.cfg.mesa_cg_decode = 30;
    for (i = 0; i < NROW; i++) {
        double sum = 0, it_bin[NB], so_bin[NB], prev_it = 0, prev_so = 0, t0, so, it;
        size_t V = m.cfg.vocab_size;
        progress("warm: start %d eps %g", start[i], tol[i]);
        m.cfg.mesa_cg_warm = start[i]; m.cfg.mesa_cg_tol = tol[i];
        // the state's size follows the start (5 and 6 keep the window), so each row makes its own
        if (mn_state_init(&st, &m, NW) != MN_OK) { out("(evaluation stopped: state init failed)\n"); goto done; }
        t0 = ex_now();
        for (t = 0, b = 0; t < W; t++) {
            for (n = 0; n < NW; n++) tok[n] = text[offs[n] + t];
            if (mn_step(&m, &st, tok, logits) != MN_OK) { sum = NAN; break; }
            for (n = 0; n < NW; n++) {   // cross-entropy of the next byte, in double
                const mn_real* lg = logits + n * V;
                double mx = lg[0], z = 0; size_t v;
                for (v = 1; v < V; v++) if (lg[v] > mx) mx = lg[v];
                for (v = 0; v < V; v++) z += exp((double)lg[v] - mx);
                sum += log(z) + mx - lg[text[offs[n] + t + 1]];
            }
            if (b < NB && t + 1 == bin_end[b]) {   // the bin's own iterations: the running totals' differences
                double sv, mean = mn_state_cg_stats(&m, &st, &sv);
                it_bin[b] = mean * sv - prev_it; so_bin[b] = sv - prev_so;
                prev_it = mean * sv; prev_so = sv; b++;
            }
        }
        t0 = ex_now() - t0;
        it = mn_state_cg_stats(&m, &st, &so);
        sum /= (double)(NW * W);
        if (i == 0) base_loss = sum;
        row_it[i] = it; row_loss[i] = sum;
        out("| %s | ", names[start[i]]);
        if (tol[i] > 0) out("1e%d", (int)floor(log10(tol[i]) + 0.5)); else out("0 (30 steps)");
        out(" | %.2f | %.2f |", it, it + start_products[start[i]]);
        for (b = 0; b < NB; b++) out(" %.2f |", so_bin[b] > 0 ? it_bin[b] / so_bin[b] : NAN);
        out(" %.4f | %+.4f | %.2f |\n", sum, sum - base_loss, t0);
        mn_state_free(&st);
    }
    // the target at each tolerance: fewer mean CG steps than the Jacobi start with no worse loss (within
    // 1e-4 nats, the rounding of the table); the same with the start's own products counted
    out("\nTarget (fewer mean CG steps than the Jacobi start at the same eps, loss no worse than Jacobi's "
        "+ 1e-4):\n\n");
    for (i = 2; i < NROW; i += NS) {   // row i is Jacobi at tol[i]; rows i+1..i+5 the warm and Woodbury starts
        size_t j;
        out("- eps 1e%d: Jacobi %.2f steps (loss %.4f);", (int)floor(log10(tol[i]) + 0.5), row_it[i], row_loss[i]);
        for (j = i + 1; j <= i + NS - 2; j++) {
            int met = row_it[j] < row_it[i] && row_loss[j] <= row_loss[i] + 1e-4;
            int cheaper = row_it[j] + start_products[start[j]] < row_it[i] + start_products[start[i]];
            out(" %s %.2f steps (%+.1f %%), %.2f products against %.2f, loss %.4f: %s;", names[start[j]], row_it[j],
                100 * (row_it[j] / row_it[i] - 1), row_it[j] + start_products[start[j]],
                row_it[i] + start_products[start[i]], row_loss[j],
                !met ? "not met" : cheaper ? "met, also in products" : "met in CG steps only");
        }
        out("\n");
    }
    section_warm_why(&m, NW, W);
done:
    free(ftok); free(ftgt); free(logits); free(text); mn_model_free(&m);
}

// =================================================================================================
int main(int argc, char** argv) {
    const char* outpath = argc > 1 ? argv[1] : "results/mesa_bench.md";
    const char* secs = argc > 2 ? argv[2] : "12345";
    if (argc > 3) warm_ckpt = argv[3];
    char when[64], cmd[1024];
    time_t now = time(NULL);
    struct utsname u;
    const char* ct = getenv("OPENBLAS_CORETYPE");
    double total;
    int i;
    t_start = ex_now();
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    uname(&u);
    snprintf(cmd, sizeof cmd, "./build/bench_mesa");
    for (i = 1; i < argc; i++) {
        strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1); strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
    }
    out("# mesanet benchmark: the Mesa op and a small MesaNet\n\n"
        "Measured %s on %s %s (%ld cores online), OPENBLAS_CORETYPE=%s, %s build (mn_real = float), "
        "%d OpenMP threads. Command: `%s`%s.\n",
        when, u.machine, u.release, sysconf(_SC_NPROCESSORS_ONLN), ct ? ct : "(unset)",
#ifdef _OPENMP
        "float + OpenBLAS + OpenMP", omp_get_max_threads(),
#else
        "float + OpenBLAS", 1,
#endif
        cmd, strcmp(secs, "12345") ? " (a subset of the sections)" : " (`make bench` runs it)");
    if (strchr(secs, '1') || strchr(secs, '2')) section_accuracy(strchr(secs, '1') != NULL, strchr(secs, '2') != NULL);
    if (strchr(secs, '3')) section_stability();
    if (strchr(secs, '4')) section_speed();
    if (strchr(secs, '5')) section_model();
    if (strchr(secs, '6')) section_warm();
    total = ex_now() - t_start;
    out("\nWhole program: %.0f s.\n", total);
    {
        FILE* f = fopen(outpath, "w");
        if (!f || fwrite(md_buf, 1, md_len, f) != md_len) {
            fprintf(stderr, "bench_mesa: cannot write %s\n", outpath); if (f) fclose(f); return 1;
        }
        fclose(f);
        fprintf(stderr, "written to %s\n", outpath);
    }
    free(md_buf);
    return 0;
}
