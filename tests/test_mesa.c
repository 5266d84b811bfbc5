// The Mesa op of mesanet.h against the independent float64 oracle (reference/mesa_oracle.h) and
// against itself across forms (double build):
//   1. exact recurrent form == oracle's Cholesky recurrence == the direct least-squares solve
//      (T up to 300, with and without forgetting, square and rectangular heads);
//   2. implicit backward (exact solver) == oracle finite differences, with initial states and
//      upstream gradients of the final states;
//   3. chunkwise CG (no epsilons, enough iterations) == exact, forward and every gradient, for
//      chunk sizes 1, 3, 16, 64 and T = 37 (not a multiple);
//   4. the step == the recurrent forward, token by token; dynamic stopping reports per-token
//      iteration counts and stays within its tolerance.
#define _POSIX_C_SOURCE 200809L   // mkdir for the checkpoint folder of test_model_warm
#include <sys/stat.h>
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include "reference/mesa_oracle.h"
#include "testutil.h"
#include <stdlib.h>
#include <string.h>

#ifndef MESANET_DOUBLE
#error "test_mesa compares with a float64 oracle: build with -DMESANET_DOUBLE"
#endif

static mn_rng rng;
typedef struct {
    size_t B, T, H, K, V;
    double *q, *k, *v, *g, *beta, *lamb, *hkk0, *hkv0, *dout, *dhkk, *dhkv;
} prob;
static double* arr(size_t n) { return (double*)calloc(n ? n : 1, sizeof(double)); }
static void l2rows(double* x, size_t rows, size_t D) {
    size_t r, d;
    for (r = 0; r < rows; r++) {
        double s = 0; for (d = 0; d < D; d++) s += x[r * D + d] * x[r * D + d]; s = 1 / sqrt(s + 1e-6);
        for (d = 0; d < D; d++) x[r * D + d] *= s;
    }
}
// Inputs as the layer produces them: L2-normalised q,k; g = logsigmoid(N(2,2^2)) clamped
// (mostly near 0, some strong forgetting); beta = sigmoid(N(0,1)); lambda in (0.25, 1).
static prob make(size_t B, size_t T, size_t H, size_t K, size_t V, int forget, int states) {
    prob p; size_t i, N = B * T * H;
    p.B = B; p.T = T; p.H = H; p.K = K; p.V = V;
    p.q = arr(N * K); p.k = arr(N * K); p.v = arr(N * V); p.g = arr(N); p.beta = arr(N); p.lamb = arr(H * K);
    p.hkk0 = arr(B * H * K * K); p.hkv0 = arr(B * H * K * V); p.dout = arr(N * V); p.dhkk = arr(B * H * K * K);
    p.dhkv = arr(B * H * K * V);
    for (i = 0; i < N * K; i++) { p.q[i] = mn_rng_normal(&rng); p.k[i] = mn_rng_normal(&rng); }
    l2rows(p.q, N, K); l2rows(p.k, N, K);
    for (i = 0; i < N * V; i++) { p.v[i] = mn_rng_normal(&rng); p.dout[i] = mn_rng_normal(&rng); }
    for (i = 0; i < N; i++) {
        double u = 2 + 2 * mn_rng_normal(&rng);
        u = u < -4.9 ? -4.9 : u > 12 ? 12 : u;
        p.g[i] = forget ? -log1p(exp(-u)) : 0.0;
        p.beta[i] = 1 / (1 + exp(-mn_rng_normal(&rng)));
    }
    for (i = 0; i < H * K; i++) p.lamb[i] = 0.25 + 0.75 * mn_rng_uniform(&rng);
    if (states) {
        size_t b, h, a, c;
        for (b = 0; b < B * H; b++) {      // a symmetric PSD initial H: sum of a few k k^T
            for (h = 0; h < 3; h++) {
                double kk[64];
                for (a = 0; a < K; a++) kk[a] = 0.5 * mn_rng_normal(&rng);
                for (a = 0; a < K; a++) for (c = 0; c < K; c++) p.hkk0[b * K * K + a * K + c] += kk[a] * kk[c];
            }
        }
        for (i = 0; i < B * H * K * V; i++) { p.hkv0[i] = 0.5 * mn_rng_normal(&rng); p.dhkv[i] = mn_rng_normal(&rng); }
        for (i = 0; i < B * H * K * K; i++) p.dhkk[i] = mn_rng_normal(&rng);
    }
    return p;
}
static void drop(prob* p) {
    free(p->q); free(p->k); free(p->v); free(p->g); free(p->beta); free(p->lamb); free(p->hkk0); free(p->hkv0);
    free(p->dout); free(p->dhkk); free(p->dhkv);
}

