// Checks of reference/mesa_oracle.h, the independent float64 Mesa oracle:
//   (a) mo_mesa_exact   vs mesa_exact.vec and mesa_exact_T256.vec (out.o, out.h_kk, out.h_kv) at 1e-10
//   (b) mo_mesa_lstsq   vs mo_mesa_exact, T = 300, with and without forgetting, V = K and V = 8, ~1e-10
//   (c) mo_mesa_grad_fd vs mesa_exact.vec's grad.* (relative error < 1e-7), and vs an analytic
//       backward (implicit differentiation through the solve, written in this file) on a small case with initial
//       states and final-state upstream grads
//   (d) mo_mesa_cg_fla  vs mesa_cg_it{1,3,10,30}.vec (x0 = 0) and mesa_decode.vec (Jacobi start) at 1e-10
// plus consistency checks (initial states, eps = 0 CG vs exact) and bad-input return codes.
// Error metric everywhere: max|a-b| / max|b| with b the reference (tests/testutil.h).
//
// Build:  cc -std=c99 -O2 -Wall -Wextra -Werror -I. tests/test_mesa_oracle.c -lm
// Run from the repository root (vectors in reference/vectors), or pass the vector directory as argv[1].
#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"
#include "reference/mesa_oracle.h"
#include "testutil.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char* vecdir = "reference/vectors";

// ---- deterministic random numbers (splitmix64 + Box-Muller)
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double urand(void) {  // (0, 1)
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }
static double logsigmoid(double u) { return u >= 0 ? -log1p(exp(-u)) : u - log1p(exp(u)); }
static double sigmoid(double u) { return 1.0 / (1.0 + exp(-u)); }

static double* dalloc(size_t n) {
    double* p = (double*)calloc(n ? n : 1, sizeof(double));
    if (!p) { printf("out of memory\n"); exit(2); }
    return p;
}

// Random Mesa inputs as the vectors README 2 describes them: q, k L2-normalised normals, v normal,
// g = logsigmoid(u), u ~ N(2, 2^2) clamped to [-4.9, 12] (or g = 0), beta = sigmoid(N(0,1)),
// lambda ~ U(0.25, 1).
typedef struct { int B, T, H, K, V; double *q, *k, *v, *g, *beta, *lamb; } inputs;
static void rand_unit_rows(double* x, size_t rows, int D) {
    size_t r; int i;
    for (r = 0; r < rows; r++) {
        double n = 0;
        for (i = 0; i < D; i++) { x[r * D + i] = nrand(); n += x[r * D + i] * x[r * D + i]; }
        n = sqrt(n);
        for (i = 0; i < D; i++) x[r * D + i] /= n;
    }
}
static inputs make_inputs(int B, int T, int H, int K, int V, int forget) {
    inputs in;
    size_t N = (size_t)B * T * H, i;
    in.B = B; in.T = T; in.H = H; in.K = K; in.V = V;
    in.q = dalloc(N * K); in.k = dalloc(N * K); in.v = dalloc(N * V);
    in.g = dalloc(N); in.beta = dalloc(N); in.lamb = dalloc((size_t)H * K);
    rand_unit_rows(in.q, N, K);
    rand_unit_rows(in.k, N, K);
    for (i = 0; i < N * V; i++) in.v[i] = nrand();
    for (i = 0; i < N; i++) {
        double u = 2.0 + 2.0 * nrand();
        if (u < -4.9) u = -4.9;
        if (u > 12.0) u = 12.0;
        in.g[i] = forget ? logsigmoid(u) : 0.0;
        in.beta[i] = sigmoid(nrand());
    }
    for (i = 0; i < (size_t)H * K; i++) in.lamb[i] = 0.25 + 0.75 * urand();
    return in;
}
static void free_inputs(inputs* in) {
    free(in->q); free(in->k); free(in->v); free(in->g); free(in->beta); free(in->lamb);
}

// ---- vector files
typedef struct {
    mn_vec_file f;
    int ok, B, T, H, K, V;
    const double *q, *k, *v, *g, *beta, *lamb;
} vecin;

static const mn_vec_tensor* need(const mn_vec_file* f, const char* file, const char* name) {
    const mn_vec_tensor* t = mn_vec_get(f, name);
    TU_CHECK(t != NULL, "%s: tensor %s missing", file, name);
    return t;
}

