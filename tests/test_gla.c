// Tests of mesanet.h >>gla, the linear-attention family (G = 0 linear attention, G = 1 simple GLA,
// G = Dk GLA), every form (recurrent, chunkwise, step):
//   - finite differences for every gradient (dq, dk, dv, dg, dh0, with dht upstream) of the
//     recurrent form and the chunkwise form at several chunk sizes (double build only);
//   - chunkwise == recurrent, forward and every gradient, C = 1, 2, 3, 5, 16, 37, 64 at T = 37,
//     including gates strong enough that chunks take the unfactored path (MN__GLA_SPAN);
//   - step == forward token by token; the backwards accumulate (+=); NULL h0 / dht / dg / dh0; T = 0;
//   - the golden vectors linear_attn.vec, simple_gla.vec, gla.vec: outputs and all gradients,
//     both forms, at 1e-10 (double).
// Double: cc -std=c99 -O2 -Wall -Wextra -Werror -DMESANET_DOUBLE -I. tests/test_gla.c -lm
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
#define TOL_EQ 1e-12     // two forms of the op, same inputs (measured: <= 1.6e-15)
#define TOL_VEC 1e-10    // vectors README: suggested tolerance for a float64 implementation (measured: <= 8.3e-16)
#define TOL_ACC 1e-14    // (1 + dx) - 1 vs dx
#else
#define TOL_EQ 5e-6      // float: chunk vs recurrent (measured: <= 7.4e-7)
#define TOL_VEC 5e-6     // float inputs and arithmetic vs the float64 references (measured: <= 2.9e-7)
#define TOL_ACC 1e-6
#endif

// log-decays as in the vectors: logsigmoid(u), u ~ N(2, 2^2), so g in (-inf, 0), mostly near 0.
// strong != 0: about one gate in three is -400 instead, which pushes chunks past MN__GLA_SPAN.
static void fill_gates(mn_real* g, size_t n, int strong) {
    size_t i;
    for (i = 0; i < n; i++) {
        double u = 2 + 2 * mn_rng_normal(&tu_rng);
        g[i] = (mn_real)(fmin(u, 0) - log1p(exp(-fabs(u))));
        if (strong && mn_rng_uniform(&tu_rng) < 0.33) g[i] = -400;
    }
}

// ---- one problem: inputs, upstream gradients, and what a form computes from them
typedef struct {
    size_t B, T, H, Dk, Dv, G;
    double scale;
    mn_real *q, *k, *v, *g, *h0;    // (B,T,H,Dk) x2, (B,T,H,Dv), (B,T,H,G) or NULL, (B,H,Dk,Dv) or NULL
    mn_real *dout, *dht;            // (B,T,H,Dv), (B,H,Dk,Dv) or NULL
} prob;
typedef struct {
    mn_real *o, *ht;                // forward
    mn_real *dq, *dk, *dv, *dg, *dh0; // backward (accumulated)
} result;
static size_t n_qk(const prob* p) { return p->B * p->T * p->H * p->Dk; }
static size_t n_v(const prob* p) { return p->B * p->T * p->H * p->Dv; }
static size_t n_g(const prob* p) { return p->B * p->T * p->H * p->G; }
static size_t n_s(const prob* p) { return p->B * p->H * p->Dk * p->Dv; }

