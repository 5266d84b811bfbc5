// Tests of mesanet.h >>ssd and >>rglru: the Mamba-2 SSD core and the RG-LRU, every form.
// SSD (mn_ssd_*; A as log-decays, and as transitions of any sign: the [-1,1] variant):
//   - finite differences for every gradient (dX, dA, dB, dC, dh0, with dht upstream) of the recurrent
//     form (both modes) and the chunkwise form at several chunk sizes, also with strong decays;
//   - chunkwise == recurrent, forward and every gradient, C = 1, 2, 3, 5, 16, 37, 64 at T = 37;
//   - step == forward token by token (both modes); splitting a sequence in two through ht -> h0
//     (forward and gradients); the backwards accumulate (+=); NULL h0 / dht / dA / dh0; T = 0;
//   - the golden vectors mamba2_ssd.vec: outputs and all gradients, recurrent and chunkwise, 1e-10.
// RG-LRU (mn_rglru_*):
//   - finite differences for every gradient (dx, da_param, dwx, dbx, dwa, dba, dh0) with no h0
//     (reset at t = 0), with h0 (continued), and with resets inside the sequences (segment_pos);
//   - SqrtBoundDerivative: where 1 - a^2 < 2.5e-7 the gradient is the clipped one (a scalar
//     re-derivation with the clip agrees, the exact derivative does not);
//   - resets: a 0 in segment_pos == a fresh sequence; splitting through ht -> h0; step == forward;
//     accumulation; NULL gradient buffers; T = 0;
//   - the golden vectors rglru.vec (segment_pos NULL and segment_pos = 0..T-1, and the step).
// Double: cc -std=c99 -O2 -Wall -Wextra -Werror -DMESANET_DOUBLE -I. -Itests tests/test_ssm.c -lm
// Float:  the same without -DMESANET_DOUBLE (looser bounds, no finite differences).
// Run from the repository root; argv[1] overrides the vector directory (reference/vectors).
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"
#include "testutil.h"
#include <stdlib.h>
#include <string.h>

#ifdef MESANET_DOUBLE
#define TOL_EQ 1e-12     // two forms of the op, same inputs
#define TOL_VEC 1e-10    // vectors README: suggested tolerance for a float64 implementation
#define TOL_ACC 1e-14    // (1 + dx) - 1 vs dx
#define TOL_FD 1e-7      // finite differences, h = 1e-6
#else
#define TOL_EQ 5e-6      // float: chunk vs recurrent
#define TOL_VEC 5e-6     // float inputs and arithmetic vs the float64 references
#define TOL_ACC 2e-6      // (1 + dx) - 1 vs dx: two float roundings of ~1, over max|dx|
#endif

// Worst of several comparisons; names the worst one. a, b: K arrays of n[k] values (NULL: skipped).
static double worst_of(size_t K, const mn_real* const* a, const mn_real* const* b, const size_t* n,
                       const char* const* names, const char** which) {
    size_t k; double e = 0;
    *which = "-";
    for (k = 0; k < K; k++) {
        double ek = (a[k] && b[k]) ? tu_rel(a[k], b[k], n[k]) : 0;
        if (!(ek <= e)) { e = ek; *which = names[k]; }
    }
    return e;
}

// =============================================================================================
// Mamba-2 SSD
// =============================================================================================
typedef struct {
    size_t B, T, H, P, N;
    int amode;                          // MN_SSD_LOG_DECAY or MN_SSD_TRANSITION
    mn_real *X, *A, *Bm, *Cm, *h0;      // (B,T,H,P), (B,T,H), (B,T,H,N) x2, (B,H,P,N) or NULL
    mn_real *dy, *dht;                  // (B,T,H,P), (B,H,P,N) or NULL
} sprob;
typedef struct {
    mn_real *y, *ht;                    // forward
    mn_real *dX, *dA, *dB, *dC, *dh0;   // backward (accumulated)
} sres;
static size_t s_nx(const sprob* p) { return p->B * p->T * p->H * p->P; }
static size_t s_na(const sprob* p) { return p->B * p->T * p->H; }
static size_t s_nb(const sprob* p) { return p->B * p->T * p->H * p->N; }
static size_t s_ns(const sprob* p) { return p->B * p->H * p->P * p->N; }
static const char* s_mode(const sprob* p) { return p->amode == MN_SSD_TRANSITION ? "transition" : "log-decay"; }

// Log-decays as in the vectors, -exp(U(log 0.005, log 4)) in (-4, -0.005); strong != 0: about one
// in three is -400 instead. Transitions: U(-1, 1), any sign.
static void fill_A(mn_real* A, size_t n, int amode, int strong) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (amode == MN_SSD_TRANSITION) A[i] = (mn_real)(2 * mn_rng_uniform(&tu_rng) - 1);
        else A[i] = (mn_real)(-exp(log(0.005) + mn_rng_uniform(&tu_rng) * (log(4.0) - log(0.005))));
        if (strong && amode == MN_SSD_LOG_DECAY && mn_rng_uniform(&tu_rng) < 0.33) A[i] = -400;
    }
}
static sprob s_make(size_t B, size_t T, size_t H, size_t P, size_t N, int amode, int strong) {
    sprob p;
    p.B = B; p.T = T; p.H = H; p.P = P; p.N = N; p.amode = amode;
    p.X = tu_buf(s_nx(&p)); p.A = tu_buf(s_na(&p)); p.Bm = tu_buf(s_nb(&p)); p.Cm = tu_buf(s_nb(&p));
    p.h0 = tu_buf(s_ns(&p)); p.dy = tu_buf(s_nx(&p)); p.dht = tu_buf(s_ns(&p));
    tu_fill(p.X, s_nx(&p), 0, 1); fill_A(p.A, s_na(&p), amode, strong); tu_fill(p.Bm, s_nb(&p), 0, 1);
    tu_fill(p.Cm, s_nb(&p), 0, 1);
    tu_fill(p.h0, s_ns(&p), 0, 0.5); tu_fill(p.dy, s_nx(&p), 0, 1); tu_fill(p.dht, s_ns(&p), 0, 1);
    return p;
}
// C == 0: the recurrent form; else the chunkwise form with chunk length C (log-decays only).
static void s_forward(const sprob* p, size_t C, mn_real* y, mn_real* ht) {
    if (C == 0) mn_ssd_forward_recurrent(y, ht, p->X, p->A, p->Bm, p->Cm, p->h0,
                                         p->B, p->T, p->H, p->P, p->N, p->amode);
    else mn_ssd_forward(y, ht, p->X, p->A, p->Bm, p->Cm, p->h0, p->B, p->T, p->H, p->P, p->N, C,
                        tu_work(mn_ssd_work_size(p->B, p->T, p->H, p->P, p->N, C)));
}
static void s_backward(const sprob* p, size_t C, sres* r) {
    if (C == 0)
        mn_ssd_backward_recurrent(r->dX, r->dA, r->dB, r->dC, r->dh0, p->dy, p->dht, p->X, p->A, p->Bm, p->Cm, p->h0,
                                  p->B, p->T, p->H, p->P, p->N, p->amode,
                                  tu_work(mn_ssd_work_size_recurrent(p->T, p->P, p->N)));
    else
        mn_ssd_backward(r->dX, r->dA, r->dB, r->dC, r->dh0, p->dy, p->dht, p->X, p->A, p->Bm, p->Cm, p->h0, p->B, p->T,
                        p->H, p->P, p->N, C, tu_work(mn_ssd_work_size(p->B, p->T, p->H, p->P, p->N, C)));
}
static sres s_alloc(const sprob* p) {
    sres r;
    r.y = tu_buf(s_nx(p)); r.ht = tu_buf(s_ns(p));
    r.dX = tu_buf(s_nx(p)); r.dA = tu_buf(s_na(p)); r.dB = tu_buf(s_nb(p)); r.dC = tu_buf(s_nb(p));
    r.dh0 = tu_buf(s_ns(p));
    return r;
}
static sres s_run(const sprob* p, size_t C) {
    sres r = s_alloc(p);
    s_forward(p, C, r.y, r.ht);
    s_backward(p, C, &r);
    return r;
}
static const char* s_names[7] = { "y", "ht", "dX", "dA", "dB", "dC", "dh0" };
static double s_compare(const sprob* p, const sres* a, const sres* b, const char** which) {
    const mn_real* x[7] = { a->y, a->ht, a->dX, a->dA, a->dB, a->dC, a->dh0 };
    const mn_real* y[7] = { b->y, b->ht, b->dX, b->dA, b->dB, b->dC, b->dh0 };
    size_t n[7];
    n[0] = s_nx(p); n[1] = s_ns(p); n[2] = s_nx(p); n[3] = s_na(p); n[4] = s_nb(p); n[5] = s_nb(p); n[6] = s_ns(p);
    return worst_of(7, x, y, n, s_names, which);
}