static int load_vec(vecin* vi, const char* file) {
    char path[1024], err[256];
    const mn_vec_tensor *tq, *tk, *tv, *tg, *tb, *tl;
    int rc;
    memset(vi, 0, sizeof(*vi));
    snprintf(path, sizeof(path), "%s/%s", vecdir, file);
    rc = mn_vec_load(&vi->f, path, err, sizeof(err));
    TU_CHECK(rc == 0, "load %s: %s", path, err);
    if (rc) return 0;
    tq = need(&vi->f, file, "q"); tk = need(&vi->f, file, "k"); tv = need(&vi->f, file, "v");
    tg = need(&vi->f, file, "g"); tb = need(&vi->f, file, "beta"); tl = need(&vi->f, file, "lamb");
    if (!tq || !tk || !tv || !tg || !tb || !tl) return 0;
    TU_CHECK(tq->ndim == 4 && tv->ndim == 4 && tg->ndim == 3 && tl->ndim == 2, "%s: unexpected ranks", file);
    if (tq->ndim != 4 || tv->ndim != 4) return 0;
    vi->B = (int)tq->dims[0]; vi->T = (int)tq->dims[1]; vi->H = (int)tq->dims[2];
    vi->K = (int)tq->dims[3]; vi->V = (int)tv->dims[3];
    TU_CHECK(tk->n == tq->n && tv->n == (size_t)vi->B * vi->T * vi->H * vi->V &&
             tg->n == (size_t)vi->B * vi->T * vi->H && tb->n == tg->n && tl->n == (size_t)vi->H * vi->K,
             "%s: inconsistent shapes", file);
    vi->q = tq->data; vi->k = tk->data; vi->v = tv->data; vi->g = tg->data; vi->beta = tb->data;
    vi->lamb = tl->data;
    vi->ok = 1;
    return 1;
}

// compare a computed tensor with the file's tensor `name`
static void cmp(const char* what, const char* file, const mn_vec_file* f, const char* name,
                const double* a, size_t n, double tol) {
    const mn_vec_tensor* t = need(f, file, name);
    double e;
    if (!t) return;
    TU_CHECK(t->n == n, "%s %s: %s has %lu values, computed %lu", what, file, name, (unsigned long)t->n,
             (unsigned long)n);
    if (t->n != n) return;
    e = tu_relerr(a, t->data, n);
    TU_CHECK(e < tol, "%s %s %s: rel err %.3e >= %.1e", what, file, name, e, tol);
    printf("  %-8s %-22s %-11s rel err %.2e  (tol %.0e)\n", what, file, name, e, tol);
}

// ---- (a) exact vs mesa_exact*.vec
static void test_exact_vec(const char* file) {
    vecin vi;
    double *o, *hkk, *hkv;
    int rc;
    if (!load_vec(&vi, file)) { mn_vec_free(&vi.f); return; }
    o = dalloc((size_t)vi.B * vi.T * vi.H * vi.V);
    hkk = dalloc((size_t)vi.B * vi.H * vi.K * vi.K);
    hkv = dalloc((size_t)vi.B * vi.H * vi.K * vi.V);
    rc = mo_mesa_exact(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL,
                       o, NULL, hkk, hkv);
    TU_CHECK(rc == 0, "mo_mesa_exact %s rc %d", file, rc);
    if (rc == 0) {
        cmp("exact", file, &vi.f, "out.o", o, (size_t)vi.B * vi.T * vi.H * vi.V, 1e-10);
        cmp("exact", file, &vi.f, "out.h_kk", hkk, (size_t)vi.B * vi.H * vi.K * vi.K, 1e-10);
        cmp("exact", file, &vi.f, "out.h_kv", hkv, (size_t)vi.B * vi.H * vi.K * vi.V, 1e-10);
    }
    free(o); free(hkk); free(hkv);
    mn_vec_free(&vi.f);
}

