// Tests of the gated delta rule / DeltaNet ops (mesanet.h >>delta_rule).
//   cc -std=c99 -O2 -Wall -Wextra -Werror -DMESANET_DOUBLE -I. tests/test_delta.c -lm   (strict bounds)
//   cc -std=c99 -O2 -Wall -Wextra -Werror -I. tests/test_delta.c -lm                   (float, loose bounds)
// Run from the repository root (or pass the vectors folder: ./a.out reference/vectors).
//  1. finite differences of L = sum(out * dout) + sum(ht * dht) for every gradient (q, k, v, beta, g,
//     h0) of both forms (naive recurrent, chunkwise at C = 1, 3 and 4 with T = 7), beta in (0,1) and (0,2),
//     gated and DeltaNet (g = NULL); the backwards accumulate (+=);
//  2. chunkwise == recurrent, forward and every gradient, C in {1, 3, 16, 64}, T = 37;
//  3. step token by token == forward; NULL h0 / dht / dg / dh0 behave as zeros / "not needed";
//  4. the golden vectors delta_rule.vec (head-first, transposed here), gated_delta_rule_beta01,
//     _beta02 and _beta01_T256: out.o, out.ht and every grad.* for each form, at 1e-10 (double).
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#define MN_VECFILE_IMPLEMENTATION
#include "reference/vecfile.h"
#include "testutil.h"
#include <stdlib.h>
#include <string.h>

#ifdef MESANET_DOUBLE
#define FD_H 1e-6       // central difference step; error ~1e-9 relative in double
#define TOL_FD 1e-6     // a wrong formula is off by O(1)
#define TOL_EQ 1e-12    // chunkwise vs recurrent: the same sums in another order
#define TOL_VEC 1e-10   // vectors README: suggested bound for a float64 implementation
#else
#define FD_H 1e-2       // float: rounding noise ~1e-7/h against truncation ~h^2
#define TOL_FD 2e-3
#define TOL_EQ 2e-5
#define TOL_VEC 2e-5
#endif

static const char* vec_dir = "reference/vectors";

// ---- one problem: sizes, inputs, upstream gradients
typedef struct {
    size_t B, T, H, Dk, Dv;
    double scale;
    mn_real *q, *k, *v, *beta, *g, *h0;   // (B,T,H,Dk) x2, (B,T,H,Dv), (B,T,H) x2, (B,H,Dk,Dv); g, h0 may be NULL
    mn_real *dout, *dht;                  // (B,T,H,Dv), (B,H,Dk,Dv); dht may be NULL
} dprob;
typedef struct { mn_real *q, *k, *v, *beta, *g, *h0; } dgrads;

static size_t nqk(const dprob* p) { return p->B * p->T * p->H * p->Dk; }
static size_t nv(const dprob* p) { return p->B * p->T * p->H * p->Dv; }
static size_t nbt(const dprob* p) { return p->B * p->T * p->H; }
static size_t nst(const dprob* p) { return p->B * p->H * p->Dk * p->Dv; }

static void l2rows(mn_real* x, size_t rows, size_t D) {
    size_t r, d;
    for (r = 0; r < rows; r++) {
        double ss = 1e-6;
        for (d = 0; d < D; d++) ss += (double)x[r * D + d] * x[r * D + d];
        for (d = 0; d < D; d++) x[r * D + d] = (mn_real)(x[r * D + d] / sqrt(ss));
    }
}
static double logsigmoid(double x) { return x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x)); }