static prob make_prob(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, size_t G, double scale, int strong) {
    prob p;
    p.B = B; p.T = T; p.H = H; p.Dk = Dk; p.Dv = Dv; p.G = G; p.scale = scale;
    p.q = tu_buf(n_qk(&p)); p.k = tu_buf(n_qk(&p)); p.v = tu_buf(n_v(&p));
    p.g = G ? tu_buf(n_g(&p)) : NULL;
    p.h0 = tu_buf(n_s(&p)); p.dout = tu_buf(n_v(&p)); p.dht = tu_buf(n_s(&p));
    tu_fill(p.q, n_qk(&p), 0, 1); tu_fill(p.k, n_qk(&p), 0, 1); tu_fill(p.v, n_v(&p), 0, 1);
    if (G) fill_gates(p.g, n_g(&p), strong);
    tu_fill(p.h0, n_s(&p), 0, 0.5); tu_fill(p.dout, n_v(&p), 0, 1); tu_fill(p.dht, n_s(&p), 0, 1);
    return p;
}
// C == 0: the recurrent form; else the chunkwise form with chunk length C.
static void run_forward(const prob* p, size_t C, mn_real* o, mn_real* ht) {
    if (C == 0) mn_gla_forward_recurrent(o, ht, p->q, p->k, p->v, p->g, p->h0, p->B, p->T, p->H, p->Dk, p->Dv, p->G,
                                         p->scale);
    else mn_gla_forward(o, ht, p->q, p->k, p->v, p->g, p->h0, p->B, p->T, p->H, p->Dk, p->Dv, p->G, p->scale, C,
                        tu_work(mn_gla_work_size(p->B, p->T, p->H, p->Dk, p->Dv, C)));
}
static void run_backward(const prob* p, size_t C, result* r) {
    if (C == 0)
        mn_gla_backward_recurrent(r->dq, r->dk, r->dv, r->dg, r->dh0, p->dout, p->dht, p->q, p->k, p->v, p->g, p->h0,
                                  p->B, p->T, p->H, p->Dk, p->Dv, p->G, p->scale,
                                  tu_work(mn_gla_work_size_recurrent(p->T, p->Dk, p->Dv)));
    else
        mn_gla_backward(r->dq, r->dk, r->dv, r->dg, r->dh0, p->dout, p->dht, p->q, p->k, p->v, p->g, p->h0, p->B, p->T,
                        p->H, p->Dk, p->Dv, p->G, p->scale, C,
                        tu_work(mn_gla_work_size(p->B, p->T, p->H, p->Dk, p->Dv, C)));
}
// Fresh buffers, forward and backward of one form.
static result run(const prob* p, size_t C) {
    result r;
    r.o = tu_buf(n_v(p)); r.ht = tu_buf(n_s(p));
    r.dq = tu_buf(n_qk(p)); r.dk = tu_buf(n_qk(p)); r.dv = tu_buf(n_v(p));
    r.dg = p->G ? tu_buf(n_g(p)) : NULL; r.dh0 = tu_buf(n_s(p));
    run_forward(p, C, r.o, r.ht);
    run_backward(p, C, &r);
    return r;
}
// Worst relative difference over every output and gradient of two runs; names the worst one.
static double compare(const prob* p, const result* a, const result* b, const char** worst) {
    const mn_real* x[7] = { a->o, a->ht, a->dq, a->dk, a->dv, a->dg, a->dh0 };
    const mn_real* y[7] = { b->o, b->ht, b->dq, b->dk, b->dv, b->dg, b->dh0 };
    static const char* names[7] = { "o", "ht", "dq", "dk", "dv", "dg", "dh0" };
    size_t n[7], i;
    double e = 0;
    n[0] = n_v(p); n[1] = n_s(p); n[2] = n_qk(p); n[3] = n_qk(p); n[4] = n_v(p); n[5] = n_g(p); n[6] = n_s(p);
    *worst = "-";
    for (i = 0; i < 7; i++) {
        double ei = x[i] ? tu_rel(x[i], y[i], n[i]) : 0;
        if (!(ei <= e)) { e = ei; *worst = names[i]; }
    }
    return e;
}
static const char* gname(const prob* p) { return p->G == 0 ? "linear_attn" : p->G == 1 ? "simple_gla" : "gla"; }