// ---- (d) CG vs mesa_cg_it*.vec / mesa_decode.vec
static void test_cg_vec(const char* file, int x0_mode) {
    vecin vi;
    double *o, *hkk, *hkv;
    int rc, iters;
    char what[32];
    if (!load_vec(&vi, file)) { mn_vec_free(&vi.f); return; }
    iters = (int)mn_vec_attr_f(&vi.f, "cg_iters", -1);
    TU_CHECK(iters >= 0, "%s: attr cg_iters missing", file);
    if (iters < 0) { mn_vec_free(&vi.f); return; }
    o = dalloc((size_t)vi.B * vi.T * vi.H * vi.V);
    hkk = dalloc((size_t)vi.B * vi.H * vi.K * vi.K);
    hkv = dalloc((size_t)vi.B * vi.H * vi.K * vi.V);
    rc = mo_mesa_cg_fla(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL,
                        iters, x0_mode, MO_FLA_CG_EPS, o, NULL, hkk, hkv);
    TU_CHECK(rc == 0, "mo_mesa_cg_fla %s rc %d", file, rc);
    snprintf(what, sizeof(what), "cg%d", iters);
    if (rc == 0) {
        cmp(what, file, &vi.f, "out.o", o, (size_t)vi.B * vi.T * vi.H * vi.V, 1e-10);
        cmp(what, file, &vi.f, "out.h_kk", hkk, (size_t)vi.B * vi.H * vi.K * vi.K, 1e-10);
        cmp(what, file, &vi.f, "out.h_kv", hkv, (size_t)vi.B * vi.H * vi.K * vi.V, 1e-10);
    }
    free(o); free(hkk); free(hkv);
    mn_vec_free(&vi.f);
}

// ---- (c) FD gradients vs mesa_exact.vec grad.*
static void test_fd_vec(const char* file) {
    vecin vi;
    const mn_vec_tensor* tdo;
    double *dq, *dk, *dv, *dg, *db, *dl;
    size_t N;
    int rc;
    if (!load_vec(&vi, file)) { mn_vec_free(&vi.f); return; }
    tdo = need(&vi.f, file, "do");
    if (!tdo) { mn_vec_free(&vi.f); return; }
    N = (size_t)vi.B * vi.T * vi.H;
    dq = dalloc(N * vi.K); dk = dalloc(N * vi.K); dv = dalloc(N * vi.V);
    dg = dalloc(N); db = dalloc(N); dl = dalloc((size_t)vi.H * vi.K);
    rc = mo_mesa_grad_fd(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL,
                         tdo->data, NULL, NULL, 1e-5, dq, dk, dv, dg, db, dl, NULL, NULL);
    TU_CHECK(rc == 0, "mo_mesa_grad_fd %s rc %d", file, rc);
    if (rc == 0) {
        cmp("fd", file, &vi.f, "grad.q", dq, N * vi.K, 1e-7);
        cmp("fd", file, &vi.f, "grad.k", dk, N * vi.K, 1e-7);
        cmp("fd", file, &vi.f, "grad.v", dv, N * vi.V, 1e-7);
        cmp("fd", file, &vi.f, "grad.g", dg, N, 1e-7);
        cmp("fd", file, &vi.f, "grad.beta", db, N, 1e-7);
        cmp("fd", file, &vi.f, "grad.lamb", dl, (size_t)vi.H * vi.K, 1e-7);
    }
    free(dq); free(dk); free(dv); free(dg); free(db); free(dl);
    mn_vec_free(&vi.f);
}

// ---- (b) lstsq vs exact
static void test_lstsq(int T, int K, int V, int forget, int g_null) {
    inputs in = make_inputs(1, T, 2, K, V, forget);
    size_t n = (size_t)T * 2 * V;
    double *o1 = dalloc(n), *o2 = dalloc(n), e;
    const double* g = g_null ? NULL : in.g;
    int rc1 = mo_mesa_exact(1, T, 2, K, V, in.q, in.k, in.v, g, in.beta, in.lamb, NULL, NULL, o1, NULL, NULL, NULL);
    int rc2 = mo_mesa_lstsq(1, T, 2, K, V, in.q, in.k, in.v, g, in.beta, in.lamb, o2);
    TU_CHECK(rc1 == 0 && rc2 == 0, "lstsq T=%d K=%d V=%d: rc %d %d", T, K, V, rc1, rc2);
    e = tu_relerr(o2, o1, n);
    TU_CHECK(e < 1e-10, "lstsq vs exact T=%d K=%d V=%d forget=%d: rel err %.3e", T, K, V, forget, e);
    printf("  lstsq vs exact  B=1 T=%d H=2 K=%d V=%-2d %-16s o rel err %.2e  (tol 1e-10)\n", T, K, V,
           forget ? "g~logsigmoid" : (g_null ? "g=NULL" : "g=0"), e);
    free(o1); free(o2); free_inputs(&in);
}