#ifdef MESANET_DOUBLE
// ---- finite differences: L = sum(y * dy) + sum(ht * dht); central difference, h = 1e-6
static const sprob* sfd_p;
static size_t sfd_C;
static double s_loss(void) {
    const sprob* p = sfd_p;
    size_t i, n0 = tu_mark(); double L = 0;
    mn_real* y = tu_buf(s_nx(p)); mn_real* ht = tu_buf(s_ns(p));
    s_forward(p, sfd_C, y, ht);
    for (i = 0; i < s_nx(p); i++) L += (double)y[i] * p->dy[i];
    for (i = 0; i < s_ns(p); i++) L += (double)ht[i] * p->dht[i];
    tu_free_to(n0);        // give this call's buffers back right away
    return L;
}
static double fd_vec(double (*loss)(void), const char* what, mn_real* x, size_t n, const mn_real* grad) {
    mn_real* num = tu_buf(n);
    size_t i; double h = 1e-6;
    for (i = 0; i < n; i++) {
        mn_real x0 = x[i];
        x[i] = x0 + h; double lp = loss();
        x[i] = x0 - h; double lm = loss();
        x[i] = x0;
        num[i] = (mn_real)((lp - lm) / (2 * h));
    }
    double e = tu_rel(grad, num, n);
    TU_CHECK(e < TOL_FD, "%s: finite-difference rel err %.3e", what, e);
    return e;
}
static void s_fd_form(sprob* p, size_t C, const char* tag) {
    sres r = s_run(p, C);
    char what[160];
    double e = 0;
    sfd_p = p; sfd_C = C;
#define FD(x, g, n) do { snprintf(what, sizeof what, "ssd %s %s C=%zu d%s", s_mode(p), tag, C, #x); \
                         e = fmax(e, fd_vec(s_loss, what, p->x, n, r.g)); } while (0)
    FD(X, dX, s_nx(p)); FD(A, dA, s_na(p)); FD(Bm, dB, s_nb(p)); FD(Cm, dC, s_nb(p)); FD(h0, dh0, s_ns(p));
#undef FD
    if (C) snprintf(what, sizeof what, "chunk C=%zu", C);
    else snprintf(what, sizeof what, "recurrent");
    printf("  fd ssd %-10s %-6s %-10s worst rel err %.2e\n", s_mode(p), tag, what, e);
}
static void s_test_fd(void) {
    static const size_t Cs[] = { 0, 1, 3, 16 };   // 0 = recurrent
    size_t ci;
    int strong;
    for (strong = 0; strong < 2; strong++) {
        sprob p = s_make(2, 7, 2, 3, 4, MN_SSD_LOG_DECAY, strong);
        for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
            if (strong && Cs[ci] != 0 && Cs[ci] != 3) continue;
            s_fd_form(&p, Cs[ci], strong ? "strong" : "");
        }
        tu_free_all();
    }
    {   // transitions of any sign: the recurrent form
        sprob p = s_make(2, 7, 2, 3, 4, MN_SSD_TRANSITION, 0);
        s_fd_form(&p, 0, "");
        tu_free_all();
    }
}
#endif

// ---- chunkwise == recurrent: forward and all gradients, T = 37, several chunk lengths
static void s_test_chunk_vs_recurrent(void) {
    static const size_t Cs[] = { 1, 2, 3, 5, 16, 37, 64 };
    size_t ci;
    int strong, noh0;
    for (strong = 0; strong < 2; strong++)
        for (noh0 = 0; noh0 < 2; noh0++) {
            sprob p = s_make(2, 37, 3, 5, 8, MN_SSD_LOG_DECAY, strong);
            if (noh0) { p.h0 = NULL; p.dht = NULL; }
            sres ref = s_run(&p, 0);
            double worst = 0;
            for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
                const char* which;
                sres r = s_run(&p, Cs[ci]);
                double e = s_compare(&p, &r, &ref, &which);
                TU_CHECK(e < TOL_EQ, "ssd%s%s chunk C=%zu vs recurrent: %s rel err %.3e", strong ? " strong" : "",
                         noh0 ? " no h0" : "", Cs[ci], which, e);
                worst = fmax(worst, e);
            }
            printf("  ssd chunk vs recurrent%s%s T=37 C=1..64: worst %.2e\n", strong ? " strong decays" : "",
                   noh0 ? " (h0, dht NULL)" : "", worst);
            tu_free_all();
        }
}