#ifdef MESANET_DOUBLE
// ---- finite differences: L = sum(o * dout) + sum(ht * dht); central difference, h = 1e-6
static const prob* fd_p;
static size_t fd_C;
static double loss(void) {
    const prob* p = fd_p;
    size_t i, n0 = tu_mark(); double L = 0;
    mn_real* o = tu_buf(n_v(p)); mn_real* ht = tu_buf(n_s(p));
    run_forward(p, fd_C, o, ht);
    for (i = 0; i < n_v(p); i++) L += (double)o[i] * p->dout[i];
    for (i = 0; i < n_s(p); i++) L += (double)ht[i] * p->dht[i];
    tu_free_to(n0);                  // give this call's buffers back right away
    return L;
}
static double fd_one(const char* what, mn_real* x, size_t n, const mn_real* grad) {
    mn_real* num = tu_buf(n);
    size_t i; double h = 1e-6;
    for (i = 0; i < n; i++) {
        mn_real x0 = x[i];
        x[i] = x0 + h; double lp = loss();
        x[i] = x0 - h; double lm = loss();
        x[i] = x0;
        num[i] = (lp - lm) / (2 * h);
    }
    double e = tu_rel(grad, num, n);
    TU_CHECK(e < 1e-7, "%s: finite-difference rel err %.3e", what, e);
    return e;
}
// Every gradient of one form against finite differences.
static void fd_form(prob* p, size_t C, const char* tag) {
    result r = run(p, C);
    char what[128];
    double e = 0;
    fd_p = p; fd_C = C;
#define FD(x, g, n) do { snprintf(what, sizeof what, "%s %s C=%zu d%s", gname(p), tag, C, #x); \
                         e = fmax(e, fd_one(what, p->x, n, r.g)); } while (0)
    FD(q, dq, n_qk(p)); FD(k, dk, n_qk(p)); FD(v, dv, n_v(p)); FD(h0, dh0, n_s(p));
    if (p->G) FD(g, dg, n_g(p));
#undef FD
    printf("  fd %-11s %-7s C=%-2zu worst rel err %.2e\n", gname(p), tag, C, e);
}
static void test_finite_differences(void) {
    static const size_t Cs[] = { 0, 1, 3, 16 };   // 0 = recurrent
    size_t gi, ci, Dk = 4;
    int strong;
    for (strong = 0; strong < 2; strong++)
        for (gi = 0; gi < 3; gi++) {
            size_t G = gi == 0 ? 0 : gi == 1 ? 1 : Dk;
            if (strong && G == 0) continue;       // no gates, nothing strong
            prob p = make_prob(2, 7, 2, Dk, 3, G, 0.7, strong);
            for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
                if (strong && Cs[ci] != 0 && Cs[ci] != 3) continue;
                fd_form(&p, Cs[ci], strong ? "strong" : "");
            }
            tu_free_all();
        }
}
#endif

// ---- chunkwise == recurrent: forward and all gradients, T = 37, several chunk lengths
static void test_chunk_vs_recurrent(void) {
    static const size_t Cs[] = { 1, 2, 3, 5, 16, 37, 64 };
    size_t gi, ci, Dk = 8;
    int strong;
    for (strong = 0; strong < 2; strong++)
        for (gi = 0; gi < 3; gi++) {
            size_t G = gi == 0 ? 0 : gi == 1 ? 1 : Dk;
            if (strong && G == 0) continue;
            prob p = make_prob(2, 37, 3, Dk, 5, G, 0.35, strong);
            result ref = run(&p, 0);
            double worst = 0;
            for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
                const char* which;
                result r = run(&p, Cs[ci]);
                double e = compare(&p, &r, &ref, &which);
                TU_CHECK(e < TOL_EQ, "%s%s chunk C=%zu vs recurrent: %s rel err %.3e", gname(&p),
                         strong ? " strong" : "", Cs[ci], which, e);
                worst = fmax(worst, e);
            }
            printf("  chunk vs recurrent %-11s%s T=37 C=1..64: worst %.2e\n", gname(&p), strong ? " strong gates" : "",
                   worst);
            tu_free_all();
        }
}