typedef struct { double *out, *xs, *hkk, *hkv, *dq, *dk, *dv, *dg, *db, *dl, *dhkk0, *dhkv0; int* iters; } result;
static result run(const prob* p, const mn_mesa_opts* o, int chunk, int with_states, int backward) {
    result r; size_t B = p->B, T = p->T, H = p->H, K = p->K, V = p->V, N = B * T * H;
    mn_real* w = arr(chunk ? mn_mesa_work_size(B, T, H, K, V, o) : mn_mesa_work_size_recurrent(B, T, H, K, V, o));
    r.out = arr(N * V); r.xs = arr(N * K); r.hkk = arr(B * H * K * K); r.hkv = arr(B * H * K * V);
    r.iters = (int*)calloc(N, sizeof(int));
    if (with_states) {
        memcpy(r.hkk, p->hkk0, B * H * K * K * sizeof(double)); memcpy(r.hkv, p->hkv0, B * H * K * V * sizeof(double));
    }
    if (chunk) mn_mesa_forward(r.out, r.xs, r.iters, r.hkk, r.hkv, p->q, p->k, p->v, p->g, p->beta, p->lamb,
                               B, T, H, K, V, o, w);
    else mn_mesa_forward_recurrent(r.out, r.xs, r.iters, r.hkk, r.hkv, p->q, p->k, p->v, p->g, p->beta, p->lamb,
                                   B, T, H, K, V, o, w);
    r.dq = arr(N * K); r.dk = arr(N * K); r.dv = arr(N * V); r.dg = arr(N); r.db = arr(N); r.dl = arr(H * K);
    r.dhkk0 = arr(B * H * K * K); r.dhkv0 = arr(B * H * K * V);
    if (backward) {
        const double *h0k = with_states ? p->hkk0 : NULL, *h0v = with_states ? p->hkv0 : NULL,
                     *uk = with_states ? p->dhkk : NULL, *uv = with_states ? p->dhkv : NULL;
        if (chunk) mn_mesa_backward(r.dq, r.dk, r.dv, r.dg, r.db, r.dl, r.dhkk0, r.dhkv0, p->dout, uk, uv, r.xs, p->q,
                                    p->k, p->v, p->g, p->beta, p->lamb, h0k, h0v, B, T, H, K, V, o, w);
        else mn_mesa_backward_recurrent(r.dq, r.dk, r.dv, r.dg, r.db, r.dl, r.dhkk0, r.dhkv0, p->dout, uk, uv, r.xs,
                                        p->q, p->k, p->v, p->g, p->beta, p->lamb, h0k, h0v, B, T, H, K, V, o, w);
    }
    free(w);
    return r;
}
static void unrun(result* r) {
    free(r->out); free(r->xs); free(r->hkk); free(r->hkv); free(r->iters); free(r->dq); free(r->dk); free(r->dv);
    free(r->dg); free(r->db); free(r->dl); free(r->dhkk0); free(r->dhkv0);
}
static mn_mesa_opts exact_opts(void) { mn_mesa_opts o; memset(&o, 0, sizeof o); o.solver = MN_MESA_EXACT; return o; }

static void test_exact_vs_oracle(void) {
    size_t cases[4][4] = { { 300, 16, 16, 1 }, { 300, 16, 8, 1 }, { 200, 16, 16, 0 },
                           { 64, 8, 12, 1 } };   // T, K, V, forget
    size_t c;
    for (c = 0; c < 4; c++) {
        size_t T = cases[c][0], K = cases[c][1], V = cases[c][2];
        prob p = make(1, T, 2, K, V, (int)cases[c][3], 0);
        mn_mesa_opts o = exact_opts();
        result r = run(&p, &o, 0, 0, 0);
        double* ol = arr(T * 2 * V); double* oe = arr(T * 2 * V);
        TU_CHECK(mo_mesa_lstsq(1, (int)T, 2, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, ol) == 0, "lstsq ran");
        TU_CHECK(mo_mesa_exact(1, (int)T, 2, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, NULL, NULL, oe,
                               NULL, NULL, NULL) == 0, "oracle ran");
        double e1 = tu_relerr(r.out, ol, T * 2 * V), e2 = tu_relerr(r.out, oe, T * 2 * V);
        printf("  exact T=%zu K=%zu V=%zu forget=%zu: vs direct least squares %.1e, vs oracle recurrence %.1e\n",
               T, K, V, cases[c][3], e1, e2);
        TU_CHECK(e1 < 1e-10 && e2 < 1e-12, "exact form vs least squares %.3e / oracle %.3e", e1, e2);
        free(ol); free(oe); unrun(&r); drop(&p);
    }
}

static void test_backward_vs_fd(void) {
    prob p = make(2, 11, 2, 5, 3, 1, 1);
    size_t B = 2, T = 11, H = 2, K = 5, V = 3, N = B * T * H;
    mn_mesa_opts o = exact_opts();
    result r = run(&p, &o, 0, 1, 1);
    double *fq = arr(N * K), *fk = arr(N * K), *fv = arr(N * V), *fg = arr(N), *fb = arr(N), *fl = arr(H * K),
           *fhk = arr(B * H * K * K), *fhv = arr(B * H * K * V);
    mo_mesa_grad_fd((int)B, (int)T, (int)H, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, p.hkk0, p.hkv0, p.dout,
                    p.dhkk, p.dhkv, 1e-4, fq, fk, fv, fg, fb, fl, fhk, fhv);
    double e[8] = { tu_relerr(r.dq, fq, N * K), tu_relerr(r.dk, fk, N * K), tu_relerr(r.dv, fv, N * V),
                    tu_relerr(r.dg, fg, N), tu_relerr(r.db, fb, N), tu_relerr(r.dl, fl, H * K),
                    tu_relerr(r.dhkk0, fhk, B * H * K * K), tu_relerr(r.dhkv0, fhv, B * H * K * V) };
    const char* nm[8] = { "dq", "dk", "dv", "dg", "dbeta", "dlambda", "dhkk0", "dhkv0" };
    int i;
    printf("  recurrent backward vs finite differences (initial states, final-state gradients, V != K):");
    for (i = 0; i < 8; i++) {
        printf(" %s %.1e", nm[i], e[i]); TU_CHECK(e[i] < 1e-7, "recurrent %s vs fd %.3e", nm[i], e[i]);
    }
    printf("\n");
    // the chunkwise backward on the same problem (CG without epsilons, enough steps)
    size_t cs[4] = { 1, 3, 4, 64 }, c;
    for (c = 0; c < 4; c++) {
        mn_mesa_opts oc; memset(&oc, 0, sizeof oc); oc.cg_iters = 40; oc.chunk = cs[c];
        result rc = run(&p, &oc, 1, 1, 1);
        double f[10] = { tu_relerr(rc.out, r.out, N * V), tu_relerr(rc.hkk, r.hkk, B * H * K * K),
                         tu_relerr(rc.dq, fq, N * K), tu_relerr(rc.dk, fk, N * K), tu_relerr(rc.dv, fv, N * V),
                         tu_relerr(rc.dg, fg, N), tu_relerr(rc.db, fb, N), tu_relerr(rc.dl, fl, H * K),
                         tu_relerr(rc.dhkk0, fhk, B * H * K * K), tu_relerr(rc.dhkv0, fhv, B * H * K * V) };
        double worst = 0; for (i = 0; i < 10; i++) worst = fmax(worst, f[i]);
        printf("  chunkwise C=%zu vs exact/fd: worst over out, states and 8 gradients %.1e\n", cs[c], worst);
        TU_CHECK(worst < 1e-7, "chunk %zu backward worst %.3e", cs[c], worst);
        unrun(&rc);
    }
    free(fq); free(fk); free(fv); free(fg); free(fb); free(fl); free(fhk); free(fhv);
    unrun(&r); drop(&p);
}