// ---- NULL h0 / dht mean zeros; NULL dA / dh0 mean "not needed"; the backwards accumulate
static void s_test_nulls_and_accumulation(void) {
    size_t fi, i;
    double acc_worst = 0;
    for (fi = 0; fi < 3; fi++) {
        int amode = fi == 2 ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY;
        size_t C = fi == 1 ? 4 : 0;
        const char* tag = C ? "chunk" : amode == MN_SSD_TRANSITION ? "recurrent transition" : "recurrent";
        sprob p = s_make(2, 11, 2, 3, 4, amode, 0);
        const char* which;
        memset(p.h0, 0, s_ns(&p) * sizeof(mn_real)); memset(p.dht, 0, s_ns(&p) * sizeof(mn_real));
        sres a = s_run(&p, C);
        sprob pn = p; pn.h0 = NULL; pn.dht = NULL;
        sres b = s_run(&pn, C);
        double e = s_compare(&p, &b, &a, &which);
        TU_CHECK(e == 0, "ssd %s: NULL h0/dht differs from zeros (%s %.3e)", tag, which, e);
        tu_fill(p.h0, s_ns(&p), 0, 0.5); tu_fill(p.dht, s_ns(&p), 0, 1);
        a = s_run(&p, C);
        b = s_alloc(&p); b.dA = NULL; b.dh0 = NULL;
        s_backward(&p, C, &b);
        e = fmax(tu_rel(b.dX, a.dX, s_nx(&p)), fmax(tu_rel(b.dB, a.dB, s_nb(&p)), tu_rel(b.dC, a.dC, s_nb(&p))));
        TU_CHECK(e == 0, "ssd %s: NULL dA/dh0 changes the other gradients (%.3e)", tag, e);
        // accumulation: start from 1 everywhere, the result is 1 + the fresh gradient
        b = s_alloc(&p); b.y = a.y; b.ht = a.ht;
        for (i = 0; i < s_nx(&p); i++) b.dX[i] = 1;
        for (i = 0; i < s_na(&p); i++) b.dA[i] = 1;
        for (i = 0; i < s_nb(&p); i++) b.dB[i] = b.dC[i] = 1;
        for (i = 0; i < s_ns(&p); i++) b.dh0[i] = 1;
        s_backward(&p, C, &b);
        for (i = 0; i < s_nx(&p); i++) b.dX[i] -= 1;
        for (i = 0; i < s_na(&p); i++) b.dA[i] -= 1;
        for (i = 0; i < s_nb(&p); i++) { b.dB[i] -= 1; b.dC[i] -= 1; }
        for (i = 0; i < s_ns(&p); i++) b.dh0[i] -= 1;
        e = s_compare(&p, &b, &a, &which);
        TU_CHECK(e < TOL_ACC, "ssd %s: backward does not accumulate (%s %.3e)", tag, which, e);
        acc_worst = fmax(acc_worst, e);
        tu_free_all();
    }
    printf("  ssd NULL h0/dht/dA/dh0 ok; accumulation (+=) worst %.2e\n", acc_worst);
}

// ---- an empty sequence (T = 0): ht = h0 and dh0 = dht, in every form
static void s_test_empty(void) {
    size_t ci;
    for (ci = 0; ci < 2; ci++) {
        size_t C = ci ? 16 : 0;
        sprob p = s_make(2, 0, 2, 3, 4, MN_SSD_LOG_DECAY, 0);
        sres r = s_run(&p, C);
        double e = fmax(tu_rel(r.ht, p.h0, s_ns(&p)), tu_rel(r.dh0, p.dht, s_ns(&p)));
        TU_CHECK(e == 0, "ssd %s T=0: ht != h0 or dh0 != dht (%.3e)", C ? "chunk" : "recurrent", e);
        tu_free_all();
    }
}

// Rows [t0, t0+L) of a (B,T,H,D) tensor as a (B,L,H,D) one.
static mn_real* slice_t(const mn_real* x, size_t B, size_t T, size_t HD, size_t t0, size_t L) {
    mn_real* s = tu_buf(B * L * HD); size_t b;
    for (b = 0; b < B; b++) memcpy(s + b * L * HD, x + (b * T + t0) * HD, L * HD * sizeof(mn_real));
    return s;
}
// The inverse: adds (B,L,H,D) into rows [t0, t0+L) of (B,T,H,D).
static void unslice_add(mn_real* x, const mn_real* s, size_t B, size_t T, size_t HD, size_t t0, size_t L) {
    size_t b, i;
    for (b = 0; b < B; b++)
        for (i = 0; i < L * HD; i++) x[(b * T + t0) * HD + i] += s[b * L * HD + i];
}

// ---- a sequence split in two through the state: [0,k) then [k,T) with h0 = the first ht.
// Forward: the same y and ht. Backward: the second part's dh0 is the first part's dht.
static void s_test_split(void) {
    size_t fi;
    for (fi = 0; fi < 3; fi++) {
        int amode = fi == 2 ? MN_SSD_TRANSITION : MN_SSD_LOG_DECAY;
        size_t C = fi == 1 ? 4 : 0, T = 19, k = 7, HP, HN, i;
        sprob p = s_make(2, T, 2, 3, 4, amode, 0);
        sres full = s_run(&p, C), cat = s_alloc(&p);
        sprob p1 = p, p2 = p;
        HP = p.H * p.P; HN = p.H * p.N;
        p1.T = k; p2.T = T - k;
        p1.X = slice_t(p.X, p.B, T, HP, 0, k); p2.X = slice_t(p.X, p.B, T, HP, k, T - k);
        p1.A = slice_t(p.A, p.B, T, p.H, 0, k); p2.A = slice_t(p.A, p.B, T, p.H, k, T - k);
        p1.Bm = slice_t(p.Bm, p.B, T, HN, 0, k); p2.Bm = slice_t(p.Bm, p.B, T, HN, k, T - k);
        p1.Cm = slice_t(p.Cm, p.B, T, HN, 0, k); p2.Cm = slice_t(p.Cm, p.B, T, HN, k, T - k);
        p1.dy = slice_t(p.dy, p.B, T, HP, 0, k); p2.dy = slice_t(p.dy, p.B, T, HP, k, T - k);
        sres r1 = s_alloc(&p1), r2 = s_alloc(&p2);
        s_forward(&p1, C, r1.y, r1.ht);
        p2.h0 = r1.ht;
        s_forward(&p2, C, r2.y, r2.ht);
        s_backward(&p2, C, &r2);
        p1.dht = r2.dh0;
        s_backward(&p1, C, &r1);
        // reassemble (cat was zeroed by s_alloc)
        unslice_add(cat.y, r1.y, p.B, T, HP, 0, k); unslice_add(cat.y, r2.y, p.B, T, HP, k, T - k);
        unslice_add(cat.dX, r1.dX, p.B, T, HP, 0, k); unslice_add(cat.dX, r2.dX, p.B, T, HP, k, T - k);
        unslice_add(cat.dA, r1.dA, p.B, T, p.H, 0, k); unslice_add(cat.dA, r2.dA, p.B, T, p.H, k, T - k);
        unslice_add(cat.dB, r1.dB, p.B, T, HN, 0, k); unslice_add(cat.dB, r2.dB, p.B, T, HN, k, T - k);
        unslice_add(cat.dC, r1.dC, p.B, T, HN, 0, k); unslice_add(cat.dC, r2.dC, p.B, T, HN, k, T - k);
        for (i = 0; i < s_ns(&p); i++) { cat.ht[i] = r2.ht[i]; cat.dh0[i] = r1.dh0[i]; }
        const char* which;
        double e = s_compare(&p, &cat, &full, &which);
        TU_CHECK(e < TOL_EQ, "ssd %s %s: split at %zu differs (%s %.3e)",
                 C ? "chunk" : "recurrent", s_mode(&p), k, which, e);
        printf("  ssd split through ht -> h0, %-9s %-10s: %.2e\n", C ? "chunk" : "recurrent", s_mode(&p), e);
        tu_free_all();
    }
}