// ---- NULL h0 / dht mean zeros; NULL dg / dh0 mean "not needed"; the backwards accumulate
static void test_nulls_and_accumulation(void) {
    size_t gi, ci, Dk = 6;
    double acc_worst = 0;
    for (gi = 0; gi < 3; gi++)
        for (ci = 0; ci < 2; ci++) {
            size_t G = gi == 0 ? 0 : gi == 1 ? 1 : Dk, C = ci ? 4 : 0, i;
            prob p = make_prob(2, 11, 2, Dk, 3, G, 0.5, 0);
            const char* tag = C ? "chunk" : "recurrent";
            const char* which;
            // zero buffers vs NULL
            memset(p.h0, 0, n_s(&p) * sizeof(mn_real)); memset(p.dht, 0, n_s(&p) * sizeof(mn_real));
            result a = run(&p, C);
            prob pn = p; pn.h0 = NULL; pn.dht = NULL;
            result b = run(&pn, C);
            double e = compare(&p, &b, &a, &which);
            TU_CHECK(e == 0, "%s %s: NULL h0/dht differs from zeros (%s %.3e)", gname(&p), tag, which, e);
            // NULL dg and dh0: the other gradients are unchanged
            tu_fill(p.h0, n_s(&p), 0, 0.5); tu_fill(p.dht, n_s(&p), 0, 1);
            a = run(&p, C);
            b = a; b.dq = tu_buf(n_qk(&p)); b.dk = tu_buf(n_qk(&p)); b.dv = tu_buf(n_v(&p)); b.dg = NULL; b.dh0 = NULL;
            run_backward(&p, C, &b);
            e = fmax(tu_rel(b.dq, a.dq, n_qk(&p)), fmax(tu_rel(b.dk, a.dk, n_qk(&p)), tu_rel(b.dv, a.dv, n_v(&p))));
            TU_CHECK(e == 0, "%s %s: NULL dg/dh0 changes the other gradients (%.3e)", gname(&p), tag, e);
            // accumulation: start from 1 everywhere, the result is 1 + the fresh gradient
            b = a;
            b.dq = tu_buf(n_qk(&p)); b.dk = tu_buf(n_qk(&p)); b.dv = tu_buf(n_v(&p)); b.dh0 = tu_buf(n_s(&p));
            b.dg = G ? tu_buf(n_g(&p)) : NULL;
            for (i = 0; i < n_qk(&p); i++) b.dq[i] = b.dk[i] = 1;
            for (i = 0; i < n_v(&p); i++) b.dv[i] = 1;
            for (i = 0; i < n_s(&p); i++) b.dh0[i] = 1;
            for (i = 0; G && i < n_g(&p); i++) b.dg[i] = 1;
            run_backward(&p, C, &b);
            for (i = 0; i < n_qk(&p); i++) { b.dq[i] -= 1; b.dk[i] -= 1; }
            for (i = 0; i < n_v(&p); i++) b.dv[i] -= 1;
            for (i = 0; i < n_s(&p); i++) b.dh0[i] -= 1;
            for (i = 0; G && i < n_g(&p); i++) b.dg[i] -= 1;
            e = compare(&p, &b, &a, &which);
            TU_CHECK(e < TOL_ACC, "%s %s: backward does not accumulate (%s %.3e)", gname(&p), tag, which, e);
            acc_worst = fmax(acc_worst, e);
            tu_free_all();
        }
    printf("  NULL h0/dht/dg/dh0 ok; accumulation (+=) worst %.2e\n", acc_worst);
}

