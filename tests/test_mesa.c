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
    for (r = 0; r < rows; r++) { double s = 0; for (d = 0; d < D; d++) s += x[r * D + d] * x[r * D + d]; s = 1 / sqrt(s + 1e-6); for (d = 0; d < D; d++) x[r * D + d] *= s; }
}
// Inputs as the layer produces them: L2-normalised q,k; g = logsigmoid(N(2,2^2)) clamped
// (mostly near 0, some strong forgetting); beta = sigmoid(N(0,1)); lambda in (0.25, 1).
static prob make(size_t B, size_t T, size_t H, size_t K, size_t V, int forget, int states) {
    prob p; size_t i, N = B * T * H;
    p.B = B; p.T = T; p.H = H; p.K = K; p.V = V;
    p.q = arr(N * K); p.k = arr(N * K); p.v = arr(N * V); p.g = arr(N); p.beta = arr(N); p.lamb = arr(H * K);
    p.hkk0 = arr(B * H * K * K); p.hkv0 = arr(B * H * K * V); p.dout = arr(N * V); p.dhkk = arr(B * H * K * K); p.dhkv = arr(B * H * K * V);
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
    free(p->q); free(p->k); free(p->v); free(p->g); free(p->beta); free(p->lamb); free(p->hkk0); free(p->hkv0); free(p->dout); free(p->dhkk); free(p->dhkv);
}

typedef struct { double *out, *xs, *hkk, *hkv, *dq, *dk, *dv, *dg, *db, *dl, *dhkk0, *dhkv0; int* iters; } result;
static result run(const prob* p, const mn_mesa_opts* o, int chunk, int with_states, int backward) {
    result r; size_t B = p->B, T = p->T, H = p->H, K = p->K, V = p->V, N = B * T * H;
    mn_real* w = arr(chunk ? mn_mesa_work_size(B, T, H, K, V, o) : mn_mesa_work_size_recurrent(B, T, H, K, V, o));
    r.out = arr(N * V); r.xs = arr(N * K); r.hkk = arr(B * H * K * K); r.hkv = arr(B * H * K * V); r.iters = (int*)calloc(N, sizeof(int));
    if (with_states) { memcpy(r.hkk, p->hkk0, B * H * K * K * sizeof(double)); memcpy(r.hkv, p->hkv0, B * H * K * V * sizeof(double)); }
    if (chunk) mn_mesa_forward(r.out, r.xs, r.iters, r.hkk, r.hkv, p->q, p->k, p->v, p->g, p->beta, p->lamb, B, T, H, K, V, o, w);
    else mn_mesa_forward_recurrent(r.out, r.xs, r.iters, r.hkk, r.hkv, p->q, p->k, p->v, p->g, p->beta, p->lamb, B, T, H, K, V, o, w);
    r.dq = arr(N * K); r.dk = arr(N * K); r.dv = arr(N * V); r.dg = arr(N); r.db = arr(N); r.dl = arr(H * K); r.dhkk0 = arr(B * H * K * K); r.dhkv0 = arr(B * H * K * V);
    if (backward) {
        const double *h0k = with_states ? p->hkk0 : NULL, *h0v = with_states ? p->hkv0 : NULL, *uk = with_states ? p->dhkk : NULL, *uv = with_states ? p->dhkv : NULL;
        if (chunk) mn_mesa_backward(r.dq, r.dk, r.dv, r.dg, r.db, r.dl, r.dhkk0, r.dhkv0, p->dout, uk, uv, r.xs, p->q, p->k, p->v, p->g, p->beta, p->lamb, h0k, h0v, B, T, H, K, V, o, w);
        else mn_mesa_backward_recurrent(r.dq, r.dk, r.dv, r.dg, r.db, r.dl, r.dhkk0, r.dhkv0, p->dout, uk, uv, r.xs, p->q, p->k, p->v, p->g, p->beta, p->lamb, h0k, h0v, B, T, H, K, V, o, w);
    }
    free(w);
    return r;
}
static void unrun(result* r) {
    free(r->out); free(r->xs); free(r->hkk); free(r->hkv); free(r->iters); free(r->dq); free(r->dk); free(r->dv); free(r->dg); free(r->db); free(r->dl); free(r->dhkk0); free(r->dhkv0);
}
static mn_mesa_opts exact_opts(void) { mn_mesa_opts o; memset(&o, 0, sizeof o); o.solver = MN_MESA_EXACT; return o; }

static void test_exact_vs_oracle(void) {
    size_t cases[4][4] = { { 300, 16, 16, 1 }, { 300, 16, 8, 1 }, { 200, 16, 16, 0 }, { 64, 8, 12, 1 } };   // T, K, V, forget
    size_t c;
    for (c = 0; c < 4; c++) {
        size_t T = cases[c][0], K = cases[c][1], V = cases[c][2];
        prob p = make(1, T, 2, K, V, (int)cases[c][3], 0);
        mn_mesa_opts o = exact_opts();
        result r = run(&p, &o, 0, 0, 0);
        double* ol = arr(T * 2 * V); double* oe = arr(T * 2 * V);
        TU_CHECK(mo_mesa_lstsq(1, (int)T, 2, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, ol) == 0, "lstsq ran");
        TU_CHECK(mo_mesa_exact(1, (int)T, 2, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, NULL, NULL, oe, NULL, NULL, NULL) == 0, "oracle ran");
        double e1 = tu_relerr(r.out, ol, T * 2 * V), e2 = tu_relerr(r.out, oe, T * 2 * V);
        printf("  exact T=%zu K=%zu V=%zu forget=%zu: vs direct least squares %.1e, vs oracle recurrence %.1e\n", T, K, V, cases[c][3], e1, e2);
        TU_CHECK(e1 < 1e-10 && e2 < 1e-12, "exact form vs least squares %.3e / oracle %.3e", e1, e2);
        free(ol); free(oe); unrun(&r); drop(&p);
    }
}