static void test_chunk_vs_exact(void) {
    size_t cs[4] = { 1, 3, 16, 64 }, c, T = 37, B = 2, H = 3, K = 16, V = 8, N = B * T * H;
    prob p = make(B, T, H, K, V, 1, 1);
    mn_mesa_opts o = exact_opts();
    result r = run(&p, &o, 0, 1, 1);
    for (c = 0; c < 4; c++) {
        mn_mesa_opts oc; memset(&oc, 0, sizeof oc); oc.cg_iters = 2 * (int)K + 8; oc.chunk = cs[c];
        result rc = run(&p, &oc, 1, 1, 1);
        double e = fmax(fmax(tu_relerr(rc.out, r.out, N * V), tu_relerr(rc.hkv, r.hkv, B * H * K * V)),
                        tu_relerr(rc.hkk, r.hkk, B * H * K * K));
        double eg = fmax(fmax(fmax(tu_relerr(rc.dq, r.dq, N * K), tu_relerr(rc.dk, r.dk, N * K)),
                              fmax(tu_relerr(rc.dv, r.dv, N * V), tu_relerr(rc.dg, r.dg, N))),
                         fmax(fmax(tu_relerr(rc.db, r.db, N), tu_relerr(rc.dl, r.dl, H * K)),
                              fmax(tu_relerr(rc.dhkk0, r.dhkk0, B * H * K * K),
                                   tu_relerr(rc.dhkv0, r.dhkv0, B * H * K * V))));
        printf("  chunkwise C=%zu T=%zu vs exact: forward %.1e, gradients %.1e\n", cs[c], T, e, eg);
        TU_CHECK(e < 1e-10 && eg < 1e-9, "chunk %zu vs exact: %.3e %.3e", cs[c], e, eg);
        unrun(&rc);
    }
    // the recurrent CG form (same arithmetic, per token) agrees with the chunkwise CG bit-closely
    {
        mn_mesa_opts oc; memset(&oc, 0, sizeof oc); oc.cg_iters = 5; oc.chunk = 16;
        result a = run(&p, &oc, 0, 1, 0), b2 = run(&p, &oc, 1, 1, 0);
        double e = tu_relerr(a.out, b2.out, N * V);
        TU_CHECK(e < 1e-12, "recurrent CG-5 vs chunkwise CG-5: %.3e", e);
        unrun(&a); unrun(&b2);
    }
    unrun(&r); drop(&p);
}

static void test_step_and_dynamic_stopping(void) {
    size_t B = 1, T = 50, H = 2, K = 16, V = 16, t, h, i;
    prob p = make(B, T, H, K, V, 1, 0);
    mn_mesa_opts o; memset(&o, 0, sizeof o); o.cg_iters = 30; o.cg_tol = 1e-4;
    result r = run(&p, &o, 0, 0, 0);
    mn_mesa_opts ex = exact_opts();
    result re = run(&p, &ex, 0, 0, 0);
    double* hkk = arr(H * K * K); double* hkv = arr(H * K * V); double* out = arr(H * V);
    double* w = arr(mn_mesa_work_size_recurrent(1, 1, H, K, V, &o));
    double e = 0; int it[8], total = 0, mn = 1000, mx = 0;
    for (t = 0; t < T; t++) {
        mn_mesa_step(out, it, hkk, hkv, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V, p.g + t * H, p.beta + t * H,
                     p.lamb, H, K, V, &o, w);
        for (i = 0; i < H * V; i++) e = fmax(e, fabs(out[i] - r.out[t * H * V + i]));
        for (h = 0; h < H; h++) {
            TU_CHECK(it[h] == r.iters[t * H + h], "step iterations == forward's"); total += it[h];
            mn = it[h] < mn ? it[h] : mn; mx = it[h] > mx ? it[h] : mx;
        }
    }
    TU_CHECK(e == 0, "step == recurrent forward token by token (%.3e)", e);
    double ed = tu_relerr(r.out, re.out, T * H * V);
    printf("  dynamic stopping eps=1e-4: %.1f CG steps per token-head on average (min %d, max %d); "
           "output vs exact %.1e\n", (double)total / (T * H), mn, mx, ed);
    TU_CHECK(mx < 30 && mn >= 1 && ed < 1e-3, "dynamic stopping: steps %d..%d, error %.3e", mn, mx, ed);
    free(hkk); free(hkv); free(out); free(w); unrun(&r); unrun(&re); drop(&p);
}