// Random inputs as the vectors README draws them: l2-normalised q, k; beta = beta_max sigmoid(N(0,1));
// g = logsigmoid(N(2, 2^2)) clamped like the generator; h0 = 0.5 N(0,1).
static dprob make_prob(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double beta_max, int gated, int with_h0,
                       int with_dht) {
    dprob p;
    size_t i;
    p.B = B, p.T = T, p.H = H, p.Dk = Dk, p.Dv = Dv;
    p.scale = 1.0 / sqrt((double)Dk);
    p.q = tu_buf(nqk(&p)); p.k = tu_buf(nqk(&p)); p.v = tu_buf(nv(&p)); p.beta = tu_buf(nbt(&p));
    tu_fill(p.q, nqk(&p), 0, 1); tu_fill(p.k, nqk(&p), 0, 1); tu_fill(p.v, nv(&p), 0, 1);
    l2rows(p.q, nbt(&p), Dk); l2rows(p.k, nbt(&p), Dk);
    for (i = 0; i < nbt(&p); i++) p.beta[i] = (mn_real)(beta_max / (1.0 + exp(-mn_rng_normal(&tu_rng))));
    p.g = NULL;
    if (gated) {
        p.g = tu_buf(nbt(&p));
        for (i = 0; i < nbt(&p); i++) {
            double u = 2.0 + 2.0 * mn_rng_normal(&tu_rng);
            p.g[i] = (mn_real)logsigmoid(u < -4.9 ? -4.9 : u > 12 ? 12 : u);
        }
    }
    p.h0 = NULL;
    if (with_h0) { p.h0 = tu_buf(nst(&p)); tu_fill(p.h0, nst(&p), 0, 0.5); }
    p.dout = tu_buf(nv(&p)); tu_fill(p.dout, nv(&p), 0, 1);
    p.dht = NULL;
    if (with_dht) { p.dht = tu_buf(nst(&p)); tu_fill(p.dht, nst(&p), 0, 1); }
    return p;
}
static dgrads make_grads(const dprob* p) {
    dgrads g;
    g.q = tu_buf(nqk(p)); g.k = tu_buf(nqk(p)); g.v = tu_buf(nv(p)); g.beta = tu_buf(nbt(p));
    g.g = tu_buf(nbt(p)); g.h0 = tu_buf(nst(p));
    return g;
}

// ---- running a form: C == 0 is the naive recurrent form, C >= 1 the chunkwise form with chunk C
static size_t n_saved(const dprob* p, size_t C) {
    size_t NC = C ? (p->T + C - 1) / C : p->T;
    return p->B * p->H * NC * p->Dk * p->Dv;
}
static void forward(const dprob* p, size_t C, mn_real* out, mn_real* ht, mn_real* saved) {
    if (C == 0) {
        mn_delta_rule_forward_naive(out, ht, saved, p->q, p->k, p->v, p->beta, p->g, p->h0, p->B, p->T, p->H, p->Dk,
                                    p->Dv, p->scale);
    } else {
        mn_real* work = (mn_real*)malloc(mn_delta_rule_work_size(p->B, p->H, p->Dk, p->Dv, C) * sizeof(mn_real));
        mn_delta_rule_forward(out, ht, saved, p->q, p->k, p->v, p->beta, p->g, p->h0, p->B, p->T, p->H, p->Dk, p->Dv, C,
                              p->scale, work);
        free(work);
    }
}
// backward only (after forward filled `saved`), accumulating into gr (gr->g / gr->h0 may be NULL)
static void backward(const dprob* p, size_t C, const mn_real* saved, const dgrads* gr) {
    if (C == 0) {
        mn_real* dstate = (mn_real*)malloc((nst(p) ? nst(p) : 1) * sizeof(mn_real));
        mn_delta_rule_backward_naive(gr->q, gr->k, gr->v, gr->beta, gr->g, gr->h0, dstate, p->dout, p->dht, saved, p->q,
                                     p->k, p->v, p->beta, p->g, p->B, p->T, p->H, p->Dk, p->Dv, p->scale);
        free(dstate);
    } else {
        mn_real* work = (mn_real*)malloc(mn_delta_rule_work_size(p->B, p->H, p->Dk, p->Dv, C) * sizeof(mn_real));
        mn_delta_rule_backward(gr->q, gr->k, gr->v, gr->beta, gr->g, gr->h0, p->dout, p->dht, saved, p->q, p->k, p->v,
                               p->beta, p->g, p->B, p->T, p->H, p->Dk, p->Dv, C, p->scale, work);
        free(work);
    }
}
static void fwd_bwd(const dprob* p, size_t C, mn_real* out, mn_real* ht, const dgrads* gr) {
    mn_real* saved = (mn_real*)malloc((n_saved(p, C) ? n_saved(p, C) : 1) * sizeof(mn_real));
    forward(p, C, out, ht, saved);
    backward(p, C, saved, gr);
    free(saved);
}