// ---- consistency: initial states (run [0,T1) then [T1,T) from the final states == one run)
static void test_initial_states(void) {
    int B = 2, T = 40, T1 = 17, H = 2, K = 8, V = 5, b, h, t;
    inputs in = make_inputs(B, T, H, K, V, 1);
    size_t N = (size_t)B * T * H, SK = (size_t)B * H * K * K, SV = (size_t)B * H * K * V;
    double *o = dalloc(N * V), *x = dalloc(N * K), *hkk = dalloc(SK), *hkv = dalloc(SV);
    double *o2 = dalloc(N * V), *hkk1 = dalloc(SK), *hkv1 = dalloc(SV), *hkk2 = dalloc(SK), *hkv2 = dalloc(SV);
    double *oc = dalloc(N * V), *hkkc = dalloc(SK), *hkvc = dalloc(SV);
    double e1, e2, e3, e4, e5 = 0;
    int rc = mo_mesa_exact(B, T, H, K, V, in.q, in.k, in.v, in.g, in.beta, in.lamb, NULL, NULL, o, x, hkk, hkv);
    TU_CHECK(rc == 0, "exact rc %d", rc);
    // split inputs [B,T,H,*] into the first T1 and the remaining T-T1 tokens
    {
        int Ts[2] = {T1, T - T1}, s;
        for (s = 0; s < 2; s++) {
            int t0 = s ? T1 : 0, Tn = Ts[s];
            size_t Nn = (size_t)B * Tn * H;
            double *qs = dalloc(Nn * K), *ks = dalloc(Nn * K), *vs = dalloc(Nn * V), *gs = dalloc(Nn), *bs = dalloc(Nn);
            double *os = dalloc(Nn * V);
            for (b = 0; b < B; b++)
                for (t = 0; t < Tn; t++)
                    for (h = 0; h < H; h++) {
                        size_t src = ((size_t)b * T + t0 + t) * H + h, dst = ((size_t)b * Tn + t) * H + h;
                        memcpy(qs + dst * K, in.q + src * K, K * sizeof(double));
                        memcpy(ks + dst * K, in.k + src * K, K * sizeof(double));
                        memcpy(vs + dst * V, in.v + src * V, V * sizeof(double));
                        gs[dst] = in.g[src];
                        bs[dst] = in.beta[src];
                    }
            rc = mo_mesa_exact(B, Tn, H, K, V, qs, ks, vs, gs, bs, in.lamb, s ? hkk1 : NULL, s ? hkv1 : NULL, os,
                               NULL, s ? hkk2 : hkk1, s ? hkv2 : hkv1);
            TU_CHECK(rc == 0, "exact split %d rc %d", s, rc);
            // the CG path must treat the initial states identically (compare its states)
            if (s) {
                rc = mo_mesa_cg_fla(B, Tn, H, K, V, qs, ks, vs, gs, bs, in.lamb, hkk1, hkv1, 0, MO_CG_X0_ZERO,
                                    MO_FLA_CG_EPS, NULL, NULL, hkkc, hkvc);
                TU_CHECK(rc == 0, "cg split rc %d", rc);
                rc = mo_mesa_cg_fla(B, Tn, H, K, V, qs, ks, vs, gs, bs, in.lamb, hkk1, hkv1, 4 * K,
                                    MO_CG_X0_ZERO, 0.0, oc, NULL, NULL, NULL);
                TU_CHECK(rc == 0, "cg split rc %d", rc);
            }
            for (b = 0; b < B; b++)
                for (t = 0; t < Tn; t++)
                    for (h = 0; h < H; h++) {
                        size_t src = ((size_t)b * Tn + t) * H + h, dst = ((size_t)b * T + t0 + t) * H + h;
                        memcpy(o2 + dst * V, os + src * V, V * sizeof(double));
                    }
            if (s) {  // textbook CG (eps = 0, 4K steps) from the same initial states vs the exact solve
                e5 = tu_relerr(oc, os, Nn * V);
                TU_CHECK(e5 < 1e-12, "cg eps=0 with initial states vs exact: rel err %.3e", e5);
                printf("  init-state: cg(eps=0, %d it) vs exact, both from hkk0/hkv0  o rel err %.2e  (tol 1e-12)\n",
                       4 * K, e5);
            }
            free(qs); free(ks); free(vs); free(gs); free(bs); free(os);
        }
    }
    e1 = tu_relerr(o2, o, N * V);
    e2 = tu_relerr(hkk2, hkk, SK);
    e3 = tu_relerr(hkv2, hkv, SV);
    e4 = fmax(tu_relerr(hkkc, hkk, SK), tu_relerr(hkvc, hkv, SV));
    TU_CHECK(e1 < 1e-13 && e2 < 1e-13 && e3 < 1e-13, "split run vs one run: o %.3e h_kk %.3e h_kv %.3e", e1, e2, e3);
    TU_CHECK(e4 < 1e-13, "cg states from initial states vs exact: %.3e", e4);
    printf("  init-state: two runs chained by hkk0/hkv0 vs one run  o %.2e h_kk %.2e h_kv %.2e; cg states %.2e\n",
           e1, e2, e3, e4);
    // x output really solves (H_t + diag lambda) x = q: check o_t = S_t^T x_t via an own recurrence
    {
        double *Hs = dalloc((size_t)K * K), worst = 0, qmax = 0;
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++) {
                memset(Hs, 0, (size_t)K * K * sizeof(double));
                for (t = 0; t < T; t++) {
                    size_t row = ((size_t)b * T + t) * H + h;
                    int i, j;
                    for (i = 0; i < K; i++)
                        for (j = 0; j < K; j++)
                            Hs[i * K + j] = exp(in.g[row]) * Hs[i * K + j] +
                                            in.beta[row] * in.k[row * K + i] * in.k[row * K + j];
                    for (i = 0; i < K; i++) {
                        double s = in.lamb[h * K + i] * x[row * K + i];
                        for (j = 0; j < K; j++) s += Hs[i * K + j] * x[row * K + j];
                        worst = fmax(worst, fabs(s - in.q[row * K + i]));
                        qmax = fmax(qmax, fabs(in.q[row * K + i]));
                    }
                }
            }
        TU_CHECK(worst / qmax < 1e-13, "exact x residual %.3e", worst / qmax);
        printf("  exact: residual max|(H_t+diag lambda) x_t - q_t| / max|q| = %.2e\n", worst / qmax);
        free(Hs);
    }
    free(o); free(x); free(hkk); free(hkv); free(o2); free(hkk1); free(hkv1); free(hkk2); free(hkv2);
    free(oc); free(hkkc); free(hkvc);
    free_inputs(&in);
}