// ---- step == forward token by token (recurrent, and chunkwise for log-decays), final state == ht
static void s_test_step(void) {
    int amode;
    for (amode = 0; amode < 2; amode++) {
        size_t t, b, B = 2, T = 13, H = 3, P = 4, N = 5;
        sprob p = s_make(B, T, H, P, N, amode, 0);
        mn_real* y_r = tu_buf(s_nx(&p)); mn_real* ht_r = tu_buf(s_ns(&p));
        mn_real* y_c = tu_buf(s_nx(&p)); mn_real* ht_c = tu_buf(s_ns(&p));
        mn_real* y_s = tu_buf(s_nx(&p)); mn_real* state = tu_copy(p.h0, s_ns(&p));
        mn_real *xt = tu_buf(B * H * P), *at = tu_buf(B * H), *bt = tu_buf(B * H * N), *ct = tu_buf(B * H * N),
                *yt = tu_buf(B * H * P);
        s_forward(&p, 0, y_r, ht_r);
        if (amode == MN_SSD_LOG_DECAY) s_forward(&p, 4, y_c, ht_c);
        for (t = 0; t < T; t++) {
            for (b = 0; b < B; b++) {               // token t of every sequence: rows (b,t,:)
                size_t row = (b * T + t) * H;
                memcpy(xt + b * H * P, p.X + row * P, H * P * sizeof(mn_real));
                memcpy(at + b * H, p.A + row, H * sizeof(mn_real));
                memcpy(bt + b * H * N, p.Bm + row * N, H * N * sizeof(mn_real));
                memcpy(ct + b * H * N, p.Cm + row * N, H * N * sizeof(mn_real));
            }
            mn_ssd_step(yt, state, xt, at, bt, ct, B, H, P, N, amode);
            for (b = 0; b < B; b++) memcpy(y_s + (b * T + t) * H * P, yt + b * H * P, H * P * sizeof(mn_real));
        }
        double e1 = fmax(tu_rel(y_s, y_r, s_nx(&p)), tu_rel(state, ht_r, s_ns(&p)));
        TU_CHECK(e1 == 0, "ssd %s step vs recurrent forward: %.3e", s_mode(&p), e1);
        if (amode == MN_SSD_LOG_DECAY) {
            double e2 = fmax(tu_rel(y_s, y_c, s_nx(&p)), tu_rel(state, ht_c, s_ns(&p)));
            TU_CHECK(e2 < TOL_EQ, "ssd step vs chunkwise forward: %.3e", e2);
            printf("  ssd step %-10s vs recurrent %.2e, vs chunkwise (C=4) %.2e\n", s_mode(&p), e1, e2);
        } else
            printf("  ssd step %-10s vs recurrent %.2e\n", s_mode(&p), e1);
        tu_free_all();
    }
}

// ---- golden vectors: outputs and every gradient, recurrent form and chunkwise C = 16, 5, 64, 1
static void s_test_vectors(const char* dir) {
    static const size_t Cs[5] = { 0, 16, 5, 64, 1 };
    static const char* names[7] = { "out.y", "out.ht", "grad.X", "grad.A", "grad.B", "grad.C", "grad.h0" };
    static mn_vec_file f;
    char path[512], err[256];
    const mn_vec_tensor* X;
    double worst[7] = { 0 };
    size_t ci, i;
    sprob p;
    snprintf(path, sizeof path, "%s/mamba2_ssd.vec", dir);
    if (mn_vec_load(&f, path, err, sizeof err) != 0) { TU_CHECK(0, "cannot load %s: %s", path, err); return; }
    TU_CHECK(strcmp(f.op, "mamba2_ssd") == 0, "%s: op is %s", path, f.op);
    X = mn_vec_get(&f, "X");
    if (X == NULL || X->ndim != 4 || mn_vec_get(&f, "B") == NULL) {
        TU_CHECK(0, "%s: no X or B", path); mn_vec_free(&f); return;
    }
    p.B = X->dims[0]; p.T = X->dims[1]; p.H = X->dims[2]; p.P = X->dims[3]; p.N = mn_vec_get(&f, "B")->dims[3];
    p.amode = MN_SSD_LOG_DECAY;
    p.X = vt_real(&f, "X", s_nx(&p)); p.A = vt_real(&f, "A", s_na(&p));
    p.Bm = vt_real(&f, "B", s_nb(&p)); p.Cm = vt_real(&f, "C", s_nb(&p));
    p.h0 = vt_real(&f, "h0", s_ns(&p)); p.dy = vt_real(&f, "do", s_nx(&p)); p.dht = vt_real(&f, "dht", s_ns(&p));
    for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
        sres r = s_run(&p, Cs[ci]);
        const mn_real* got[7] = { r.y, r.ht, r.dX, r.dA, r.dB, r.dC, r.dh0 };
        size_t n[7];
        n[0] = s_nx(&p); n[1] = s_ns(&p); n[2] = s_nx(&p); n[3] = s_na(&p); n[4] = s_nb(&p); n[5] = s_nb(&p);
        n[6] = s_ns(&p);
        for (i = 0; i < 7; i++) {
            const double* want = vt_get(&f, names[i], n[i]);
            if (want == NULL) continue;
            double e = tu_rel_d(got[i], want, n[i]);
            TU_CHECK(e <= TOL_VEC, "mamba2_ssd %s form C=%zu: %s rel err %.3e",
                     Cs[ci] ? "chunk" : "recurrent", Cs[ci], names[i], e);
            if (!(e <= worst[i])) worst[i] = e;
        }
    }
    printf("  mamba2_ssd      ");
    for (i = 0; i < 7; i++) printf(" %s %.1e", names[i], worst[i]);
    printf("   (worst of recurrent, chunk 16, 5, 64, 1)\n");
    mn_vec_free(&f);
    tu_free_all();
}

// =============================================================================================
// RG-LRU
// =============================================================================================
typedef struct {
    size_t B, T, W, NH;
    double c;
    mn_real *x, *ap, *wx, *bx, *wa, *ba, *h0;  // (B,T,W), (W), (NH,bw,bw), (NH,bw), ..., (B,W) or NULL
    int* seg;                                  // (B,T) or NULL
    mn_real *dy, *dht;                         // (B,T,W), (B,W) or NULL
} rprob;
typedef struct {
    mn_real *y, *ht, *gates;
    mn_real *dx, *dap, *dwx, *dbx, *dwa, *dba, *dh0;
} rres;
static size_t r_nx(const rprob* p) { return p->B * p->T * p->W; }
static size_t r_nw(const rprob* p) { return p->W * (p->W / p->NH); }
static size_t r_ns(const rprob* p) { return p->B * p->W; }