// ---- 5. warm-started CG at decode (opts.warm, mn_mesa_step_warm; the model's cfg.mesa_cg_warm) ----
// ||q - (Hm + diag lamb) x|| for one head, Hm (K,K), in double
static double true_residual(const double* Hm, const double* lamb, const double* q, const double* x, size_t K) {
    size_t i, j; double s = 0;
    for (i = 0; i < K; i++) {
        double a = q[i] - lamb[i] * x[i];
        for (j = 0; j < K; j++) a -= Hm[i * K + j] * x[j];
        s += a * a;
    }
    return sqrt(s);
}
static double norm2(const double* x, size_t n) {
    size_t i; double s = 0;
    for (i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}
static double dist2(const double* x, const double* y, size_t n) {
    size_t i; double s = 0;
    for (i = 0; i < n; i++) s += (x[i] - y[i]) * (x[i] - y[i]);
    return sqrt(s);
}
// Decodes p with mn_mesa_step_warm under o (win = 0), or with mn_mesa_step_woodbury on a window of win tokens (its
// ring zeroed at the start); warm = 0 zeroes xs before every token (no previous solution: the Jacobi start of the
// warm modes' fallback, with their stop). Checks every solve against the exact one xe: the true residual within
// the tolerance, ||r|| <= tol ||q||, and hence ||x - x*|| <= ||A^-1|| ||r|| <= ||r|| / min lambda (H_t is PSD).
// Fills the mean CG steps per (token, head), the most steps of one solve, the largest ||x - x*|| and, given the
// exact outputs oe, the largest |o - o*|.
typedef struct { double mean, worst, worst_out; int itmax; } decode_stats;
static decode_stats decode_start(const prob* p, const mn_mesa_opts* o, int keep, size_t win, const double* xe,
                                 const double* oe) {
    size_t T = p->T, H = p->H, K = p->K, V = p->V, t, h, i, n = 0;
    double *hkk = arr(H * K * K), *hkv = arr(H * K * V), *out = arr(H * V), *xs = arr(H * K);
    double *w = arr(mn_mesa_work_size_recurrent(1, 1, H, K, V, o)), lmin = 1e300, tol = o->cg_tol, total = 0;
    double* ring = arr(H * (win * (K + 2) + 1));
    int it[8], res_ok = 1, err_ok = 1;
    decode_stats st = { 0, 0, 0, 0 };
    for (i = 0; i < H * K; i++) lmin = fmin(lmin, p->lamb[i]);
    for (t = 0; t < T; t++) {
        if (!keep) memset(xs, 0, H * K * sizeof(double));
        if (win)
            mn_mesa_step_woodbury(out, xs, ring, it, hkk, hkv, p->q + t * H * K, p->k + t * H * K, p->v + t * H * V,
                                  p->g + t * H, p->beta + t * H, p->lamb, H, K, V, win, o, w);
        else
            mn_mesa_step_warm(out, xs, it, hkk, hkv, p->q + t * H * K, p->k + t * H * K, p->v + t * H * V,
                              p->g + t * H, p->beta + t * H, p->lamb, H, K, V, o, w);
        for (h = 0; h < H; h++) {
            const double *q = p->q + (t * H + h) * K, *x = xs + h * K;
            double r = true_residual(hkk + h * K * K, p->lamb + h * K, q, x, K), e = dist2(x, xe + (t * H + h) * K, K);
            res_ok &= r <= tol * norm2(q, K) * (1 + 1e-6) + 1e-14;   // the recursive residual drifts by ~1e-16
            err_ok &= e <= r / lmin * (1 + 1e-6) + 1e-13;
            st.worst = fmax(st.worst, e);
            for (i = 0; oe && i < V; i++)
                st.worst_out = fmax(st.worst_out, fabs(out[h * V + i] - oe[(t * H + h) * V + i]));
            total += it[h]; n++;
            if (it[h] > st.itmax) st.itmax = it[h];
        }
    }
    TU_CHECK(res_ok, "warm %d keep %d window %zu: every true residual within tol ||q|| (tol %g)", o->warm, keep, win,
             tol);
    TU_CHECK(err_ok, "warm %d keep %d window %zu: every solution within ||r|| / min lambda of the exact one", o->warm,
             keep, win);
    free(hkk); free(hkv); free(out); free(xs); free(w); free(ring);
    st.mean = total / (double)n;
    return st;
}
static double decode_warm(const prob* p, const mn_mesa_opts* o, int keep, const double* xe, double* worst) {
    decode_stats st = decode_start(p, o, keep, 0, xe, NULL);
    *worst = st.worst;
    return st.mean;
}
static void test_warm_start(void) {
    size_t T = 120, H = 2, K = 16, V = 16, N = T * H, c, i, t;
    static const char* cname[3] = { "random, forgetting", "ill-conditioned (no forgetting, lambda / 100)",
                                    "slowly varying system" };
    static const char* mname[4] = { "Jacobi", "warm", "scaled", "blend" };
    for (c = 0; c < 3; c++) {
        prob p = make(1, T, H, K, V, c != 1, 0);
        mn_mesa_opts ex = exact_opts(), o;
        result re;
        double mean[4], worst[4];
        int m;
        if (c == 1) for (i = 0; i < H * K; i++) p.lamb[i] *= 0.01;   // condition numbers up to ~1e4
        if (c == 2) {   // a slowly varying system: q_t = normalise(q_{t-1} + 0.01 z), gamma = 0.99, and after 20
                        // tokens that fill the state, beta = 0.01
            for (t = 1; t < T; t++) {
                for (i = 0; i < H * K; i++) p.q[t * H * K + i] = p.q[(t - 1) * H * K + i] + 0.01 * mn_rng_normal(&rng);
                l2rows(p.q + t * H * K, H, K);
            }
            for (i = 0; i < N; i++) { p.g[i] = log(0.99); p.beta[i] = i < 20 * H ? 0.5 : 0.01; }
        }
        re = run(&p, &ex, 0, 0, 0);
        for (m = 0; m < 4; m++) {   // tol 1e-8, enough steps for it
            memset(&o, 0, sizeof o); o.cg_iters = 400; o.cg_tol = 1e-8; o.jacobi = 1;
            o.warm = m == 0 ? MN_MESA_WARM : m;
            mean[m] = decode_warm(&p, &o, m > 0, re.xs, &worst[m]);
        }
        printf("  warm start, %s, tol 1e-8: mean CG steps", cname[c]);
        for (m = 0; m < 4; m++) printf(" %s %.2f", mname[m], mean[m]);
        printf("; worst ||x - x*|| %.1e\n", fmax(fmax(worst[0], worst[1]), fmax(worst[2], worst[3])));
        if (c == 2)   // the previous solution is close to the new one: the warm starts must save steps
            TU_CHECK(mean[1] < mean[0] && mean[2] < mean[0] && mean[3] < mean[0],
                     "slowly varying system: warm starts take fewer steps than Jacobi (%.2f %.2f %.2f vs %.2f)",
                     mean[1], mean[2], mean[3], mean[0]);
        if (c == 0) {   // a fixed large count (no tolerance) reaches the exact form from every start
            for (m = 1; m < 4; m++) {
                double e;
                memset(&o, 0, sizeof o); o.cg_iters = 3 * (int)K; o.jacobi = 1; o.warm = m;
                decode_warm(&p, &o, 1, re.xs, &e);
                TU_CHECK(e < 1e-12, "%s start, %d fixed steps: ||x - x*|| %.3e", mname[m], o.cg_iters, e);
            }
        }
        {   // the recurrent form with opts.warm is the step run over t, bit for bit (outputs and iterations)
            double *hkk = arr(H * K * K), *hkv = arr(H * K * V), *out = arr(H * V), *xs = arr(H * K), e = 0;
            double* w = arr(mn_mesa_work_size_recurrent(1, 1, H, K, V, &o));
            int it[8], same = 1;
            result rr;
            memset(&o, 0, sizeof o); o.cg_iters = 30; o.cg_tol = 1e-5; o.jacobi = 1; o.warm = MN_MESA_WARM_BLEND;
            rr = run(&p, &o, 0, 0, 0);
            for (t = 0; t < T; t++) {
                mn_mesa_step_warm(out, xs, it, hkk, hkv, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V,
                                  p.g + t * H, p.beta + t * H, p.lamb, H, K, V, &o, w);
                for (i = 0; i < H * V; i++) e = fmax(e, fabs(out[i] - rr.out[t * H * V + i]));
                for (i = 0; i < H; i++) same &= it[i] == rr.iters[t * H + i];
            }
            TU_CHECK(e == 0 && same, "%s: recurrent form with warm starts == step_warm (%.3e)", cname[c], e);
            free(hkk); free(hkv); free(out); free(xs); free(w); unrun(&rr);
        }
        unrun(&re); drop(&p);
        MN_UNUSED(N);
    }
    {   // no previous solution (a zero row, or mn_mesa_step) falls back to the cold start: with fla's arithmetic
        // (always the full count, so the stop's reference plays no part) warm = cold bit for bit on every token
        prob p = make(1, 20, H, K, V, 1, 0);
        mn_mesa_opts oc, ow;
        double *h1 = arr(H * K * K), *v1 = arr(H * K * V), *h2 = arr(H * K * K), *v2 = arr(H * K * V);
        double *h3 = arr(H * K * K), *v3 = arr(H * K * V), *o1 = arr(H * V), *o2 = arr(H * V), *o3 = arr(H * V);
        double* xs = arr(H * K);
        double* w = arr(mn_mesa_work_size_recurrent(1, 1, H, K, V, NULL));
        int i1[8], i2[8], i3[8], same = 1;
        memset(&oc, 0, sizeof oc); oc.cg_iters = 5; oc.fla = 1; oc.jacobi = 1;
        ow = oc; ow.warm = MN_MESA_WARM_BLEND;
        for (t = 0; t < 20; t++) {
            const double *q = p.q + t * H * K, *k = p.k + t * H * K, *v = p.v + t * H * V, *g = p.g + t * H;
            memset(xs, 0, H * K * sizeof(double));
            mn_mesa_step(o1, i1, h1, v1, q, k, v, g, p.beta + t * H, p.lamb, H, K, V, &oc, w);
            mn_mesa_step(o2, i2, h2, v2, q, k, v, g, p.beta + t * H, p.lamb, H, K, V, &ow, w);
            mn_mesa_step_warm(o3, xs, i3, h3, v3, q, k, v, g, p.beta + t * H, p.lamb, H, K, V, &ow, w);
            same &= !memcmp(o1, o2, H * V * sizeof(double)) && !memcmp(o1, o3, H * V * sizeof(double)) &&
                    i1[0] == i2[0] && i1[0] == i3[0];
        }
        TU_CHECK(same, "no previous solution: the warm modes start at the Jacobi guess");
        free(h1); free(v1); free(h2); free(v2); free(h3); free(v3); free(o1); free(o2); free(o3); free(xs); free(w);
        drop(&p);
    }
    {   // the backward's adjoint solves ignore opts.warm
        prob p = make(2, 11, 2, 5, 3, 1, 1);
        mn_mesa_opts oc, ow;
        result a, b2;
        memset(&oc, 0, sizeof oc); oc.cg_iters = 30; oc.cg_tol = 1e-6;
        ow = oc; ow.warm = MN_MESA_WARM_SCALED;
        a = run(&p, &oc, 0, 1, 1);
        b2 = run(&p, &oc, 0, 1, 0);
        mn_real* w = arr(mn_mesa_work_size_recurrent(2, 11, 2, 5, 3, &ow));
        memset(b2.dq, 0, 2 * 11 * 2 * 5 * sizeof(double));
        mn_mesa_backward_recurrent(b2.dq, b2.dk, b2.dv, b2.dg, b2.db, b2.dl, b2.dhkk0, b2.dhkv0, p.dout, p.dhkk, p.dhkv,
                                   a.xs, p.q, p.k, p.v, p.g, p.beta, p.lamb, p.hkk0, p.hkv0, 2, 11, 2, 5, 3, &ow, w);
        TU_CHECK(!memcmp(a.dq, b2.dq, 2 * 11 * 2 * 5 * sizeof(double)) &&
                 !memcmp(a.dk, b2.dk, 2 * 11 * 2 * 5 * sizeof(double)), "recurrent backward with opts.warm == without");
        free(w); unrun(&a); unrun(&b2); drop(&p);
    }
}

// ---- 6. the windowed-Woodbury start (mn_mesa_step_woodbury; the model's cfg.mesa_cg_warm 5 and 6) ----
// x = (lamb + sum_j w_j k_j k_j^T)^-1 q by a dense K x K Cholesky, the sum over rows j of kr (n,K) with weights w (n)
static void dense_window_solve(double* x, const double* kr, const double* w, size_t n, const double* lamb,
                               const double* q, size_t K) {
    double* A = arr(K * K);
    size_t i, j, p;
    for (i = 0; i < K; i++) {
        A[i * K + i] = lamb[i];
        for (j = 0; j < K; j++) for (p = 0; p < n; p++) A[i * K + j] += w[p] * kr[p * K + i] * kr[p * K + j];
    }
    for (j = 0; j < K; j++) {   // A = L L^T in place
        for (p = 0; p < j; p++) A[j * K + j] -= A[j * K + p] * A[j * K + p];
        A[j * K + j] = sqrt(A[j * K + j]);
        for (i = j + 1; i < K; i++) {
            for (p = 0; p < j; p++) A[i * K + j] -= A[i * K + p] * A[j * K + p];
            A[i * K + j] /= A[j * K + j];
        }
    }
    for (i = 0; i < K; i++) { x[i] = q[i]; for (p = 0; p < i; p++) x[i] -= A[i * K + p] * x[p]; x[i] /= A[i * K + i]; }
    for (i = K; i-- > 0;) { for (p = i + 1; p < K; p++) x[i] -= A[p * K + i] * x[p]; x[i] /= A[i * K + i]; }
    free(A);
}
static void test_woodbury_start(void) {
    size_t H = 2, K = 16, V = 16, i, t, c;
    mn_mesa_opts ex = exact_opts(), o;
    {   // the start itself: after each push the ring's x0 is the dense solve of lambda + the last r tokens' part of
        // H_t, w_j = beta_j exp(g_{j+1} + ... + g_t), built here from the token arrays (the ring's shift and weights)
        size_t T = 40, r = 8, h = 1;
        prob p = make(1, T, H, K, V, 1, 0);
        double *ring = arr(r * (K + 2) + 1), *x0 = arr(K), *xd = arr(K), *w = arr(r), e = 0;
        for (t = 0; t < T; t++) {
            size_t n = t + 1 < r ? t + 1 : r, j0 = t + 1 - n, j;
            const double* q = p.q + (t * H + h) * K;
            mn__mesa_ring_push(ring, p.k + (t * H + h) * K, p.beta[t * H + h], p.g[t * H + h], K, r);
            TU_CHECK(mn__mesa_woodbury(x0, ring, p.lamb + h * K, q, K, r), "Woodbury start formed at t %zu", t);
            for (j = j0; j <= t; j++) {
                double s = 0; size_t u;
                for (u = j + 1; u <= t; u++) s += p.g[u * H + h];
                w[j - j0] = p.beta[j * H + h] * exp(s);
            }
            {
                double* kr = arr(n * K);
                for (j = 0; j < n; j++) memcpy(kr + j * K, p.k + ((j0 + j) * H + h) * K, K * sizeof(double));
                dense_window_solve(xd, kr, w, n, p.lamb + h * K, q, K);
                free(kr);
            }
            e = fmax(e, dist2(x0, xd, K) / norm2(xd, K));
        }
        printf("  Woodbury start, window 8 over 40 tokens: x0 vs the dense solve of the window: %.1e\n", e);
        TU_CHECK(e < 1e-12, "Woodbury x0 == dense solve of lambda + the last 8 tokens' part of H_t (%.3e)", e);
        free(ring); free(x0); free(xd); free(w); drop(&p);
    }
    for (c = 0; c < 2; c++) {   // (a) a sequence no longer than the window: x0 is the exact solve, CG has nothing to do
        size_t T = c ? 11 : 8, r = c ? 16 : 8;
        prob p = make(1, T, H, K, V, 1, 0);
        result re = run(&p, &ex, 0, 0, 0);
        decode_stats st;
        memset(&o, 0, sizeof o); o.cg_iters = 30; o.cg_tol = 1e-8;
        st = decode_start(&p, &o, 1, r, re.xs, re.out);
        printf("  Woodbury start, T = %zu <= window %zu: most CG steps %d, ||x - x*|| %.1e, |o - o*| %.1e\n", T, r,
               st.itmax, st.worst, st.worst_out);
        TU_CHECK(st.itmax == 0 && st.worst < 1e-12 && st.worst_out < 1e-12,
                 "T %zu <= window %zu: x0 exact (CG steps %d, error %.3e, output %.3e)", T, r, st.itmax, st.worst,
                 st.worst_out);
        unrun(&re); drop(&p);
    }
    for (c = 0; c < 2; c++) {   // (b) gates ~0.5 (short memory), (c) gates 0.99 (long memory), T = 300
        size_t T = 300, N = T * H;
        prob p = make(1, T, H, K, V, 1, 0);
        result re;
        decode_stats sj, s8, s16;
        double tol = 1e-6;
        for (i = 0; i < N; i++) p.g[i] = c ? log(0.99) : log(0.4 + 0.2 * mn_rng_uniform(&rng));
        re = run(&p, &ex, 0, 0, 0);
        memset(&o, 0, sizeof o); o.cg_iters = 100; o.cg_tol = tol; o.jacobi = 1; o.warm = MN_MESA_WARM;
        sj = decode_start(&p, &o, 0, 0, re.xs, NULL);   // the Jacobi start, with the same stop against ||q||
        memset(&o, 0, sizeof o); o.cg_iters = 100; o.cg_tol = tol;
        s8 = decode_start(&p, &o, 1, 8, re.xs, NULL);
        s16 = decode_start(&p, &o, 1, 16, re.xs, NULL);
        printf("  Woodbury start, T = 300, gates %s, tol 1e-6: mean CG steps Jacobi %.2f, window 8 %.2f, 16 %.2f; "
               "worst ||x - x*|| %.1e\n", c ? "0.99" : "0.4-0.6", sj.mean, s8.mean, s16.mean,
               fmax(s8.worst, s16.worst));
        if (c == 0)
            TU_CHECK(s8.mean < sj.mean && s16.mean < sj.mean,
                     "gates ~0.5: the Woodbury start takes fewer CG steps than Jacobi (%.2f, %.2f vs %.2f)", s8.mean,
                     s16.mean, sj.mean);
        unrun(&re); drop(&p);
    }
}

// The model's decode with cfg.mesa_cg_warm: against the forward (chunkwise CG with 5 D steps: the exact solve to
// ~1e-14), a fixed count equal to it, a tolerance within a bound that shrinks with it; the first token after
// mn_state_reset is the Jacobi start's; the setting round-trips through mn_save / mn_load and is range-checked.
static double model_decode(mn_model* m, mn_state* s, const int* tok, size_t B, size_t T, const mn_real* ref,
                           mn_real* first) {
    size_t t, b, v, V = m->cfg.vocab_size;
    int st[4];
    mn_real logits[4 * 16];
    double e = 0;
    mn_state_reset(s);
    for (t = 0; t < T; t++) {
        for (b = 0; b < B; b++) st[b] = tok[b * T + t];
        mn_step(m, s, st, logits);
        if (t == 0 && first) memcpy(first, logits, B * V * sizeof(mn_real));
        for (b = 0; b < B; b++)
            for (v = 0; v < V; v++) e = fmax(e, fabs(logits[b * V + v] - ref[(b * T + t) * V + v]));
    }
    return e;
}
static void test_model_warm(void) {
    mn_config c; mn_model m, m2; mn_state s;
    size_t B = 2, T = 40, V = 16, i;
    int tok[80], w;
    mn_real *ref = (mn_real*)arr(B * T * V), first[7][2 * 16];
    double e_fixed, e_tol[3], tols[3] = { 1e-4, 1e-6, 1e-8 }, it_w[7];
    size_t bytes[7];
    memset(&c, 0, sizeof c);
    c.vocab_size = V; c.d_model = 32; c.n_layer = 2; c.n_head = 2; c.max_seq_len = 64; c.pattern = "mesa";
    c.init_std = 0.3; c.seed = 11; c.mesa_cg_train = 80; c.mesa_cg_decode = 60;
    TU_CHECK(mn_model_init(&m, &c) == MN_OK, "mesa model");
    for (i = 0; i < B * T; i++) tok[i] = (int)(mn_rng_u32(&rng) % V);
    mn_forward(&m, tok, NULL, B, T, NULL);
    memcpy(ref, mn_logits(&m), B * T * V * sizeof(mn_real));
    for (w = 0; w <= 6; w++) {
        double sv;
        m.cfg.mesa_cg_warm = w;
        mn_state_init(&s, &m, B);   // its size follows the start (5 and 6 keep the Woodbury window)
        bytes[w] = s.bytes;
        m.cfg.mesa_cg_tol = 0;                                          // 60 steps at most: the exact solve
        e_fixed = model_decode(&m, &s, tok, B, T, ref, NULL);
        for (i = 0; i < 3; i++) { m.cfg.mesa_cg_tol = tols[i]; e_tol[i] = model_decode(&m, &s, tok, B, T, ref, NULL); }
        it_w[w] = mn_state_cg_stats(&m, &s, &sv);                      // at tol 1e-8
        m.cfg.mesa_cg_tol = 1e-4;
        model_decode(&m, &s, tok, B, T, ref, first[w]);
        printf("  model decode, mesa_cg_warm %d: vs forward: fixed %.1e, tol 1e-4 %.1e, 1e-6 %.1e, 1e-8 %.1e "
               "(%.2f CG steps at 1e-8)\n", w, e_fixed, e_tol[0], e_tol[1], e_tol[2], it_w[w]);
        // each solve is within tol ||q|| / min lambda = 4 tol of the exact one; through the rest of this small
        // network that moves the logits by up to ~50 times that (measured): 250 tol is the bound checked
        TU_CHECK(e_fixed < 1e-11, "warm %d: fixed count vs forward %.3e", w, e_fixed);
        for (i = 0; i < 3; i++)
            TU_CHECK(e_tol[i] < 250 * tols[i], "warm %d: tol %g vs forward %.3e", w, tols[i], e_tol[i]);
        if (w >= 2 && w <= 4)   // after mn_state_reset the first token starts at the Jacobi guess: cfg 1's logits
            TU_CHECK(!memcmp(first[w], first[1], B * V * sizeof(mn_real)), "warm %d: first token == Jacobi start's", w);
        if (w >= 5) {   // the window lives in the state: reset clears it, so a second decode repeats every logit
            mn_real* all = (mn_real*)arr(2 * B * T * V);
            size_t t, b, r;
            int st[4];
            for (r = 0; r < 2; r++) {
                mn_state_reset(&s);
                for (t = 0; t < T; t++) {
                    for (b = 0; b < B; b++) st[b] = tok[b * T + t];
                    mn_step(&m, &s, st, all + (r * T + t) * B * V);
                }
            }
            TU_CHECK(!memcmp(all, all + B * T * V, B * T * V * sizeof(mn_real)),
                     "warm %d: the decode after mn_state_reset repeats every logit (the window cleared)", w);
            TU_CHECK(bytes[w] > bytes[0], "warm %d: the state holds the window (%zu bytes, %zu without)", w, bytes[w],
                     bytes[0]);
            free(all);
        }
        if (w < 6) mn_state_free(&s);
    }
    {   // a state made under one start and stepped under another of another size is refused, not overrun
        int st[2] = { 1, 2 };
        mn_real lg[2 * 16];
        m.cfg.mesa_cg_warm = 1;
        TU_CHECK(mn_step(&m, &s, st, lg) == MN_ERR_STATE, "a warm-6 state stepped under warm 1: refused");
        m.cfg.mesa_cg_warm = 5;
        TU_CHECK(mn_step(&m, &s, st, lg) == MN_ERR_STATE, "a warm-6 state stepped under warm 5: refused");
        m.cfg.mesa_cg_warm = 6;
        TU_CHECK(mn_step(&m, &s, st, lg) == MN_OK, "a warm-6 state stepped under warm 6: accepted");
        mn_state_free(&s);
        m.cfg.mesa_cg_warm = 4;     // the state of the check below
        mn_state_init(&s, &m, B);
    }
    // the same decode twice (mn_state_reset between) gives the same logits: nothing survives the reset
    {
        mn_real again[2 * 16];
        m.cfg.mesa_cg_warm = 4; m.cfg.mesa_cg_tol = 1e-4;
        model_decode(&m, &s, tok, B, T, ref, again);
        TU_CHECK(!memcmp(again, first[4], sizeof again), "warm decode after mn_state_reset repeats itself");
    }
    mn_state_free(&s);
    // save / load: the config.json key, and a value out of range refused
    m.cfg.mesa_cg_warm = 3;
    memset(&m2, 0, sizeof m2);
    mkdir("build", 0755); mkdir("build/test_mesa_warm", 0755);
    TU_CHECK(mn_save(&m, "build/test_mesa_warm", NULL) == MN_OK, "save with mesa_cg_warm 3");
    TU_CHECK(mn_load(&m2, "build/test_mesa_warm", NULL) == MN_OK && m2.cfg.mesa_cg_warm == 3,
             "mesa_cg_warm round trip");
    if (m2.params) mn_model_free(&m2);
    {
        const char* js = "{\"mesanet_version\": \"0.1\", \"mesanet_pattern\": \"mesa\", \"mesanet_cg_warm\": 2}";
        mn_config pc, rc; char pat[16];
        TU_CHECK(mn_config_parse_json(&pc, js, strlen(js), pat, sizeof pat) == MN_OK && pc.mesa_cg_warm == 2,
                 "config.json key mesanet_cg_warm read");
        pc.mesa_cg_warm = 6;
        TU_CHECK(mn_config_resolve(&rc, &pc) == MN_OK, "mesa_cg_warm 6 accepted");
        pc.mesa_cg_warm = 7;
        TU_CHECK(mn_config_resolve(&rc, &pc) == MN_ERR_CONFIG, "mesa_cg_warm 7 refused");
        pc.mesa_cg_warm = -1;
        TU_CHECK(mn_config_resolve(&rc, &pc) == MN_ERR_CONFIG, "mesa_cg_warm -1 refused");
    }
    mn_model_free(&m); free(ref);
}

int main(void) {
    mn_rng_seed(&rng, 2024);
    test_exact_vs_oracle();
    test_backward_vs_fd();
    test_chunk_vs_exact();
    test_step_and_dynamic_stopping();
    test_warm_start();
    test_woodbury_start();
    test_model_warm();
    return tu_finish("test_mesa");
}