// ---- CG without epsilons and with enough iterations equals the exact solve (vectors README 3.2)
static void test_cg_noeps(const char* file) {
    vecin vi;
    double *o1, *o2, e;
    size_t n;
    if (!load_vec(&vi, file)) { mn_vec_free(&vi.f); return; }
    n = (size_t)vi.B * vi.T * vi.H * vi.V;
    o1 = dalloc(n); o2 = dalloc(n);
    TU_CHECK(mo_mesa_cg_fla(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL, 30,
                            MO_CG_X0_ZERO, 0.0, o1, NULL, NULL, NULL) == 0, "cg eps=0");
    TU_CHECK(mo_mesa_exact(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL, o2,
                           NULL, NULL, NULL) == 0, "exact");
    e = tu_relerr(o1, o2, n);
    TU_CHECK(e < 1e-12, "cg30 eps=0 vs exact %s: %.3e", file, e);
    printf("  cg30 with eps=0 vs exact on %-22s  o rel err %.2e  (tol 1e-12)\n", file, e);
    // and the fla epsilons give the documented ~6e-4 floor
    TU_CHECK(mo_mesa_cg_fla(vi.B, vi.T, vi.H, vi.K, vi.V, vi.q, vi.k, vi.v, vi.g, vi.beta, vi.lamb, NULL, NULL, 30,
                            MO_CG_X0_ZERO, MO_FLA_CG_EPS, o1, NULL, NULL, NULL) == 0, "cg");
    e = tu_relerr(o1, o2, n);
    TU_CHECK(e > 1e-4 && e < 2e-3, "cg30 eps=1e-5 vs exact %s: %.3e, expected ~6e-4", file, e);
    printf("  cg30 with eps=1e-5 vs exact on %-22s o rel err %.2e  (README: 6.0e-04 / 4.7e-04)\n", file, e);
    free(o1); free(o2);
    mn_vec_free(&vi.f);
}