// As recurrentgemma initialises: a_param = log(1/a0 - 1) with a0^2 ~ U[0.81, 0.998] (so
// softplus(a_param) = -log a0), gate weights N(0, 1/bw); biases N(0, 0.5^2) (zero there) to
// exercise them.
static rprob r_make(size_t B, size_t T, size_t W, size_t NH, int with_h0) {
    rprob p; size_t i, bw = W / NH;
    p.B = B; p.T = T; p.W = W; p.NH = NH; p.c = 8.0; p.seg = NULL;
    p.x = tu_buf(r_nx(&p)); p.ap = tu_buf(W); p.wx = tu_buf(r_nw(&p)); p.wa = tu_buf(r_nw(&p)); p.bx = tu_buf(W);
    p.ba = tu_buf(W);
    p.h0 = with_h0 ? tu_buf(r_ns(&p)) : NULL; p.dy = tu_buf(r_nx(&p)); p.dht = tu_buf(r_ns(&p));
    tu_fill(p.x, r_nx(&p), 0, 1);
    for (i = 0; i < W; i++) {
        double a0 = sqrt(0.81 + (0.998 - 0.81) * mn_rng_uniform(&tu_rng));
        p.ap[i] = (mn_real)log(1 / a0 - 1);
    }
    tu_fill(p.wx, r_nw(&p), 0, 1 / sqrt((double)bw)); tu_fill(p.wa, r_nw(&p), 0, 1 / sqrt((double)bw));
    tu_fill(p.bx, W, 0, 0.5); tu_fill(p.ba, W, 0, 0.5);
    if (with_h0) tu_fill(p.h0, r_ns(&p), 0, 0.5);
    tu_fill(p.dy, r_nx(&p), 0, 1); tu_fill(p.dht, r_ns(&p), 0, 1);
    return p;
}
static void r_forward(const rprob* p, mn_real* y, mn_real* ht, mn_real* gates) {
    mn_rglru_forward(y, ht, gates, p->x, p->ap, p->wx, p->bx, p->wa, p->ba, p->h0, p->seg,
                     p->B, p->T, p->W, p->NH, p->c);
}
static void r_backward(const rprob* p, rres* r) {
    mn_rglru_backward(r->dx, r->dap, r->dwx, r->dbx, r->dwa, r->dba, r->dh0, p->dy, p->dht, r->y, r->gates, p->x, p->ap,
                      p->wx, p->wa, p->h0, p->seg, p->B, p->T, p->W, p->NH, p->c,
                      tu_work(mn_rglru_work_size(p->B, p->T, p->W)));
}
static rres r_alloc(const rprob* p) {
    rres r;
    r.y = tu_buf(r_nx(p)); r.ht = tu_buf(r_ns(p)); r.gates = tu_work(mn_rglru_work_size(p->B, p->T, p->W));
    r.dx = tu_buf(r_nx(p)); r.dap = tu_buf(p->W); r.dwx = tu_buf(r_nw(p)); r.dbx = tu_buf(p->W);
    r.dwa = tu_buf(r_nw(p)); r.dba = tu_buf(p->W);
    r.dh0 = tu_buf(r_ns(p));
    return r;
}
static rres r_run(const rprob* p) {
    rres r = r_alloc(p);
    r_forward(p, r.y, r.ht, r.gates);
    r_backward(p, &r);
    return r;
}
static const char* r_names[9] = { "y", "ht", "dx", "da_param", "dwx", "dbx", "dwa", "dba", "dh0" };
static double r_compare(const rprob* p, const rres* a, const rres* b, const char** which) {
    const mn_real* x[9] = { a->y, a->ht, a->dx, a->dap, a->dwx, a->dbx, a->dwa, a->dba, a->dh0 };
    const mn_real* y[9] = { b->y, b->ht, b->dx, b->dap, b->dwx, b->dbx, b->dwa, b->dba, b->dh0 };
    size_t n[9];
    n[0] = r_nx(p); n[1] = r_ns(p); n[2] = r_nx(p); n[3] = p->W; n[4] = r_nw(p); n[5] = p->W; n[6] = r_nw(p);
    n[7] = p->W; n[8] = r_ns(p);
    return worst_of(9, x, y, n, r_names, which);
}
// Resets inside the sequences: sequence 0 starts at 0 and restarts at t = 4 and t = T-2; sequence
// 1 continues (positions from 5, no reset at 0) and restarts at t = 6.
static int* r_segments(size_t B, size_t T) {
    int* s = (int*)tu_mem(B * T * sizeof(int)); size_t b, t;
    for (b = 0; b < B; b++) {
        int pos = b == 0 ? 0 : 5;
        for (t = 0; t < T; t++) {
            if ((b == 0 && (t == 4 || t + 2 == T)) || (b == 1 && t == 6)) pos = 0;
            s[b * T + t] = pos++;
        }
    }
    return s;
}
static const char* r_case(int k) { return k == 0 ? "no h0" : k == 1 ? "h0" : "h0 + resets"; }

#ifdef MESANET_DOUBLE
static const rprob* rfd_p;
static double r_loss(void) {
    const rprob* p = rfd_p;
    size_t i, n0 = tu_mark(); double L = 0;
    mn_real* y = tu_buf(r_nx(p)); mn_real* ht = tu_buf(r_ns(p));
    mn_real* g = tu_buf(mn_rglru_work_size(p->B, p->T, p->W));
    r_forward(p, y, ht, g);
    for (i = 0; i < r_nx(p); i++) L += (double)y[i] * p->dy[i];
    for (i = 0; i < r_ns(p); i++) L += (double)ht[i] * p->dht[i];
    tu_free_to(n0);
    return L;
}
static void r_test_fd(void) {
    int k;
    for (k = 0; k < 3; k++) {
        rprob p = r_make(2, 9, 6, 2, k > 0);
        if (k == 2) p.seg = r_segments(p.B, p.T);
        rres r = r_run(&p);
        char what[160];
        double e = 0;
        rfd_p = &p;
#define FD(x, g, n) do { snprintf(what, sizeof what, "rglru %s d%s", r_case(k), #x); \
                         e = fmax(e, fd_vec(r_loss, what, p.x, n, r.g)); } while (0)
        FD(x, dx, r_nx(&p)); FD(ap, dap, p.W); FD(wx, dwx, r_nw(&p)); FD(bx, dbx, p.W);
        FD(wa, dwa, r_nw(&p)); FD(ba, dba, p.W);
        if (p.h0) FD(h0, dh0, r_ns(&p));
#undef FD
        printf("  fd rglru %-12s worst rel err %.2e\n", r_case(k), e);
        tu_free_all();
    }
}
#endif