// ---- an empty sequence (T = 0): ht = h0 and dh0 = dht, in every form
static void test_empty(void) {
    size_t gi, ci;
    for (gi = 0; gi < 3; gi++)
        for (ci = 0; ci < 2; ci++) {
            size_t G = gi == 0 ? 0 : gi == 1 ? 1 : 4, C = ci ? 16 : 0;
            prob p = make_prob(2, 0, 2, 4, 3, G, 0.5, 0);
            result r = run(&p, C);
            double e = fmax(tu_rel(r.ht, p.h0, n_s(&p)), tu_rel(r.dh0, p.dht, n_s(&p)));
            TU_CHECK(e == 0, "%s %s T=0: ht != h0 or dh0 != dht (%.3e)", gname(&p), C ? "chunk" : "recurrent", e);
            tu_free_all();
        }
}

// ---- step == forward token by token (against both forms), final state == ht
static void test_step(void) {
    size_t gi, Dk = 5;
    for (gi = 0; gi < 3; gi++) {
        size_t G = gi == 0 ? 0 : gi == 1 ? 1 : Dk, t, b, B = 2, T = 13, H = 3, Dv = 4;
        prob p = make_prob(B, T, H, Dk, Dv, G, 0.4, 0);
        mn_real* o_r = tu_buf(n_v(&p)); mn_real* ht_r = tu_buf(n_s(&p));
        mn_real* o_c = tu_buf(n_v(&p)); mn_real* ht_c = tu_buf(n_s(&p));
        mn_real* o_s = tu_buf(n_v(&p)); mn_real* state = tu_copy(p.h0, n_s(&p));
        mn_real *qt = tu_buf(B * H * Dk), *kt = tu_buf(B * H * Dk), *vt = tu_buf(B * H * Dv), *gt = tu_buf(B * H * Dk),
                *ot = tu_buf(B * H * Dv);
        run_forward(&p, 0, o_r, ht_r);
        run_forward(&p, 4, o_c, ht_c);
        for (t = 0; t < T; t++) {
            // token t of every sequence: rows (b,t,:) of the [B,T,H,D] tensors
            for (b = 0; b < B; b++) {
                size_t row = (b * T + t) * H;
                memcpy(qt + b * H * Dk, p.q + row * Dk, H * Dk * sizeof(mn_real));
                memcpy(kt + b * H * Dk, p.k + row * Dk, H * Dk * sizeof(mn_real));
                memcpy(vt + b * H * Dv, p.v + row * Dv, H * Dv * sizeof(mn_real));
                if (G) memcpy(gt + b * H * G, p.g + row * G, H * G * sizeof(mn_real));
            }
            mn_gla_step(ot, state, qt, kt, vt, G ? gt : NULL, B, H, Dk, Dv, G, p.scale);
            for (b = 0; b < B; b++) memcpy(o_s + (b * T + t) * H * Dv, ot + b * H * Dv, H * Dv * sizeof(mn_real));
        }
        double e1 = fmax(tu_rel(o_s, o_r, n_v(&p)), tu_rel(state, ht_r, n_s(&p)));
        double e2 = fmax(tu_rel(o_s, o_c, n_v(&p)), tu_rel(state, ht_c, n_s(&p)));
        TU_CHECK(e1 == 0, "%s step vs recurrent forward: %.3e", gname(&p), e1);
        TU_CHECK(e2 < TOL_EQ, "%s step vs chunkwise forward: %.3e", gname(&p), e2);
        printf("  step %-11s vs recurrent %.2e, vs chunkwise (C=4) %.2e\n", gname(&p), e1, e2);
        tu_free_all();
    }
}