// ---- (c') FD vs an analytic backward (implicit differentiation through the solve) incl. initial states and
// final-state upstream
static void test_fd_analytic(void) {
    int B = 2, T = 12, H = 2, K = 5, V = 3, b, h, t, i, j, rc;
    inputs in = make_inputs(B, T, H, K, V, 1);
    size_t N = (size_t)B * T * H, SK = (size_t)B * H * K * K, SV = (size_t)B * H * K * V;
    double *hkk0 = dalloc(SK), *hkv0 = dalloc(SV), *dout = dalloc(N * V), *dhkk = dalloc(SK), *dhkv = dalloc(SV);
    double *x = dalloc(N * K);
    // analytic
    double *aq = dalloc(N * K), *ak = dalloc(N * K), *av = dalloc(N * V), *ag = dalloc(N), *ab = dalloc(N),
           *al = dalloc((size_t)H * K), *aH0 = dalloc(SK), *aS0 = dalloc(SV);
    // finite differences
    double *fq = dalloc(N * K), *fk = dalloc(N * K), *fv = dalloc(N * V), *fg = dalloc(N), *fb = dalloc(N),
           *fl = dalloc((size_t)H * K), *fH0 = dalloc(SK), *fS0 = dalloc(SV);
    double *Hst = dalloc((size_t)(T + 1) * K * K), *Sst = dalloc((size_t)(T + 1) * K * V);
    double *dH = dalloc((size_t)K * K), *dS = dalloc((size_t)K * V), *A = dalloc((size_t)K * K), *xb = dalloc(K),
           *dqt = dalloc(K);
    double e[8], worst = 0;
    const char* names[8] = {"dq", "dk", "dv", "dg", "dbeta", "dlamb", "dhkk0", "dhkv0"};
    for (b = 0; b < B; b++)  // symmetric PSD initial H, random S
        for (h = 0; h < H; h++) {
            double* M = hkk0 + ((size_t)b * H + h) * K * K;
            double R[25];
            for (i = 0; i < K * K; i++) R[i] = 0.5 * nrand();
            for (i = 0; i < K; i++)
                for (j = 0; j < K; j++) {
                    int p; double s = 0;
                    for (p = 0; p < K; p++) s += R[i * K + p] * R[j * K + p];
                    M[i * K + j] = s;
                }
        }
    for (i = 0; i < (int)SV; i++) hkv0[i] = 0.5 * nrand();
    for (i = 0; i < (int)(N * V); i++) dout[i] = nrand();
    for (i = 0; i < (int)SK; i++) dhkk[i] = nrand();
    for (i = 0; i < (int)SV; i++) dhkv[i] = nrand();
    rc = mo_mesa_exact(B, T, H, K, V, in.q, in.k, in.v, in.g, in.beta, in.lamb, hkk0, hkv0, NULL, x, NULL, NULL);
    TU_CHECK(rc == 0, "exact rc %d", rc);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            size_t bh = (size_t)b * H + h;
            const double* lam = in.lamb + h * K;
            memcpy(Hst, hkk0 + bh * K * K, K * K * sizeof(double));  // Hst[t+1] = H_t, Hst[0] = H_{-1}
            memcpy(Sst, hkv0 + bh * K * V, K * V * sizeof(double));
            for (t = 0; t < T; t++) {
                size_t row = ((size_t)b * T + t) * H + h;
                double gam = exp(in.g[row]), be = in.beta[row];
                for (i = 0; i < K; i++) {
                    for (j = 0; j < K; j++)
                        Hst[(t + 1) * K * K + i * K + j] = gam * Hst[t * K * K + i * K + j] +
                                                           be * in.k[row * K + i] * in.k[row * K + j];
                    for (j = 0; j < V; j++)
                        Sst[(t + 1) * K * V + i * V + j] = gam * Sst[t * K * V + i * V + j] +
                                                           be * in.k[row * K + i] * in.v[row * V + j];
                }
            }
            memcpy(dH, dhkk + bh * K * K, K * K * sizeof(double));
            memcpy(dS, dhkv + bh * K * V, K * V * sizeof(double));
            for (t = T - 1; t >= 0; t--) {
                size_t row = ((size_t)b * T + t) * H + h;
                const double *kt = in.k + row * K, *vt = in.v + row * V, *xt = x + row * K, *dot = dout + row * V;
                const double *Ht = Hst + (t + 1) * K * K, *St = Sst + (t + 1) * K * V;
                double gam = exp(in.g[row]), be = in.beta[row], s, dgs = 0;
                for (i = 0; i < K; i++) {  // xbar = S_t do_t
                    s = 0;
                    for (j = 0; j < V; j++) s += St[i * V + j] * dot[j];
                    xb[i] = s;
                }
                for (i = 0; i < K * K; i++) A[i] = Ht[i];
                for (i = 0; i < K; i++) A[i * K + i] += lam[i];
                rc = mo__cholesky(K, A, A);
                TU_CHECK(rc == 0, "analytic cholesky");
                mo__chol_solve(K, A, xb, dqt);
                memcpy(aq + row * K, dqt, K * sizeof(double));
                for (i = 0; i < K; i++) al[h * K + i] -= dqt[i] * xt[i];
                for (i = 0; i < K; i++) {
                    for (j = 0; j < V; j++) dS[i * V + j] += xt[i] * dot[j];
                    for (j = 0; j < K; j++) dH[i * K + j] -= dqt[i] * xt[j];
                }
                for (j = 0; j < V; j++) {  // dv = beta dS^T k
                    s = 0;
                    for (i = 0; i < K; i++) s += dS[i * V + j] * kt[i];
                    av[row * V + j] = be * s;
                }
                s = 0;
                for (i = 0; i < K; i++) {  // dk = beta (dS v + (dH + dH^T) k); dbeta
                    double a = 0, c = 0;
                    for (j = 0; j < V; j++) a += dS[i * V + j] * vt[j];
                    for (j = 0; j < K; j++) c += (dH[i * K + j] + dH[j * K + i]) * kt[j];
                    ak[row * K + i] = be * (a + c);
                    s += kt[i] * a;
                    for (j = 0; j < K; j++) s += kt[i] * dH[i * K + j] * kt[j];
                }
                ab[row] = s;
                for (i = 0; i < K * V; i++) dgs += Sst[t * K * V + i] * dS[i];
                for (i = 0; i < K * K; i++) dgs += Hst[t * K * K + i] * dH[i];
                ag[row] = gam * dgs;
                for (i = 0; i < K * V; i++) dS[i] *= gam;
                for (i = 0; i < K * K; i++) dH[i] *= gam;
            }
            memcpy(aH0 + bh * K * K, dH, K * K * sizeof(double));
            memcpy(aS0 + bh * K * V, dS, K * V * sizeof(double));
        }
    rc = mo_mesa_grad_fd(B, T, H, K, V, in.q, in.k, in.v, in.g, in.beta, in.lamb, hkk0, hkv0, dout, dhkk, dhkv, 0,
                         fq, fk, fv, fg, fb, fl, fH0, fS0);
    TU_CHECK(rc == 0, "grad_fd rc %d", rc);
    e[0] = tu_relerr(fq, aq, N * K); e[1] = tu_relerr(fk, ak, N * K); e[2] = tu_relerr(fv, av, N * V);
    e[3] = tu_relerr(fg, ag, N); e[4] = tu_relerr(fb, ab, N); e[5] = tu_relerr(fl, al, (size_t)H * K);
    e[6] = tu_relerr(fH0, aH0, SK); e[7] = tu_relerr(fS0, aS0, SV);
    printf("  fd vs analytic backward (B=2 T=12 H=2 K=5 V=3, h0 != 0, dht != 0):");
    for (i = 0; i < 8; i++) {
        TU_CHECK(e[i] < 1e-7, "fd vs analytic %s: %.3e", names[i], e[i]);
        printf(" %s %.1e", names[i], e[i]);
        worst = fmax(worst, e[i]);
    }
    printf("\n");
    free(hkk0); free(hkv0); free(dout); free(dhkk); free(dhkv); free(x);
    free(aq); free(ak); free(av); free(ag); free(ab); free(al); free(aH0); free(aS0);
    free(fq); free(fk); free(fv); free(fg); free(fb); free(fl); free(fH0); free(fS0);
    free(Hst); free(Sst); free(dH); free(dS); free(A); free(xb); free(dqt);
    free_inputs(&in);
}