// ---- SqrtBoundDerivative. One channel (W = NH = 1), T = 3, no h0 (a reset at t = 0), and
// a_param = -25: softplus = 1.4e-11, so 1 - a^2 ~ 1e-10 < 2.5e-7 at t = 1, 2 and the clip binds.
// A scalar re-derivation (written out here, not shared with the library) gives the gradients
// with the clip (must agree) and with the exact derivative 1/(2 sqrt(u)) (must differ).
static void r_scalar_grads(const double* x, const double* dy, double dht, double ap, double wx, double bx, double wa,
                           double ba, double c, int clip, double g[6]) {
    double h[3], gx[3], ga[3], a[3], a2[3], u[3], sp = log1p(exp(ap)), d = dht;
    int t;
    for (t = 0; t < 6; t++) g[t] = 0;
    for (t = 0; t < 3; t++) {
        gx[t] = 1 / (1 + exp(-(x[t] * wx + bx)));
        ga[t] = 1 / (1 + exp(-(x[t] * wa + ba)));
        a[t] = exp(-c * ga[t] * sp); a2[t] = exp(-2 * c * ga[t] * sp); u[t] = 1 - a2[t];
        h[t] = t == 0 ? x[t] * gx[t] : a[t] * h[t - 1] + sqrt(u[t]) * x[t] * gx[t];
    }
    for (t = 2; t >= 0; t--) {
        double dh = dy[t] + d, dgx, dga = 0, dxdir;
        if (t == 0) { dgx = dh * x[t]; dxdir = dh * gx[t]; d = 0; }
        else {
            double dsq = clip ? 1 / sqrt(fmax(4 * u[t], 1e-6)) : 1 / (2 * sqrt(u[t]));
            double dla = a[t] * dh * h[t - 1] - 2 * a2[t] * dh * x[t] * gx[t] * dsq;
            dgx = dh * x[t] * sqrt(u[t]); dxdir = dh * gx[t] * sqrt(u[t]);
            dga = -c * sp * dla;
            g[0] += -c * ga[t] * dla / (1 + exp(-ap));           // da_param
            d = a[t] * dh;
        }
        double dzx = dgx * gx[t] * (1 - gx[t]), dza = dga * ga[t] * (1 - ga[t]);
        g[1] += dzx * x[t]; g[2] += dzx; g[3] += dza * x[t]; g[4] += dza;   // dwx dbx dwa dba
        g[5] += dxdir + dzx * wx + dza * wa;                                  // sum of dx over t
    }
}
static void r_test_sqrt_clip(void) {
    rprob p = r_make(1, 3, 1, 1, 0);
    double x[3], dy[3], gc[6], ge[6], got[6], ec = 0, ee = INFINITY;
    size_t i;
    p.ap[0] = -25;
    for (i = 0; i < 3; i++) { x[i] = p.x[i]; dy[i] = p.dy[i]; }
    rres r = r_run(&p);
    r_scalar_grads(x, dy, p.dht[0], p.ap[0], p.wx[0], p.bx[0], p.wa[0], p.ba[0], p.c, 1, gc);
    r_scalar_grads(x, dy, p.dht[0], p.ap[0], p.wx[0], p.bx[0], p.wa[0], p.ba[0], p.c, 0, ge);
    got[0] = r.dap[0]; got[1] = r.dwx[0]; got[2] = r.dbx[0]; got[3] = r.dwa[0]; got[4] = r.dba[0];
    got[5] = (double)r.dx[0] + r.dx[1] + r.dx[2];
    for (i = 0; i < 6; i++) {
        double e1 = fabs(got[i] - gc[i]) / fmax(fabs(gc[i]), 1e-300);
        ec = fmax(ec, e1);
    }
    // the a-gate's gradients (da_param, dwa, dba) are the ones the clip changes
    for (i = 0; i < 5; i++) {
        if (i == 1 || i == 2) continue;
        ee = fmin(ee, fabs(got[i] - ge[i]) / fabs(ge[i]));
    }
#ifdef MESANET_DOUBLE
    TU_CHECK(ec < 1e-9, "rglru clipped sqrt derivative: rel err %.3e vs the scalar re-derivation", ec);
#else
    TU_CHECK(ec < 1e-3, "rglru clipped sqrt derivative: rel err %.3e vs the scalar re-derivation", ec);
#endif
    TU_CHECK(ee > 0.5, "rglru: the sqrt clip does not bind (%.3e from the exact derivative)", ee);
    printf("  rglru SqrtBoundDerivative (1-a^2 ~ 1e-10): vs clipped scalar %.2e, vs exact derivative >= %.2f\n",
           ec, ee);
    tu_free_all();
}