// L = sum(out * dout) + sum(ht * dht), in double
static mn_real *L_out, *L_ht;
static double loss(const dprob* p, size_t C) {
    double L = 0;
    size_t i;
    forward(p, C, L_out, L_ht, NULL);
    for (i = 0; i < nv(p); i++) L += (double)L_out[i] * p->dout[i];
    if (p->dht)
        for (i = 0; i < nst(p); i++) L += (double)L_ht[i] * p->dht[i];
    return L;
}

static const char* form_name(size_t C) {
    static char s[32];
    if (C == 0) return "naive";
    snprintf(s, sizeof(s), "chunk%lu", (unsigned long)C);
    return s;
}

// central differences of loss() along every element of x against the analytic gradient g
static void fd_one(const char* what, const dprob* p, size_t C, mn_real* x, const mn_real* g, size_t n) {
    double* num = (double*)malloc(n * sizeof(double));
    double* ana = (double*)malloc(n * sizeof(double));
    size_t i;
    for (i = 0; i < n; i++) {
        mn_real x0 = x[i], xp = (mn_real)(x0 + FD_H), xm = (mn_real)(x0 - FD_H);
        x[i] = xp; double lp = loss(p, C);
        x[i] = xm; double lm = loss(p, C);
        x[i] = x0;
        num[i] = (lp - lm) / ((double)xp - (double)xm);
        ana[i] = g[i];
    }
    double e = tu_relerr(ana, num, n);
    TU_CHECK(e < TOL_FD, "%s %s: fd rel err %.3e", form_name(C), what, e);
    printf("    %-8s %-6s fd rel err %.2e\n", form_name(C), what, e);
    free(num);
    free(ana);
}

// 1. finite differences for every gradient of one form, plus the accumulate (+=) contract
static void test_fd(const char* label, double beta_max, int gated, size_t C) {
    dprob p = make_prob(2, 7, 2, 4, 3, beta_max, gated, 1, 1);
    dgrads gr = make_grads(&p), gr2 = make_grads(&p);
    mn_real* out = tu_buf(nv(&p));
    mn_real* ht = tu_buf(nst(&p));
    size_t i;
    printf("  %s, beta in (0,%g), %s\n", label, beta_max, form_name(C));
    L_out = tu_buf(nv(&p)); L_ht = tu_buf(nst(&p));
    fwd_bwd(&p, C, out, ht, &gr);
    fd_one("q", &p, C, p.q, gr.q, nqk(&p));
    fd_one("k", &p, C, p.k, gr.k, nqk(&p));
    fd_one("v", &p, C, p.v, gr.v, nv(&p));
    fd_one("beta", &p, C, p.beta, gr.beta, nbt(&p));
    if (gated) fd_one("g", &p, C, p.g, gr.g, nbt(&p));
    fd_one("h0", &p, C, p.h0, gr.h0, nst(&p));
    // accumulate: a second backward into gradients that start at x gives x + gradient
    {
        mn_real* bases[6];
        mn_real* g2[6];
        mn_real* g1[6];
        size_t ns[6], j;
        const char* names[6] = {"q", "k", "v", "beta", "g", "h0"};
        g1[0] = gr.q, g1[1] = gr.k, g1[2] = gr.v, g1[3] = gr.beta, g1[4] = gr.g, g1[5] = gr.h0;
        g2[0] = gr2.q, g2[1] = gr2.k, g2[2] = gr2.v, g2[3] = gr2.beta, g2[4] = gr2.g, g2[5] = gr2.h0;
        ns[0] = ns[1] = nqk(&p), ns[2] = nv(&p), ns[3] = ns[4] = nbt(&p), ns[5] = nst(&p);
        for (j = 0; j < 6; j++) {
            bases[j] = tu_buf(ns[j]);
            tu_fill(bases[j], ns[j], 0, 1);
            memcpy(g2[j], bases[j], ns[j] * sizeof(mn_real));
        }
        fwd_bwd(&p, C, out, ht, &gr2);
        for (j = 0; j < 6; j++) {
            if (j == 4 && !gated) continue;
            for (i = 0; i < ns[j]; i++) g2[j][i] -= bases[j][i];
            double e = tu_rel(g2[j], g1[j], ns[j]);
            TU_CHECK(e < TOL_EQ, "%s d%s does not accumulate: %.3e", form_name(C), names[j], e);
        }
        if (!gated) {       // g == NULL: dg is left alone
            for (i = 0; i < nbt(&p) && g2[4][i] == bases[4][i]; i++) {}
            TU_CHECK(i == nbt(&p), "%s: dg written although g == NULL", form_name(C));
        }
    }
}