// ---- golden vectors: outputs and every gradient, recurrent form and chunkwise C = 16 and 5
static void test_vectors(const char* dir) {
    static const char* files[3] = { "linear_attn", "simple_gla", "gla" };
    static const char* gates[3] = { NULL, "g", "gk" };
    static const size_t Cs[3] = { 0, 16, 5 };
    size_t fi, ci;
    for (fi = 0; fi < 3; fi++) {
        static mn_vec_file f;
        char path[512], err[256];
        const mn_vec_tensor* q;
        prob p;
        double worst[7] = { 0 };
        static const char* names[7] = { "out.o", "out.ht", "grad.q", "grad.k", "grad.v", "grad.g", "grad.h0" };
        snprintf(path, sizeof path, "%s/%s.vec", dir, files[fi]);
        if (mn_vec_load(&f, path, err, sizeof err) != 0) { TU_CHECK(0, "cannot load %s: %s", path, err); continue; }
        TU_CHECK(strcmp(f.op, files[fi]) == 0, "%s: op is %s", path, f.op);
        q = mn_vec_get(&f, "q");
        if (q == NULL || q->ndim != 4) { TU_CHECK(0, "%s: no q", path); mn_vec_free(&f); continue; }
        p.B = q->dims[0]; p.T = q->dims[1]; p.H = q->dims[2]; p.Dk = q->dims[3];
        p.Dv = mn_vec_get(&f, "v") ? mn_vec_get(&f, "v")->dims[3] : 1;
        p.G = fi == 0 ? 0 : fi == 1 ? 1 : p.Dk;
        p.scale = mn_vec_attr_f(&f, "scale", NAN);
        TU_CHECK(p.scale == p.scale, "%s: attr scale", path);
        p.q = vt_real(&f, "q", n_qk(&p)); p.k = vt_real(&f, "k", n_qk(&p)); p.v = vt_real(&f, "v", n_v(&p));
        p.g = p.G ? vt_real(&f, gates[fi], n_g(&p)) : NULL;
        p.h0 = vt_real(&f, "h0", n_s(&p)); p.dout = vt_real(&f, "do", n_v(&p)); p.dht = vt_real(&f, "dht", n_s(&p));
        for (ci = 0; ci < 3; ci++) {
            result r = run(&p, Cs[ci]);
            const mn_real* got[7] = { r.o, r.ht, r.dq, r.dk, r.dv, r.dg, r.dh0 };
            size_t n[7], i;
            char gn[32];
            n[0] = n_v(&p); n[1] = n_s(&p); n[2] = n_qk(&p); n[3] = n_qk(&p); n[4] = n_v(&p); n[5] = n_g(&p);
            n[6] = n_s(&p);
            for (i = 0; i < 7; i++) {
                const char* name = names[i];
                if (i == 5) {
                    if (!p.G) continue;
                    snprintf(gn, sizeof gn, "grad.%s", gates[fi]);
                    name = gn;
                }
                const double* want = vt_get(&f, name, n[i]);
                if (want == NULL) continue;
                double e = tu_rel_d(got[i], want, n[i]);
                TU_CHECK(e <= TOL_VEC, "%s %s form C=%zu: %s rel err %.3e", files[fi], Cs[ci] ? "chunk" : "recurrent",
                         Cs[ci], name, e);
                if (!(e <= worst[i])) worst[i] = e;
            }
        }
        printf("  %-16s", files[fi]);
        for (ci = 0; ci < 7; ci++) {
            if (ci == 5 && !p.G) continue;
            printf(" %s %.1e", ci == 5 ? (fi == 1 ? "grad.g" : "grad.gk") : names[ci], worst[ci]);
        }
        printf("   (worst of recurrent, chunk 16, chunk 5)\n");
        mn_vec_free(&f);
        tu_free_all();
    }
}

int main(int argc, char** argv) {
    mn_rng_seed(&tu_rng, 20240611);
#ifdef MESANET_DOUBLE
    printf("finite differences (double):\n");
    test_finite_differences();
#else
    printf("float build: finite differences skipped (they need -DMESANET_DOUBLE)\n");
#endif
    printf("chunkwise vs recurrent:\n");
    test_chunk_vs_recurrent();
    test_nulls_and_accumulation();
    test_empty();
    printf("step:\n");
    test_step();
    printf("golden vectors (max|a-b|/max|b|):\n");
    test_vectors(argc > 1 ? argv[1] : "reference/vectors");
    return tu_finish("test_gla");
}