// ---- bad input
static void test_bad_input(void) {
    double q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 1, 0}, v[4] = {1, 2, 3, 4}, g[2] = {0, 0}, be[2] = {0.5, 0.5};
    double lam[2] = {0.5, 0.5}, neg[2] = {-1, -1}, zero[2] = {0, 0}, o[4], hkk[4];
    TU_CHECK(mo_mesa_exact(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, o, NULL, NULL, NULL) == 0, "ok call");
    TU_CHECK(mo_mesa_exact(1, 0, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, o, NULL, NULL, NULL) == MO_EARG, "T=0");
    TU_CHECK(mo_mesa_exact(1, 2, 1, -2, 2, q, k, v, g, be, lam, NULL, NULL, o, NULL, NULL, NULL) == MO_EARG, "K<0");
    TU_CHECK(mo_mesa_exact(1, 2, 1, 2, 2, NULL, k, v, g, be, lam, NULL, NULL, o, NULL, NULL, NULL) == MO_EARG,
             "q NULL");
    TU_CHECK(mo_mesa_exact(1, 2, 1, 2, 2, q, k, v, g, be, neg, NULL, NULL, o, NULL, NULL, NULL) == MO_ENOTPD, "not PD");
    TU_CHECK(mo_mesa_lstsq(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL) == MO_EARG, "lstsq o NULL");
    TU_CHECK(mo_mesa_lstsq(1, 1, 1, 2, 2, q, k, v, g, be, zero, o) == MO_ESINGULAR, "lstsq singular");
    TU_CHECK(mo_mesa_lstsq(1, 2, 1, 2, 2, q, k, v, NULL, be, lam, o) == 0, "lstsq g NULL");
    TU_CHECK(mo_mesa_grad_fd(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, NULL, NULL, NULL, 0, o, NULL, NULL, NULL,
                             NULL, NULL, NULL, NULL) == MO_EARG, "fd dout NULL");
    TU_CHECK(mo_mesa_grad_fd(1, 2, 1, 2, 2, q, k, v, g, be, neg, NULL, NULL, v, NULL, NULL, 0, o, NULL, NULL, NULL,
                             NULL, NULL, NULL, NULL) == MO_ENOTPD, "fd not PD");
    TU_CHECK(mo_mesa_cg_fla(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, -1, 0, 1e-5, o, NULL, hkk, NULL) == MO_EARG,
             "cg n_iter<0");
    TU_CHECK(mo_mesa_cg_fla(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, 3, 3, 1e-5, o, NULL, hkk, NULL) == MO_EARG,
             "cg mode");
    TU_CHECK(mo_mesa_cg_fla(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, 3, 0, -1, o, NULL, hkk, NULL) == MO_EARG,
             "cg eps<0");
    TU_CHECK(mo_mesa_cg_fla(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, 0, 0, 1e-5, o, NULL, hkk, NULL) == 0 &&
             o[0] == 0 && o[3] == 0 && hkk[0] == 1.0, "cg 0 iterations: x = 0, states updated");
    // eps = 0 with exact convergence (K=2: 2 steps) must not produce NaN in further iterations
    TU_CHECK(mo_mesa_cg_fla(1, 2, 1, 2, 2, q, k, v, g, be, lam, NULL, NULL, 50, 0, 0.0, o, NULL, NULL, NULL) == 0 &&
             o[0] == o[0] && o[1] == o[1] && o[2] == o[2] && o[3] == o[3], "cg eps=0 no NaN after convergence");
}