// 2. chunkwise == recurrent (forward, final state, saved states, every gradient)
static void test_chunk_vs_naive(const char* label, double beta_max, int gated, int with_h0) {
    static const size_t Cs[4] = {1, 3, 16, 64};
    dprob p = make_prob(2, 37, 2, 16, 8, beta_max, gated, with_h0, 1);
    mn_real* out0 = tu_buf(nv(&p));
    mn_real* ht0 = tu_buf(nst(&p));
    mn_real* st0 = tu_buf(n_saved(&p, 0));
    dgrads g0 = make_grads(&p);
    size_t ci, j;
    forward(&p, 0, out0, ht0, st0);
    backward(&p, 0, st0, &g0);
    for (ci = 0; ci < 4; ci++) {
        size_t C = Cs[ci], NC = (p.T + C - 1) / C, n, bh, ns = p.Dk * p.Dv;
        mn_real* out = tu_buf(nv(&p));
        mn_real* ht = tu_buf(nst(&p));
        mn_real* hs = tu_buf(n_saved(&p, C));
        dgrads g1 = make_grads(&p);
        double e[9], worst = 0;
        forward(&p, C, out, ht, hs);
        backward(&p, C, hs, &g1);
        e[0] = tu_rel(out, out0, nv(&p));
        e[1] = tu_rel(ht, ht0, nst(&p));
        e[2] = tu_rel(g1.q, g0.q, nqk(&p));
        e[3] = tu_rel(g1.k, g0.k, nqk(&p));
        e[4] = tu_rel(g1.v, g0.v, nv(&p));
        e[5] = tu_rel(g1.beta, g0.beta, nbt(&p));
        e[6] = gated ? tu_rel(g1.g, g0.g, nbt(&p)) : 0;
        e[7] = tu_rel(g1.h0, g0.h0, nst(&p));
        // hs[n] is the naive form's saved state at t = n C
        e[8] = 0;
        for (bh = 0; bh < p.B * p.H; bh++)
            for (n = 0; n < NC; n++) {
                double x = tu_rel(hs + (bh * NC + n) * ns, st0 + (bh * p.T + n * C) * ns, ns);
                if (x > e[8]) e[8] = x;
            }
        for (j = 0; j < 9; j++) {
            static const char* nm[9] = {"out", "ht", "dq", "dk", "dv", "dbeta", "dg", "dh0", "hs"};
            TU_CHECK(e[j] < TOL_EQ, "%s chunk%lu vs naive: %s %.3e", label, (unsigned long)C, nm[j], e[j]);
            if (e[j] > worst) worst = e[j];
        }
        printf("  %-34s C=%-2lu  out %.1e ht %.1e dq %.1e dk %.1e dv %.1e dbeta %.1e dg %.1e dh0 %.1e hs %.1e\n",
               label, (unsigned long)C, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8]);
    }
}