// ---- resets: a 0 in segment_pos starts afresh; a split through ht -> h0 continues exactly
static void r_test_resets_and_split(void) {
    size_t B = 2, T = 17, W = 8, NH = 2, k = 6, i;
    const char* which;
    // (a) segment_pos = 0..k-1, 0..T-k-1 on one sequence == two fresh sequences (h0 NULL, seg NULL)
    rprob p = r_make(B, T, W, NH, 0);
    int* seg = (int*)tu_mem(B * T * sizeof(int));
    for (i = 0; i < B * T; i++) seg[i] = (int)(i % T < k ? i % T : i % T - k);
    p.seg = seg;
    rres full = r_run(&p);
    rprob p1 = p, p2 = p;
    p1.seg = p2.seg = NULL; p1.T = k; p2.T = T - k;
    p1.x = slice_t(p.x, B, T, W, 0, k); p2.x = slice_t(p.x, B, T, W, k, T - k);
    p1.dy = slice_t(p.dy, B, T, W, 0, k); p2.dy = slice_t(p.dy, B, T, W, k, T - k);
    p1.dht = tu_buf(B * W);                                   // zeros: the reset cuts every path to t < k
    rres r1 = r_run(&p1), r2 = r_run(&p2);
    rres cat = r_alloc(&p);
    unslice_add(cat.y, r1.y, B, T, W, 0, k); unslice_add(cat.y, r2.y, B, T, W, k, T - k);
    unslice_add(cat.dx, r1.dx, B, T, W, 0, k); unslice_add(cat.dx, r2.dx, B, T, W, k, T - k);
    for (i = 0; i < W; i++) {
        cat.dap[i] = r1.dap[i] + r2.dap[i]; cat.dbx[i] = r1.dbx[i] + r2.dbx[i]; cat.dba[i] = r1.dba[i] + r2.dba[i];
    }
    for (i = 0; i < r_nw(&p); i++) { cat.dwx[i] = r1.dwx[i] + r2.dwx[i]; cat.dwa[i] = r1.dwa[i] + r2.dwa[i]; }
    for (i = 0; i < r_ns(&p); i++) { cat.ht[i] = r2.ht[i]; cat.dh0[i] = r1.dh0[i]; }
    double e = r_compare(&p, &cat, &full, &which);
    TU_CHECK(e < TOL_EQ, "rglru: a reset at t=%zu differs from a fresh sequence (%s %.3e)", k, which, e);
    printf("  rglru reset in segment_pos == fresh sequence: %.2e\n", e);
    tu_free_all();
    // (b) [0,T) with no h0 == [0,k) with no h0, then [k,T) with h0 = its ht (no reset), gradients
    // chained through dh0 -> dht; and once more from a given h0
    {
        int with_h0;
        for (with_h0 = 0; with_h0 < 2; with_h0++) {
            rprob q = r_make(B, T, W, NH, with_h0);
            rres fq = r_run(&q);
            rprob q1 = q, q2 = q;
            q1.T = k; q2.T = T - k;
            q1.x = slice_t(q.x, B, T, W, 0, k); q2.x = slice_t(q.x, B, T, W, k, T - k);
            q1.dy = slice_t(q.dy, B, T, W, 0, k); q2.dy = slice_t(q.dy, B, T, W, k, T - k);
            rres s1 = r_alloc(&q1), s2 = r_alloc(&q2);
            r_forward(&q1, s1.y, s1.ht, s1.gates);
            q2.h0 = s1.ht;
            r_forward(&q2, s2.y, s2.ht, s2.gates);
            r_backward(&q2, &s2);
            q1.dht = s2.dh0;
            r_backward(&q1, &s1);
            rres cq = r_alloc(&q);
            unslice_add(cq.y, s1.y, B, T, W, 0, k); unslice_add(cq.y, s2.y, B, T, W, k, T - k);
            unslice_add(cq.dx, s1.dx, B, T, W, 0, k); unslice_add(cq.dx, s2.dx, B, T, W, k, T - k);
            for (i = 0; i < W; i++) {
                cq.dap[i] = s1.dap[i] + s2.dap[i]; cq.dbx[i] = s1.dbx[i] + s2.dbx[i]; cq.dba[i] = s1.dba[i] + s2.dba[i];
            }
            for (i = 0; i < r_nw(&q); i++) { cq.dwx[i] = s1.dwx[i] + s2.dwx[i]; cq.dwa[i] = s1.dwa[i] + s2.dwa[i]; }
            for (i = 0; i < r_ns(&q); i++) { cq.ht[i] = s2.ht[i]; cq.dh0[i] = s1.dh0[i]; }
            e = r_compare(&q, &cq, &fq, &which);
            TU_CHECK(e < TOL_EQ, "rglru %s: split through ht -> h0 differs (%s %.3e)",
                     with_h0 ? "h0" : "no h0", which, e);
            printf("  rglru split through ht -> h0 (%s): %.2e\n", with_h0 ? "from h0" : "fresh", e);
            tu_free_all();
        }
    }
    // (c) a zero h0 is a continued sequence, not a fresh one: it differs from h0 NULL at t = 0
    {
        rprob q = r_make(B, 5, W, NH, 1), qn;
        memset(q.h0, 0, r_ns(&q) * sizeof(mn_real));
        qn = q; qn.h0 = NULL;
        rres a = r_run(&q), b2 = r_run(&qn);
        e = tu_rel(a.y, b2.y, r_nx(&q));
        TU_CHECK(e > 1e-3, "rglru: a zero h0 should not reset at t = 0 (%.3e)", e);
        // and with segment_pos = 0.. given, h0 is ignored at t = 0 (recurrentgemma)
        int* s0 = (int*)tu_mem(B * 5 * sizeof(int));
        for (i = 0; i < B * 5; i++) s0[i] = (int)(i % 5);
        tu_fill(q.h0, r_ns(&q), 0, 1); q.seg = s0; qn.seg = s0;
        a = r_run(&q); b2 = r_run(&qn);
        e = r_compare(&q, &a, &b2, &which);
        TU_CHECK(e == 0, "rglru: with segment_pos[.,0] == 0, h0 should be ignored (%s %.3e)", which, e);
        e = 0;
        for (i = 0; i < r_ns(&q); i++) e = fmax(e, fabs((double)a.dh0[i]));
        TU_CHECK(e == 0, "rglru: dh0 should be 0 after a reset at t = 0 (%.3e)", e);
        tu_free_all();
    }
}

// ---- accumulation, NULL gradient buffers, T = 0
static void r_test_misc(void) {
    int k;
    size_t i;
    double acc_worst = 0;
    const char* which;
    for (k = 0; k < 3; k++) {
        rprob p = r_make(2, 9, 8, 4, k > 0);
        if (k == 2) p.seg = r_segments(p.B, p.T);
        rres a = r_run(&p), b = r_alloc(&p);
        memcpy(b.y, a.y, r_nx(&p) * sizeof(mn_real)); memcpy(b.ht, a.ht, r_ns(&p) * sizeof(mn_real));
        memcpy(b.gates, a.gates, mn_rglru_work_size(p.B, p.T, p.W) * sizeof(mn_real));
        for (i = 0; i < r_nx(&p); i++) b.dx[i] = 1;
        for (i = 0; i < p.W; i++) b.dap[i] = b.dbx[i] = b.dba[i] = 1;
        for (i = 0; i < r_nw(&p); i++) b.dwx[i] = b.dwa[i] = 1;
        for (i = 0; i < r_ns(&p); i++) b.dh0[i] = 1;
        r_backward(&p, &b);
        for (i = 0; i < r_nx(&p); i++) b.dx[i] -= 1;
        for (i = 0; i < p.W; i++) { b.dap[i] -= 1; b.dbx[i] -= 1; b.dba[i] -= 1; }
        for (i = 0; i < r_nw(&p); i++) { b.dwx[i] -= 1; b.dwa[i] -= 1; }
        for (i = 0; i < r_ns(&p); i++) b.dh0[i] -= 1;
        double e = r_compare(&p, &b, &a, &which);
        TU_CHECK(e < TOL_ACC, "rglru %s: backward does not accumulate (%s %.3e)", r_case(k), which, e);
        acc_worst = fmax(acc_worst, e);
        // NULL parameter gradients and dh0: dx unchanged
        b = a; b.dx = tu_buf(r_nx(&p)); b.dap = b.dwx = b.dbx = b.dwa = b.dba = b.dh0 = NULL;
        r_backward(&p, &b);
        e = tu_rel(b.dx, a.dx, r_nx(&p));
        TU_CHECK(e == 0, "rglru %s: NULL gradient buffers change dx (%.3e)", r_case(k), e);
        // NULL dht == zeros
        rprob pz = p; pz.dht = tu_buf(r_ns(&p));
        rprob pn = p; pn.dht = NULL;
        rres za = r_run(&pz), zn = r_run(&pn);
        e = r_compare(&p, &zn, &za, &which);
        TU_CHECK(e == 0, "rglru %s: NULL dht differs from zeros (%s %.3e)", r_case(k), which, e);
        tu_free_all();
    }
    {   // T = 0: ht = h0, dh0 = dht, nothing else touched
        rprob p = r_make(2, 0, 8, 2, 1);
        rres r = r_run(&p);
        double e = fmax(tu_rel(r.ht, p.h0, r_ns(&p)), tu_rel(r.dh0, p.dht, r_ns(&p)));
        TU_CHECK(e == 0, "rglru T=0: ht != h0 or dh0 != dht (%.3e)", e);
        tu_free_all();
    }
    printf("  rglru accumulation (+=) worst %.2e; NULL gradient buffers, NULL dht, T=0 ok\n", acc_worst);
}