int main(int argc, char** argv) {
    if (argc > 1) vecdir = argv[1];
    printf("(a) exact vs golden vectors\n");
    test_exact_vec("mesa_exact.vec");
    test_exact_vec("mesa_exact_T256.vec");
    printf("(b) least squares (closed form) vs exact recurrence\n");
    test_lstsq(300, 16, 16, 0, 0);
    test_lstsq(300, 16, 16, 1, 0);
    test_lstsq(300, 16, 8, 0, 1);
    test_lstsq(300, 16, 8, 1, 0);
    test_lstsq(37, 5, 11, 1, 0);
    printf("(c) finite-difference gradients\n");
    test_fd_vec("mesa_exact.vec");
    test_fd_analytic();
    printf("(d) fla CG vs golden vectors\n");
    test_cg_vec("mesa_cg_it1.vec", MO_CG_X0_ZERO);
    test_cg_vec("mesa_cg_it3.vec", MO_CG_X0_ZERO);
    test_cg_vec("mesa_cg_it10.vec", MO_CG_X0_ZERO);
    test_cg_vec("mesa_cg_it30.vec", MO_CG_X0_ZERO);
    test_cg_vec("mesa_decode.vec", MO_CG_X0_JACOBI);
    printf("consistency\n");
    test_cg_noeps("mesa_exact.vec");
    test_cg_noeps("mesa_exact_T256.vec");
    test_initial_states();
    test_bad_input();
    return tu_finish("test_mesa_oracle");
}