// 3a. step token by token == forward (naive: bit for bit; chunkwise: to rounding)
static void test_step(double beta_max, int gated) {
    dprob p = make_prob(2, 13, 3, 8, 5, beta_max, gated, 1, 0);
    size_t B = p.B, T = p.T, H = p.H, Dk = p.Dk, Dv = p.Dv, t, b, h;
    mn_real* out = tu_buf(nv(&p)); mn_real* ht = tu_buf(nst(&p));
    mn_real* outc = tu_buf(nv(&p)); mn_real* htc = tu_buf(nst(&p));
    mn_real* outs = tu_buf(nv(&p)); mn_real* state = tu_buf(nst(&p));
    mn_real *qt = tu_buf(B * H * Dk), *kt = tu_buf(B * H * Dk), *vt = tu_buf(B * H * Dv), *bt = tu_buf(B * H),
            *gt = tu_buf(B * H), *ot = tu_buf(B * H * Dv);
    forward(&p, 0, out, ht, NULL);
    forward(&p, 4, outc, htc, NULL);
    memcpy(state, p.h0, nst(&p) * sizeof(mn_real));
    for (t = 0; t < T; t++) {
        // gather token t: (B,T,H,D) -> (B,H,D)
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++) {
                size_t row = (b * T + t) * H + h, bh = b * H + h;
                memcpy(qt + bh * Dk, p.q + row * Dk, Dk * sizeof(mn_real));
                memcpy(kt + bh * Dk, p.k + row * Dk, Dk * sizeof(mn_real));
                memcpy(vt + bh * Dv, p.v + row * Dv, Dv * sizeof(mn_real));
                bt[bh] = p.beta[row];
                gt[bh] = gated ? p.g[row] : 0;
            }
        mn_delta_rule_step(ot, state, qt, kt, vt, bt, gated ? gt : NULL, B, H, Dk, Dv, p.scale);
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++)
                memcpy(outs + ((b * T + t) * H + h) * Dv, ot + (b * H + h) * Dv, Dv * sizeof(mn_real));
    }
    double e1 = tu_rel(outs, out, nv(&p)), e2 = tu_rel(state, ht, nst(&p));
    double e3 = tu_rel(outs, outc, nv(&p)), e4 = tu_rel(state, htc, nst(&p));
    TU_CHECK(e1 == 0 && e2 == 0, "step vs naive forward: out %.3e ht %.3e", e1, e2);
    TU_CHECK(e3 < TOL_EQ && e4 < TOL_EQ, "step vs chunk4 forward: out %.3e ht %.3e", e3, e4);
    printf("  step (%s, beta in (0,%g)): vs naive out %.1e ht %.1e; vs chunk4 out %.1e ht %.1e\n",
           gated ? "gated" : "DeltaNet", beta_max, e1, e2, e3, e4);
}

// 3b. NULL arguments: h0 = NULL is zeros, dht = NULL is zeros, dg/dh0 = NULL are skipped; and a
// g of zeros is DeltaNet (g = NULL)
static void test_nulls(size_t C) {
    dprob p = make_prob(1, 11, 2, 6, 4, 1.0, 1, 0, 0), pz = p;
    mn_real *o1 = tu_buf(nv(&p)), *h1 = tu_buf(nst(&p)), *o2 = tu_buf(nv(&p)), *h2 = tu_buf(nst(&p));
    dgrads g1 = make_grads(&p), g2 = make_grads(&p);
    pz.h0 = tu_buf(nst(&p));       // zeros
    pz.dht = tu_buf(nst(&p));      // zeros
    fwd_bwd(&p, C, o1, h1, &g1);
    fwd_bwd(&pz, C, o2, h2, &g2);
    double e = tu_rel(o1, o2, nv(&p)) + tu_rel(h1, h2, nst(&p)) + tu_rel(g1.q, g2.q, nqk(&p)) +
               tu_rel(g1.k, g2.k, nqk(&p)) + tu_rel(g1.v, g2.v, nv(&p)) + tu_rel(g1.beta, g2.beta, nbt(&p)) +
               tu_rel(g1.g, g2.g, nbt(&p)) + tu_rel(g1.h0, g2.h0, nst(&p));
    TU_CHECK(e == 0, "%s: NULL h0/dht differ from zeros: %.3e", form_name(C), e);
    // dg and dh0 not needed
    {
        dgrads g3 = make_grads(&p);
        g3.g = NULL; g3.h0 = NULL;
        fwd_bwd(&p, C, o2, h2, &g3);
        e = tu_rel(g3.q, g1.q, nqk(&p)) + tu_rel(g3.k, g1.k, nqk(&p)) + tu_rel(g3.beta, g1.beta, nbt(&p));
        TU_CHECK(e == 0, "%s: dg = dh0 = NULL changes the other gradients: %.3e", form_name(C), e);
    }
    // g == 0 everywhere is DeltaNet
    {
        dprob pd = p;
        dgrads g4 = make_grads(&p), g5 = make_grads(&p);
        pd.g = tu_buf(nbt(&p));
        fwd_bwd(&pd, C, o1, h1, &g4);
        pd.g = NULL;
        fwd_bwd(&pd, C, o2, h2, &g5);
        e = tu_rel(o1, o2, nv(&p)) + tu_rel(h1, h2, nst(&p)) + tu_rel(g4.k, g5.k, nqk(&p)) +
            tu_rel(g4.beta, g5.beta, nbt(&p));
        TU_CHECK(e < TOL_EQ, "%s: g = 0 differs from g = NULL: %.3e", form_name(C), e);
    }
    // T = 0: ht = h0, dh0 += dht
    {
        dprob p0 = make_prob(1, 0, 2, 3, 2, 1.0, 1, 1, 1);
        mn_real *h = tu_buf(nst(&p0));
        dgrads g6 = make_grads(&p0);
        fwd_bwd(&p0, C, tu_buf(0), h, &g6);
        e = tu_rel(h, p0.h0, nst(&p0)) + tu_rel(g6.h0, p0.dht, nst(&p0));
        TU_CHECK(e == 0, "%s: T = 0 is not the identity: %.3e", form_name(C), e);
    }
}