// ---- step == forward token by token (no h0 with segment_pos 0..; h0; resets), final state == ht
static void r_test_step(void) {
    int k;
    for (k = 0; k < 3; k++) {
        size_t B = 2, T = 11, W = 8, NH = 2, t, b;
        rprob p = r_make(B, T, W, NH, k > 0);
        int* seg = k == 2 ? r_segments(B, T) : NULL;
        int* pos = (int*)tu_mem(B * sizeof(int));
        p.seg = seg;
        mn_real* y = tu_buf(r_nx(&p)); mn_real* ht = tu_buf(r_ns(&p)); mn_real* g = tu_buf(mn_rglru_work_size(B, T, W));
        mn_real* ys = tu_buf(r_nx(&p)); mn_real* state = tu_buf(r_ns(&p));
        mn_real *xt = tu_buf(B * W), *yt = tu_buf(B * W), *wk = tu_work(mn_rglru_work_size(B, 1, W));
        r_forward(&p, y, ht, g);
        if (p.h0) memcpy(state, p.h0, r_ns(&p) * sizeof(mn_real));
        for (t = 0; t < T; t++) {
            for (b = 0; b < B; b++) {
                memcpy(xt + b * W, p.x + (b * T + t) * W, W * sizeof(mn_real));
                // no h0: the first token must reset (the forward's rule for h0 == NULL)
                pos[b] = seg ? seg[b * T + t] : (int)t + (k == 0 ? 0 : 1);
            }
            mn_rglru_step(yt, state, xt, p.ap, p.wx, p.bx, p.wa, p.ba, pos, B, W, NH, p.c, wk);
            for (b = 0; b < B; b++) memcpy(ys + (b * T + t) * W, yt + b * W, W * sizeof(mn_real));
        }
        double e = fmax(tu_rel(ys, y, r_nx(&p)), tu_rel(state, ht, r_ns(&p)));
        TU_CHECK(e < TOL_EQ, "rglru %s: step vs forward %.3e", r_case(k), e);
        printf("  rglru step %-12s vs forward %.2e\n", r_case(k), e);
        tu_free_all();
    }
}

// ---- golden vectors: segment_pos NULL, segment_pos = 0..T-1 (the reference's call), the step
static void r_test_vectors(const char* dir) {
    static const char* names[8] = { "out.y", "out.ht", "grad.x", "grad.a_param", "grad.wx", "grad.bx", "grad.wa",
                                    "grad.ba" };
    static mn_vec_file f;
    char path[512], err[256];
    const mn_vec_tensor* x;
    double worst[8] = { 0 };
    size_t form, i, t, b;
    rprob p;
    snprintf(path, sizeof path, "%s/rglru.vec", dir);
    if (mn_vec_load(&f, path, err, sizeof err) != 0) { TU_CHECK(0, "cannot load %s: %s", path, err); return; }
    TU_CHECK(strcmp(f.op, "rglru") == 0, "%s: op is %s", path, f.op);
    x = mn_vec_get(&f, "x");
    if (x == NULL || x->ndim != 3) { TU_CHECK(0, "%s: no x", path); mn_vec_free(&f); return; }
    p.B = x->dims[0]; p.T = x->dims[1]; p.W = x->dims[2];
    p.NH = (size_t)mn_vec_attr_f(&f, "num_heads", 0); p.c = mn_vec_attr_f(&f, "c", NAN);
    TU_CHECK(p.NH > 0 && p.W % p.NH == 0 && p.c == 8.0, "%s: attrs num_heads %zu, c %g", path, p.NH, p.c);
    if (!(p.NH > 0 && p.W % p.NH == 0)) { mn_vec_free(&f); return; }
    p.x = vt_real(&f, "x", r_nx(&p)); p.ap = vt_real(&f, "a_param", p.W);
    p.wx = vt_real(&f, "wx", r_nw(&p)); p.bx = vt_real(&f, "bx", p.W);
    p.wa = vt_real(&f, "wa", r_nw(&p)); p.ba = vt_real(&f, "ba", p.W);
    p.h0 = NULL; p.dy = vt_real(&f, "do", r_nx(&p)); p.dht = vt_real(&f, "dht", r_ns(&p));
    int* seg = (int*)tu_mem(p.B * p.T * sizeof(int));
    for (i = 0; i < p.B * p.T; i++) seg[i] = (int)(i % p.T);
    for (form = 0; form < 3; form++) {
        rres r;
        const mn_real* got[8];
        size_t n[8];
        p.seg = form == 1 ? seg : NULL;
        if (form < 2) r = r_run(&p);
        else {                                        // the step, token by token (forward only)
            mn_real *xt = tu_buf(p.B * p.W), *yt = tu_buf(p.B * p.W), *wk = tu_buf(mn_rglru_work_size(p.B, 1, p.W));
            int* pos = (int*)tu_mem(p.B * sizeof(int));
            r = r_alloc(&p);
            for (t = 0; t < p.T; t++) {
                for (b = 0; b < p.B; b++) {
                    memcpy(xt + b * p.W, p.x + (b * p.T + t) * p.W, p.W * sizeof(mn_real)); pos[b] = (int)t;
                }
                mn_rglru_step(yt, r.ht, xt, p.ap, p.wx, p.bx, p.wa, p.ba, pos, p.B, p.W, p.NH, p.c, wk);
                for (b = 0; b < p.B; b++) memcpy(r.y + (b * p.T + t) * p.W, yt + b * p.W, p.W * sizeof(mn_real));
            }
        }
        got[0] = r.y; got[1] = r.ht; got[2] = r.dx; got[3] = r.dap; got[4] = r.dwx; got[5] = r.dbx; got[6] = r.dwa;
        got[7] = r.dba;
        n[0] = r_nx(&p); n[1] = r_ns(&p); n[2] = r_nx(&p); n[3] = p.W; n[4] = r_nw(&p); n[5] = p.W; n[6] = r_nw(&p);
        n[7] = p.W;
        for (i = 0; i < (form < 2 ? 8u : 2u); i++) {
            const double* want = vt_get(&f, names[i], n[i]);
            if (want == NULL) continue;
            double e = tu_rel_d(got[i], want, n[i]);
            TU_CHECK(e <= TOL_VEC, "rglru %s: %s rel err %.3e",
                     form == 0 ? "segment_pos NULL" : form == 1 ? "segment_pos 0..T-1" : "step", names[i], e);
            if (!(e <= worst[i])) worst[i] = e;
        }
    }
    printf("  rglru           ");
    for (i = 0; i < 8; i++) printf(" %s %.1e", names[i], worst[i]);
    printf("   (worst of segment_pos NULL, 0..T-1, step)\n");
    mn_vec_free(&f);
    tu_free_all();
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "reference/vectors";
    mn_rng_seed(&tu_rng, 20240612);
#ifdef MESANET_DOUBLE
    printf("finite differences (double):\n");
    s_test_fd();
    r_test_fd();
#else
    printf("float build: finite differences skipped (they need -DMESANET_DOUBLE)\n");
#endif
    printf("Mamba-2 SSD:\n");
    s_test_chunk_vs_recurrent();
    s_test_nulls_and_accumulation();
    s_test_empty();
    s_test_split();
    s_test_step();
    printf("RG-LRU:\n");
    r_test_sqrt_clip();
    r_test_resets_and_split();
    r_test_misc();
    r_test_step();
    printf("golden vectors (max|a-b|/max|b|):\n");
    s_test_vectors(dir);
    r_test_vectors(dir);
    return tu_finish("test_ssm");
}