static void test_backward_vs_fd(void) {
    prob p = make(2, 11, 2, 5, 3, 1, 1);
    size_t B = 2, T = 11, H = 2, K = 5, V = 3, N = B * T * H;
    mn_mesa_opts o = exact_opts();
    result r = run(&p, &o, 0, 1, 1);
    double *fq = arr(N * K), *fk = arr(N * K), *fv = arr(N * V), *fg = arr(N), *fb = arr(N), *fl = arr(H * K), *fhk = arr(B * H * K * K), *fhv = arr(B * H * K * V);
    mo_mesa_grad_fd((int)B, (int)T, (int)H, (int)K, (int)V, p.q, p.k, p.v, p.g, p.beta, p.lamb, p.hkk0, p.hkv0, p.dout, p.dhkk, p.dhkv, 1e-4, fq, fk, fv, fg, fb, fl, fhk, fhv);
    double e[8] = { tu_relerr(r.dq, fq, N * K), tu_relerr(r.dk, fk, N * K), tu_relerr(r.dv, fv, N * V), tu_relerr(r.dg, fg, N),
                    tu_relerr(r.db, fb, N), tu_relerr(r.dl, fl, H * K), tu_relerr(r.dhkk0, fhk, B * H * K * K), tu_relerr(r.dhkv0, fhv, B * H * K * V) };
    const char* nm[8] = { "dq", "dk", "dv", "dg", "dbeta", "dlambda", "dhkk0", "dhkv0" };
    int i;
    printf("  recurrent backward vs finite differences (initial states, final-state gradients, V != K):");
    for (i = 0; i < 8; i++) { printf(" %s %.1e", nm[i], e[i]); TU_CHECK(e[i] < 1e-7, "recurrent %s vs fd %.3e", nm[i], e[i]); }
    printf("\n");
    // the chunkwise backward on the same problem (CG without epsilons, enough steps)
    size_t cs[4] = { 1, 3, 4, 64 }, c;
    for (c = 0; c < 4; c++) {
        mn_mesa_opts oc; memset(&oc, 0, sizeof oc); oc.cg_iters = 40; oc.chunk = cs[c];
        result rc = run(&p, &oc, 1, 1, 1);
        double f[10] = { tu_relerr(rc.out, r.out, N * V), tu_relerr(rc.hkk, r.hkk, B * H * K * K), tu_relerr(rc.dq, fq, N * K), tu_relerr(rc.dk, fk, N * K), tu_relerr(rc.dv, fv, N * V),
                         tu_relerr(rc.dg, fg, N), tu_relerr(rc.db, fb, N), tu_relerr(rc.dl, fl, H * K), tu_relerr(rc.dhkk0, fhk, B * H * K * K), tu_relerr(rc.dhkv0, fhv, B * H * K * V) };
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
        double e = fmax(fmax(tu_relerr(rc.out, r.out, N * V), tu_relerr(rc.hkv, r.hkv, B * H * K * V)), tu_relerr(rc.hkk, r.hkk, B * H * K * K));
        double eg = fmax(fmax(fmax(tu_relerr(rc.dq, r.dq, N * K), tu_relerr(rc.dk, r.dk, N * K)), fmax(tu_relerr(rc.dv, r.dv, N * V), tu_relerr(rc.dg, r.dg, N))),
                         fmax(fmax(tu_relerr(rc.db, r.db, N), tu_relerr(rc.dl, r.dl, H * K)), fmax(tu_relerr(rc.dhkk0, r.dhkk0, B * H * K * K), tu_relerr(rc.dhkv0, r.dhkv0, B * H * K * V))));
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
    double* hkk = arr(H * K * K); double* hkv = arr(H * K * V); double* out = arr(H * V); double* w = arr(mn_mesa_work_size_recurrent(1, 1, H, K, V, &o));
    double e = 0; int it[8], total = 0, mn = 1000, mx = 0;
    for (t = 0; t < T; t++) {
        mn_mesa_step(out, it, hkk, hkv, p.q + t * H * K, p.k + t * H * K, p.v + t * H * V, p.g + t * H, p.beta + t * H, p.lamb, H, K, V, &o, w);
        for (i = 0; i < H * V; i++) e = fmax(e, fabs(out[i] - r.out[t * H * V + i]));
        for (h = 0; h < H; h++) { TU_CHECK(it[h] == r.iters[t * H + h], "step iterations == forward's"); total += it[h]; mn = it[h] < mn ? it[h] : mn; mx = it[h] > mx ? it[h] : mx; }
    }
    TU_CHECK(e == 0, "step == recurrent forward token by token (%.3e)", e);
    double ed = tu_relerr(r.out, re.out, T * H * V);
    printf("  dynamic stopping eps=1e-4: %.1f CG steps per token-head on average (min %d, max %d); output vs exact %.1e\n", (double)total / (T * H), mn, mx, ed);
    TU_CHECK(mx < 30 && mn >= 1 && ed < 1e-3, "dynamic stopping: steps %d..%d, error %.3e", mn, mx, ed);
    free(hkk); free(hkv); free(out); free(w); unrun(&r); unrun(&re); drop(&p);
}

int main(void) {
    mn_rng_seed(&rng, 2024);
    test_exact_vs_oracle();
    test_backward_vs_fd();
    test_chunk_vs_exact();
    test_step_and_dynamic_stopping();
    return tu_finish("test_mesa");
}