// ---- 4. golden vectors
// (B,X,Y,D) -> (B,Y,X,D): swaps the middle axes, so BHTD <-> BTHD in either direction
static void swap12(mn_real* dst, const mn_real* src, size_t B, size_t X, size_t Y, size_t D) {
    size_t b, x, y;
    for (b = 0; b < B; b++)
        for (x = 0; x < X; x++)
            for (y = 0; y < Y; y++)
                memcpy(dst + ((b * Y + y) * X + x) * D, src + ((b * X + x) * Y + y) * D, D * sizeof(mn_real));
}
static const mn_vec_tensor* need(const mn_vec_file* f, const char* name) {
    const mn_vec_tensor* t = mn_vec_get(f, name);
    if (t == NULL) { printf("vector file has no tensor %s\n", name); exit(2); }
    return t;
}
// the file's tensor, in BTHD when the file is head-first (D = 1 for beta, g)
static mn_real* load(const mn_vec_file* f, const char* name, int head_first, size_t B, size_t T, size_t H, size_t D) {
    const mn_vec_tensor* t = need(f, name);
    mn_real* x = tu_buf(t->n);
    size_t i;
    for (i = 0; i < t->n; i++) x[i] = (mn_real)t->data[i];
    if (head_first && T > 0) {
        mn_real* y = tu_buf(t->n);
        swap12(y, x, B, H, T, D);
        return y;
    }
    return x;
}
// our (BTHD) result against the file's tensor, in the file's layout
static double cmp(const mn_vec_file* f, const char* name, const mn_real* x, int head_first, size_t B, size_t T,
                  size_t H, size_t D) {
    const mn_vec_tensor* t = need(f, name);
    mn_real* y = tu_buf(t->n);
    if (head_first && T > 0) swap12(y, x, B, T, H, D);
    else memcpy(y, x, t->n * sizeof(mn_real));
    return tu_rel_d(y, t->data, t->n);
}

static void test_vectors(const char* file) {
    static const size_t forms[4] = {0, 16, 64, 7};   // naive, chunk 16, chunk 64, chunk 7 (not a divisor of T)
    static mn_vec_file f;
    char path[512], err[256];
    size_t fi, j;
    double worst[8] = {0};
    const char* names[8] = {"out.o", "out.ht", "grad.q", "grad.k", "grad.v", "grad.beta", "grad.g", "grad.h0"};
    snprintf(path, sizeof(path), "%s/%s", vec_dir, file);
    if (mn_vec_load(&f, path, err, sizeof(err)) != 0) {
        TU_CHECK(0, "cannot load %s: %s", path, err);
        return;
    }
    const mn_vec_tensor* tq = need(&f, "q");
    const mn_vec_tensor* tv = need(&f, "v");
    const char* layout = mn_vec_attr(&f, "layout");
    int hf = layout && strcmp(layout, "BHTD") == 0, gated = mn_vec_get(&f, "g") != NULL;
    size_t B = tq->dims[0], T = hf ? tq->dims[2] : tq->dims[1], H = hf ? tq->dims[1] : tq->dims[2], Dk = tq->dims[3],
           Dv = tv->dims[3];
    dprob p;
    p.B = B, p.T = T, p.H = H, p.Dk = Dk, p.Dv = Dv;
    p.scale = mn_vec_attr_f(&f, "scale", NAN);
    TU_CHECK(p.scale == p.scale, "%s: no scale attr", file);
    p.q = load(&f, "q", hf, B, T, H, Dk);
    p.k = load(&f, "k", hf, B, T, H, Dk);
    p.v = load(&f, "v", hf, B, T, H, Dv);
    p.beta = load(&f, "beta", hf, B, T, H, 1);
    p.g = gated ? load(&f, "g", hf, B, T, H, 1) : NULL;
    p.h0 = load(&f, "h0", 0, 0, 0, 0, 0);
    p.dout = load(&f, "do", hf, B, T, H, Dv);
    p.dht = load(&f, "dht", 0, 0, 0, 0, 0);
    for (fi = 0; fi < 4; fi++) {
        mn_real* out = tu_buf(nv(&p));
        mn_real* ht = tu_buf(nst(&p));
        dgrads gr = make_grads(&p);
        double e[8];
        fwd_bwd(&p, forms[fi], out, ht, &gr);
        e[0] = cmp(&f, "out.o", out, hf, B, T, H, Dv);
        e[1] = cmp(&f, "out.ht", ht, 0, 0, 0, 0, 0);
        e[2] = cmp(&f, "grad.q", gr.q, hf, B, T, H, Dk);
        e[3] = cmp(&f, "grad.k", gr.k, hf, B, T, H, Dk);
        e[4] = cmp(&f, "grad.v", gr.v, hf, B, T, H, Dv);
        e[5] = cmp(&f, "grad.beta", gr.beta, hf, B, T, H, 1);
        e[6] = gated ? cmp(&f, "grad.g", gr.g, hf, B, T, H, 1) : 0;
        e[7] = cmp(&f, "grad.h0", gr.h0, 0, 0, 0, 0, 0);
        for (j = 0; j < 8; j++) {
            if (j == 6 && !gated) continue;
            TU_CHECK(e[j] <= TOL_VEC, "%s %s %s: %.3e", file, form_name(forms[fi]), names[j], e[j]);
            if (e[j] > worst[j]) worst[j] = e[j];
        }
    }
    printf("  %-34s", file);
    for (j = 0; j < 8; j++)
        if (j != 6 || gated) printf(" %s %.1e", names[j], worst[j]);
    printf("\n");
    mn_vec_free(&f);
}

int main(int argc, char** argv) {
    static const size_t fd_forms[4] = {0, 1, 3, 4};
    size_t i;
    if (argc > 1) vec_dir = argv[1];
    mn_rng_seed(&tu_rng, 20240601);
    printf("finite differences (B=2 T=7 H=2 Dk=4 Dv=3, h0 and dht on)\n");
    for (i = 0; i < 4; i++) {
        test_fd("gated", 1.0, 1, fd_forms[i]);
        test_fd("gated, negative eigenvalues", 2.0, 1, fd_forms[i]);
        test_fd("DeltaNet (g = NULL)", 1.0, 0, fd_forms[i]);
        test_fd("DeltaNet, negative eigenvalues", 2.0, 0, fd_forms[i]);
    }
    tu_free_all();
    printf("chunkwise vs naive recurrent (B=2 T=37 H=2 Dk=16 Dv=8)\n");
    test_chunk_vs_naive("gated, beta (0,1), h0", 1.0, 1, 1);
    test_chunk_vs_naive("gated, beta (0,2), h0", 2.0, 1, 1);
    test_chunk_vs_naive("gated, beta (0,1), no h0", 1.0, 1, 0);
    test_chunk_vs_naive("DeltaNet, beta (0,1), h0", 1.0, 0, 1);
    test_chunk_vs_naive("DeltaNet, beta (0,2), no h0", 2.0, 0, 0);
    tu_free_all();
    printf("step and NULL arguments\n");
    test_step(1.0, 1);
    test_step(2.0, 1);
    test_step(1.0, 0);
    test_nulls(0);
    test_nulls(3);
    tu_free_all();
    printf("golden vectors (%s; worst over naive, chunk 16, 64, 7)\n", vec_dir);
    test_vectors("delta_rule.vec");
    test_vectors("gated_delta_rule_beta01.vec");
    test_vectors("gated_delta_rule_beta02.vec");
    test_vectors("gated_delta_rule_beta01_T256.vec");
    tu_free_all();
    return tu_finish("test_delta");
}
