// Tests of wip/xlstm.h: xLSTM's mLSTM (parallel, recurrent, chunkwise, step) and sLSTM (forward,
// backward, step):
//   - finite differences for every gradient (double build only): the mLSTM parallel and chunkwise
//     backwards in exact mode (dq, dk, dv, di, df, and dC0, dn0 of the chunkwise form), with eps large
//     enough that the path through the stabiliser m counts; the detached mode against finite
//     differences of the forward with the normaliser and m frozen; sLSTM dx, dR, db, dy0, dc0, dn0;
//   - chunkwise == parallel, forward and both backwards, C = 1, 3, 16, 64 at T = 37: with eps = 0
//     (the forms differ only through eps e^m), and with m0 = -inf (then they are the same function);
//   - recurrent == parallel (eps = 0, or m0 = -inf), recurrent == chunkwise with an initial state,
//     step == recurrent token by token; the backwards accumulate (+=); NULL states; T = 0;
//   - sLSTM forward against an unstabilised implementation written here, step == forward;
//   - the golden vectors mlstm_parallel, mlstm_parallel_custbw, mlstm_recurrent, slstm at 1e-10 (double).
// Double: cc -std=c99 -O2 -Wall -Wextra -Werror -DMESANET_DOUBLE -I. -Itests tests/test_xlstm.c -lm
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
#define TOL_EQ 1e-12     // two forms of the op, same inputs (measured: <= 6.3e-15)
#define TOL_EPS 1e-5     // forms whose stabilisers differ, eps = 1e-6: the eps e^m effect (measured: <= 1.5e-7)
#define TOL_VEC 1e-10    // vectors README: suggested tolerance for a float64 implementation (measured: <= 4.8e-15)
#define TOL_ACC 1e-14    // (1 + dx) - 1 vs dx
#else
#define TOL_EQ 2e-5      // float: chunk vs parallel, hard gates (measured: <= 3.8e-6)
#define TOL_EPS 5e-5     // (measured: <= 4.3e-6)
#define TOL_VEC 1e-5     // float inputs and arithmetic vs the float64 references (measured: <= 1.4e-6)
#define TOL_ACC 1e-6
#endif

// (B,X,Y,D) -> (B,Y,X,D), as the checker's cv_swap_mid: head-first <-> [B,T,H,D], [S,B,G] <-> [B,S,G]
static void swap_mid(mn_real* dst, const mn_real* src, size_t B, size_t X, size_t Y, size_t D) {
    size_t b, x, y;
    for (b = 0; b < B; b++)
        for (x = 0; x < X; x++)
            for (y = 0; y < Y; y++)
                memcpy(dst + ((b * Y + y) * X + x) * D, src + ((b * X + x) * Y + y) * D, D * sizeof(mn_real));
}

// =============================================================================================== mLSTM

// One problem: inputs, initial state (or NULL), upstream gradient.
typedef struct {
    size_t B, T, H, Dk, Dv;
    double scale, eps;
    mn_real *q, *k, *v, *ig, *fg;   // (B,T,H,Dk) x2, (B,T,H,Dv), (B,T,H) x2
    mn_real *C0, *n0, *m0;          // (B,H,Dk,Dv), (B,H,Dk), (B,H) or NULL
    mn_real* dout;                  // (B,T,H,Dv)
} mprob;
typedef struct {
    mn_real *o, *norm, *stab, *Ct, *nt, *mt;
    mn_real *dq, *dk, *dv, *di, *df, *dC0, *dn0;
} mres;
static size_t n_qk(const mprob* p) { return p->B * p->T * p->H * p->Dk; }
static size_t n_v(const mprob* p) { return p->B * p->T * p->H * p->Dv; }
static size_t n_g(const mprob* p) { return p->B * p->T * p->H; }
static size_t n_C(const mprob* p) { return p->B * p->H * p->Dk * p->Dv; }
static size_t n_n(const mprob* p) { return p->B * p->H * p->Dk; }
static size_t n_m(const mprob* p) { return p->B * p->H; }

// Gates: regime 0 as the vectors (i ~ N(-1,1), f ~ N(3,1): slow forgetting, the floor active in about a
// third of the rows); regime 1 hard (i ~ N(0,3), f ~ N(0,3): strong forgetting, the stabiliser switches
// branch often, large input gates). state: a random initial state (C0, n0 and a finite m0).
static mprob make_mprob(size_t B, size_t T, size_t H, size_t Dk, size_t Dv, double eps, int regime, int state) {
    mprob p;
    memset(&p, 0, sizeof p);
    p.B = B; p.T = T; p.H = H; p.Dk = Dk; p.Dv = Dv; p.scale = 1.0 / sqrt((double)Dk); p.eps = eps;
    p.q = tu_buf(n_qk(&p)); p.k = tu_buf(n_qk(&p)); p.v = tu_buf(n_v(&p)); p.ig = tu_buf(n_g(&p));
    p.fg = tu_buf(n_g(&p));
    p.dout = tu_buf(n_v(&p));
    tu_fill(p.q, n_qk(&p), 0, 1); tu_fill(p.k, n_qk(&p), 0, 1); tu_fill(p.v, n_v(&p), 0, 1);
    if (regime == 0) { tu_fill(p.ig, n_g(&p), -1, 1); tu_fill(p.fg, n_g(&p), 3, 1); }
    else { tu_fill(p.ig, n_g(&p), 0, 3); tu_fill(p.fg, n_g(&p), 0, 3); }
    tu_fill(p.dout, n_v(&p), 0, 1);
    if (state) {
        p.C0 = tu_buf(n_C(&p)); p.n0 = tu_buf(n_n(&p)); p.m0 = tu_buf(n_m(&p));
        tu_fill(p.C0, n_C(&p), 0, 0.5); tu_fill(p.n0, n_n(&p), 0, 0.5); tu_fill(p.m0, n_m(&p), 0.5, 1);
    }
    return p;
}
static mres alloc_mres(const mprob* p) {
    mres r;
    r.o = tu_buf(n_v(p)); r.norm = tu_buf(n_g(p)); r.stab = tu_buf(n_g(p));
    r.Ct = tu_buf(n_C(p)); r.nt = tu_buf(n_n(p)); r.mt = tu_buf(n_m(p));
    r.dq = tu_buf(n_qk(p)); r.dk = tu_buf(n_qk(p)); r.dv = tu_buf(n_v(p)); r.di = tu_buf(n_g(p)); r.df = tu_buf(n_g(p));
    r.dC0 = tu_buf(n_C(p)); r.dn0 = tu_buf(n_n(p));
    return r;
}
// C == 0: the parallel form (no state; the problem's state is ignored); else chunkwise with chunk C.
static void m_forward(const mprob* p, size_t C, mres* r) {
    if (C == 0)
        mn_mlstm_forward_parallel(r->o, r->norm, r->stab, p->q, p->k, p->v, p->ig, p->fg, p->B, p->T, p->H, p->Dk,
                                  p->Dv, p->scale, p->eps, tu_work(mn_mlstm_work_size_parallel(p->B, p->T, p->H)));
    else
        mn_mlstm_forward(r->o, r->norm, r->stab, r->Ct, r->nt, r->mt, p->q, p->k, p->v, p->ig, p->fg, p->C0, p->n0,
                         p->m0, p->B, p->T, p->H, p->Dk, p->Dv, p->scale, p->eps, C,
                         tu_work(mn_mlstm_work_size(p->B, p->T, p->H, p->Dk, p->Dv, C)));
}
static void m_backward(const mprob* p, size_t C, int mode, mres* r) {
    if (C == 0)
        mn_mlstm_backward_parallel(r->dq, r->dk, r->dv, r->di, r->df, p->dout, p->q, p->k, p->v, p->ig, p->fg, p->B,
                                   p->T, p->H, p->Dk, p->Dv, p->scale, p->eps, mode,
                                   tu_work(mn_mlstm_work_size_parallel(p->B, p->T, p->H)));
    else
        mn_mlstm_backward(r->dq, r->dk, r->dv, r->di, r->df, r->dC0, r->dn0, p->dout, p->q, p->k, p->v, p->ig, p->fg,
                          p->C0, p->n0, p->m0, p->B, p->T, p->H, p->Dk, p->Dv, p->scale, p->eps, C, mode,
                          tu_work(mn_mlstm_work_size(p->B, p->T, p->H, p->Dk, p->Dv, C)));
}
static mres m_run(const mprob* p, size_t C, int mode) {
    mres r = alloc_mres(p);
    m_forward(p, C, &r);
    m_backward(p, C, mode, &r);
    return r;
}
// Worst relative difference over the gradients (and o; norm/stab when with_ns) of two runs.
static double m_compare(const mprob* p, const mres* a, const mres* b, int with_ns, int with_state, const char** worst) {
    const mn_real* x[12] = { a->o, a->dq, a->dk, a->dv, a->di, a->df, a->norm, a->stab, a->Ct, a->nt, a->mt, NULL };
    const mn_real* y[12] = { b->o, b->dq, b->dk, b->dv, b->di, b->df, b->norm, b->stab, b->Ct, b->nt, b->mt, NULL };
    static const char* names[11] = { "o", "dq", "dk", "dv", "di", "df", "norm", "stab", "Ct", "nt", "mt" };
    size_t n[11], i, last = with_state ? 11 : with_ns ? 8 : 6;
    double e = 0;
    n[0] = n_v(p); n[1] = n_qk(p); n[2] = n_qk(p); n[3] = n_v(p); n[4] = n_g(p); n[5] = n_g(p); n[6] = n_g(p);
    n[7] = n_g(p);
    n[8] = n_C(p); n[9] = n_n(p); n[10] = n_m(p);
    *worst = "-";
    for (i = 0; i < last; i++) {
        double ei;
        if (!with_ns && (i == 6 || i == 7)) continue;
        ei = tu_rel(x[i], y[i], n[i]);
        if (!(ei <= e)) { e = ei; *worst = names[i]; }
    }
    return e;
}
static mn_real* minus_inf(size_t n) {
    mn_real* p = tu_buf(n); size_t i; for (i = 0; i < n; i++) p[i] = (mn_real)-INFINITY; return p;
}

#ifdef MESANET_DOUBLE
// ---- finite differences: L = sum(o * dout); central difference, h = 1e-6
// The frozen forward: o_t = [scale e^{F_t + m0 - mu_t} q_t.C0 + sum_s scale (q_t.k_s) e^{F_t - F_s + i_s - mu_t} v_s]
// / (nrm_t + eps) with mu and nrm given (from a forward at the base point): the function whose gradient
// the detached backward is. Written here from the definition, in double.
static double logsig(double x) { return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x))); }
static const mprob* fd_p;
static size_t fd_C;
static const mn_real *fd_mu, *fd_nrm;   // non-NULL: the frozen forward
static double frozen_loss(void) {
    const mprob* p = fd_p;
    size_t b, h, t, s, d, j;
    double L = 0;
    for (b = 0; b < p->B; b++)
        for (h = 0; h < p->H; h++) {
            double F[512];
            double acc = 0;
            for (t = 0; t < p->T; t++) { acc += logsig(p->fg[(b * p->T + t) * p->H + h]); F[t] = acc; }
            for (t = 0; t < p->T; t++) {
                size_t rt = (b * p->T + t) * p->H + h;
                double mu = fd_mu[rt], den = fd_nrm[rt] + p->eps;
                for (j = 0; j < p->Dv; j++) {
                    double num = 0;
                    if (p->C0 && fd_C) {
                        double a = p->scale * exp(F[t] + (p->m0 ? p->m0[b * p->H + h] : 0.0) - mu);
                        for (d = 0; d < p->Dk; d++)
                            num += a * p->q[rt * p->Dk + d] * p->C0[((b * p->H + h) * p->Dk + d) * p->Dv + j];
                    }
                    for (s = 0; s <= t; s++) {
                        size_t rs = (b * p->T + s) * p->H + h;
                        double qk = 0;
                        for (d = 0; d < p->Dk; d++) qk += (double)p->q[rt * p->Dk + d] * p->k[rs * p->Dk + d];
                        num += p->scale * qk * exp(F[t] - F[s] + p->ig[rs] - mu) * p->v[rs * p->Dv + j];
                    }
                    L += num / den * p->dout[rt * p->Dv + j];
                }
            }
        }
    return L;
}
static double m_loss(void) {
    const mprob* p = fd_p;
    mres r;
    size_t i, n0 = tu_mark();
    double L = 0;
    if (fd_mu) return frozen_loss();
    r.o = tu_buf(n_v(p)); r.norm = tu_buf(n_g(p)); r.stab = tu_buf(n_g(p)); r.Ct = tu_buf(n_C(p));
    r.nt = tu_buf(n_n(p)); r.mt = tu_buf(n_m(p));
    m_forward(p, fd_C, &r);
    for (i = 0; i < n_v(p); i++) L += (double)r.o[i] * p->dout[i];
    tu_free_to(n0);   // give this call's buffers back right away
    return L;
}
static double fd_one(const char* what, mn_real* x, size_t n, const mn_real* grad, double (*loss)(void)) {
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
// Every gradient of one form and mode against finite differences of the matching loss.
static void m_fd_form(mprob* p, size_t C, int mode, const char* tag) {
    mres r = m_run(p, C, mode);
    char what[160];
    double e = 0;
    fd_p = p; fd_C = C;
    fd_mu = mode == MN_MLSTM_BW_DETACH ? tu_copy(r.stab, n_g(p)) : NULL;
    fd_nrm = mode == MN_MLSTM_BW_DETACH ? tu_copy(r.norm, n_g(p)) : NULL;
#define FD(x, g, n) do { snprintf(what, sizeof what, "mlstm %s C=%zu %s d%s", tag, C, mode ? "detach" : "exact", #x); \
                         e = fmax(e, fd_one(what, p->x, n, r.g, m_loss)); } while (0)
    FD(q, dq, n_qk(p)); FD(k, dk, n_qk(p)); FD(v, dv, n_v(p)); FD(ig, di, n_g(p)); FD(fg, df, n_g(p));
    if (C && p->C0) {
        FD(C0, dC0, n_C(p));
        if (mode == MN_MLSTM_BW_EXACT) FD(n0, dn0, n_n(p));
        else {   // the detached backward holds the normaliser, the only place n0 enters
            size_t i; double mx = 0;
            for (i = 0; i < n_n(p); i++) mx = fmax(mx, fabs((double)r.dn0[i]));
            TU_CHECK(mx == 0, "mlstm %s C=%zu detach: dn0 should be zero, max |dn0| %.3e", tag, C, mx);
        }
    }
#undef FD
    fd_mu = fd_nrm = NULL;
    printf("  fd mlstm %-22s %-9s %-6s worst rel err %.2e\n", tag,
           C ? (C == 1 ? "chunk 1" : C == 3 ? "chunk 3" : "chunk 16") : "parallel", mode ? "detach" : "exact", e);
}
static void test_mlstm_fd(void) {
    static const size_t Cs[] = { 0, 1, 3, 16 };
    size_t ci;
    int regime, mode;
    for (regime = 0; regime < 2; regime++) {
        // eps = 0.3: the stabiliser's path carries a visible share of the gradient (at 1e-6 it is ~1e-6)
        mprob p = make_mprob(2, 9, 2, 4, 3, 0.3, regime, 0);
        mprob ps = make_mprob(1, 8, 2, 3, 3, 0.3, regime, 1);
        const char* tag = regime ? "hard gates eps=0.3" : "eps=0.3";
        const char* tags = regime ? "hard gates, state" : "state";
        for (mode = 0; mode < 2; mode++)
            for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
                m_fd_form(&p, Cs[ci], mode, tag);
                if (Cs[ci]) m_fd_form(&ps, Cs[ci], mode, tags);
            }
        p.eps = 1e-6;
        m_fd_form(&p, 0, MN_MLSTM_BW_EXACT, regime ? "hard gates eps=1e-6" : "eps=1e-6");
        m_fd_form(&p, 3, MN_MLSTM_BW_EXACT, regime ? "hard gates eps=1e-6" : "eps=1e-6");
        tu_free_all();
    }
}
#endif

// ---- chunkwise == parallel, T = 37
static void test_mlstm_chunk_vs_parallel(void) {
    static const size_t Cs[] = { 1, 3, 16, 64 };
    size_t ci;
    int regime, mode, variant;
    for (regime = 0; regime < 2; regime++)
        for (variant = 0; variant < 3; variant++) {
            // 0: eps = 0, m0 = 0 (NULL): the same function, other stabilisers (compare o and gradients)
            // 1: eps = 1e-6, m0 = -inf: the same stabilisers too (compare norm and stab as well)
            // 2: eps = 1e-6, m0 = 0: differ through eps e^m only (reported, loose bound)
            mprob p = make_mprob(2, 37, 3, 8, 5, variant == 0 ? 0.0 : 1e-6, regime, 0);
            if (variant == 1) p.m0 = minus_inf(n_m(&p));
            for (mode = 0; mode < 2; mode++) {
                mres ref = m_run(&p, 0, mode);
                double worst = 0;
                const char* wn = "-";
                for (ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++) {
                    const char* which;
                    mres r = m_run(&p, Cs[ci], mode);
                    double e = m_compare(&p, &r, &ref, variant == 1, 0, &which);
                    double tol = variant == 2 ? TOL_EPS : TOL_EQ;
                    TU_CHECK(e < tol, "mlstm %s chunk C=%zu vs parallel (%s, variant %d): %s rel err %.3e",
                             regime ? "hard" : "", Cs[ci], mode ? "detach" : "exact", variant, which, e);
                    if (!(e <= worst)) { worst = e; wn = which; }
                }
                printf("  chunk vs parallel %-6s %-6s %-28s C=1,3,16,64: worst %.2e (%s)\n",
                       regime ? "hard" : "vec", mode ? "detach" : "exact",
                       variant == 0 ? "eps=0" : variant == 1 ? "eps=1e-6 m0=-inf (+norm,stab)" :
                                                               "eps=1e-6 m0=0 (eps effect)",
                       worst, wn);
            }
            tu_free_all();
        }
}

// ---- recurrent and step: == parallel (eps = 0, or m0 = -inf), == chunkwise with a state, step == recurrent
static void m_recurrent(const mprob* p, mres* r) {
    mn_mlstm_forward_recurrent(r->o, r->norm, r->stab, r->Ct, r->nt, r->mt, p->q, p->k, p->v, p->ig, p->fg, p->C0,
                               p->n0, p->m0, p->B, p->T, p->H, p->Dk, p->Dv, p->scale, p->eps);
}
static void test_mlstm_recurrent(void) {
    int regime;
    for (regime = 0; regime < 2; regime++) {
        size_t B = 2, T = 23, H = 3, Dk = 6, Dv = 4, t, b;
        const char* which;
        double e;
        // eps = 0: recurrent (m0 = 0) == parallel
        mprob p = make_mprob(B, T, H, Dk, Dv, 0.0, regime, 0);
        mres par = alloc_mres(&p), rec = alloc_mres(&p), ch;
        m_forward(&p, 0, &par);
        m_recurrent(&p, &rec);
        e = tu_rel(rec.o, par.o, n_v(&p));
        TU_CHECK(e < TOL_EQ, "mlstm recurrent vs parallel, eps = 0: o rel err %.3e", e);
        printf("  recurrent vs parallel %-4s eps=0:            o %.2e\n", regime ? "hard" : "vec", e);
        // eps = 1e-6, m0 = -inf: the same stabiliser, so o, norm and stab agree
        p.eps = 1e-6; p.m0 = minus_inf(n_m(&p));
        m_forward(&p, 0, &par);
        m_recurrent(&p, &rec);
        e = fmax(tu_rel(rec.o, par.o, n_v(&p)),
                 fmax(tu_rel(rec.norm, par.norm, n_g(&p)), tu_rel(rec.stab, par.stab, n_g(&p))));
        TU_CHECK(e < TOL_EQ, "mlstm recurrent (m0 = -inf) vs parallel: rel err %.3e", e);
        printf("  recurrent vs parallel %-4s eps=1e-6 m0=-inf: o,norm,stab %.2e\n", regime ? "hard" : "vec", e);
        // eps = 1e-6, m0 = 0: eps e^m apart
        p.m0 = NULL;
        m_forward(&p, 0, &par);
        m_recurrent(&p, &rec);
        e = tu_rel(rec.o, par.o, n_v(&p));
        TU_CHECK(e < TOL_EPS, "mlstm recurrent vs parallel, eps = 1e-6: o rel err %.3e", e);
        printf("  recurrent vs parallel %-4s eps=1e-6 m0=0:    o %.2e (the eps effect)\n", regime ? "hard" : "vec", e);
        // with a random initial state: recurrent == chunkwise, outputs and final state
        {
            mprob ps = make_mprob(B, T, H, Dk, Dv, 1e-6, regime, 1);
            size_t C;
            double worst = 0;
            rec = alloc_mres(&ps);
            m_recurrent(&ps, &rec);
            for (C = 1; C <= 32; C = C * 2 + 1) {
                ch = alloc_mres(&ps);
                m_forward(&ps, C, &ch);
                e = m_compare(&ps, &ch, &rec, 1, 0, &which);
                e = fmax(e, fmax(tu_rel(ch.Ct, rec.Ct, n_C(&ps)),
                                 fmax(tu_rel(ch.nt, rec.nt, n_n(&ps)), tu_rel(ch.mt, rec.mt, n_m(&ps)))));
                TU_CHECK(e < TOL_EQ, "mlstm chunk C=%zu vs recurrent with a state: rel err %.3e", C, e);
                worst = fmax(worst, e);
            }
            printf("  chunk vs recurrent   %-4s state, C=1..31:     o,norm,stab,C,n,m %.2e\n",
                   regime ? "hard" : "vec", worst);
            // step == recurrent, token by token, and the final state
            {
                mn_real *Cs = tu_copy(ps.C0, n_C(&ps)), *ns = tu_copy(ps.n0, n_n(&ps)), *ms = tu_copy(ps.m0, n_m(&ps));
                mn_real *qt = tu_buf(B * H * Dk), *kt = tu_buf(B * H * Dk), *vt = tu_buf(B * H * Dv),
                        *it = tu_buf(B * H), *ft = tu_buf(B * H);
                mn_real *ot = tu_buf(B * H * Dv), *os = tu_buf(n_v(&ps));
                for (t = 0; t < T; t++) {
                    for (b = 0; b < B; b++) {
                        size_t row = (b * T + t) * H;
                        memcpy(qt + b * H * Dk, ps.q + row * Dk, H * Dk * sizeof(mn_real));
                        memcpy(kt + b * H * Dk, ps.k + row * Dk, H * Dk * sizeof(mn_real));
                        memcpy(vt + b * H * Dv, ps.v + row * Dv, H * Dv * sizeof(mn_real));
                        memcpy(it + b * H, ps.ig + row, H * sizeof(mn_real));
                        memcpy(ft + b * H, ps.fg + row, H * sizeof(mn_real));
                    }
                    mn_mlstm_step(ot, Cs, ns, ms, qt, kt, vt, it, ft, B, H, Dk, Dv, ps.scale, ps.eps);
                    for (b = 0; b < B; b++)
                        memcpy(os + (b * T + t) * H * Dv, ot + b * H * Dv, H * Dv * sizeof(mn_real));
                }
                e = fmax(tu_rel(os, rec.o, n_v(&ps)),
                         fmax(tu_rel(Cs, rec.Ct, n_C(&ps)),
                              fmax(tu_rel(ns, rec.nt, n_n(&ps)), tu_rel(ms, rec.mt, n_m(&ps)))));
                TU_CHECK(e == 0, "mlstm step vs recurrent: rel err %.3e", e);
                printf("  step vs recurrent    %-4s state:              o,C,n,m %.2e\n", regime ? "hard" : "vec", e);
            }
        }
        tu_free_all();
    }
}

// ---- NULL dC0 / dn0 / norm / stab / final state; the backwards accumulate; T = 0
static void test_mlstm_misc(void) {
    size_t ci;
    double acc_worst = 0;
    int mode;
    for (ci = 0; ci < 3; ci++)
        for (mode = 0; mode < 2; mode++) {
            size_t C = ci == 0 ? 0 : ci == 1 ? 4 : 64, i;
            mprob p = make_mprob(2, 11, 2, 5, 3, 1e-3, 1, C != 0);
            mres a = m_run(&p, C, mode), b;
            const char* which;
            double e;
            // NULL optional outputs change nothing else
            b = alloc_mres(&p);
            if (C == 0) mn_mlstm_forward_parallel(b.o, NULL, NULL, p.q, p.k, p.v, p.ig, p.fg, p.B, p.T, p.H, p.Dk, p.Dv,
                                                  p.scale, p.eps, tu_work(mn_mlstm_work_size_parallel(p.B, p.T, p.H)));
            else mn_mlstm_forward(b.o, NULL, NULL, NULL, NULL, NULL, p.q, p.k, p.v, p.ig, p.fg, p.C0, p.n0, p.m0, p.B,
                                  p.T, p.H, p.Dk, p.Dv, p.scale, p.eps, C,
                                  tu_work(mn_mlstm_work_size(p.B, p.T, p.H, p.Dk, p.Dv, C)));
            if (C) mn_mlstm_backward(b.dq, b.dk, b.dv, b.di, b.df, NULL, NULL, p.dout, p.q, p.k, p.v, p.ig, p.fg, p.C0,
                                     p.n0, p.m0, p.B, p.T, p.H, p.Dk, p.Dv, p.scale, p.eps, C, mode,
                                     tu_work(mn_mlstm_work_size(p.B, p.T, p.H, p.Dk, p.Dv, C)));
            else m_backward(&p, C, mode, &b);
            e = m_compare(&p, &b, &a, 0, 0, &which);
            TU_CHECK(e == 0, "mlstm C=%zu: NULL optional outputs change %s (%.3e)", C, which, e);
            // accumulation: start from 1 everywhere, the result is 1 + the fresh gradient
            b = a;
            b.dq = tu_buf(n_qk(&p)); b.dk = tu_buf(n_qk(&p)); b.dv = tu_buf(n_v(&p)); b.di = tu_buf(n_g(&p));
            b.df = tu_buf(n_g(&p));
            b.dC0 = tu_buf(n_C(&p)); b.dn0 = tu_buf(n_n(&p));
            for (i = 0; i < n_qk(&p); i++) b.dq[i] = b.dk[i] = 1;
            for (i = 0; i < n_v(&p); i++) b.dv[i] = 1;
            for (i = 0; i < n_g(&p); i++) b.di[i] = b.df[i] = 1;
            for (i = 0; i < n_C(&p); i++) b.dC0[i] = 1;
            for (i = 0; i < n_n(&p); i++) b.dn0[i] = 1;
            m_backward(&p, C, mode, &b);
            for (i = 0; i < n_qk(&p); i++) { b.dq[i] -= 1; b.dk[i] -= 1; }
            for (i = 0; i < n_v(&p); i++) b.dv[i] -= 1;
            for (i = 0; i < n_g(&p); i++) { b.di[i] -= 1; b.df[i] -= 1; }
            for (i = 0; i < n_C(&p); i++) b.dC0[i] -= 1;
            for (i = 0; i < n_n(&p); i++) b.dn0[i] -= 1;
            e = m_compare(&p, &b, &a, 0, 0, &which);
            if (C) e = fmax(e, fmax(tu_rel(b.dC0, a.dC0, n_C(&p)), tu_rel(b.dn0, a.dn0, n_n(&p))));
            TU_CHECK(e < TOL_ACC, "mlstm C=%zu: backward does not accumulate (%s %.3e)", C, which, e);
            acc_worst = fmax(acc_worst, e);
            tu_free_all();
        }
    // T = 0: the final state is the initial one, nothing else is touched
    {
        mprob p = make_mprob(2, 0, 2, 4, 3, 1e-6, 0, 1);
        mres r = m_run(&p, 8, MN_MLSTM_BW_EXACT), rr = alloc_mres(&p);
        double e = fmax(tu_rel(r.Ct, p.C0, n_C(&p)), fmax(tu_rel(r.nt, p.n0, n_n(&p)), tu_rel(r.mt, p.m0, n_m(&p))));
        e = fmax(e, fmax(tu_rel(r.dC0, p.C0, 0), r.dC0[0] == 0 ? 0.0 : 1.0));   // dC0 untouched (zero)
        m_recurrent(&p, &rr);
        e = fmax(e, fmax(tu_rel(rr.Ct, p.C0, n_C(&p)), tu_rel(rr.mt, p.m0, n_m(&p))));
        m_run(&p, 0, MN_MLSTM_BW_EXACT);
        TU_CHECK(e == 0, "mlstm T = 0: final state != initial state (%.3e)", e);
        tu_free_all();
    }
    printf("  NULL outputs ok; accumulation (+=) worst %.2e; T = 0 ok\n", acc_worst);
}

// =============================================================================================== sLSTM

typedef struct {
    size_t B, T, NH, Dh;
    mn_real *x, *R, *b;                 // (B,T,4Hd), (NH,4Dh,Dh), (4Hd)
    mn_real *y0, *c0, *n0, *m0;         // (B,Hd) or NULL
    mn_real* dy;                        // (B,T,Hd)
} sprob;
typedef struct { mn_real *y, *c, *n, *m, *dx, *dR, *db, *dy0, *dc0, *dn0; } sres;
static size_t s_hd(const sprob* p) { return p->NH * p->Dh; }
static size_t s_nx(const sprob* p) { return p->B * p->T * 4 * s_hd(p); }
static size_t s_ny(const sprob* p) { return p->B * p->T * s_hd(p); }
static size_t s_nR(const sprob* p) { return p->NH * 4 * p->Dh * p->Dh; }
static size_t s_ns(const sprob* p) { return p->B * s_hd(p); }

static sprob make_sprob(size_t B, size_t T, size_t NH, size_t Dh, int state) {
    sprob p;
    size_t i;
    memset(&p, 0, sizeof p);
    p.B = B; p.T = T; p.NH = NH; p.Dh = Dh;
    p.x = tu_buf(s_nx(&p)); p.R = tu_buf(s_nR(&p)); p.b = tu_buf(4 * s_hd(&p)); p.dy = tu_buf(s_ny(&p));
    tu_fill(p.x, s_nx(&p), 0, 1); tu_fill(p.R, s_nR(&p), 0, 1.0 / sqrt((double)Dh)); tu_fill(p.b, 4 * s_hd(&p), 0, 0.5);
    tu_fill(p.dy, s_ny(&p), 0, 1);
    if (state) {   // a state some steps in: n >= 1, |c| <= n, m anything
        p.y0 = tu_buf(s_ns(&p)); p.c0 = tu_buf(s_ns(&p)); p.n0 = tu_buf(s_ns(&p)); p.m0 = tu_buf(s_ns(&p));
        tu_fill(p.y0, s_ns(&p), 0, 0.5); tu_fill(p.m0, s_ns(&p), 0, 1);
        for (i = 0; i < s_ns(&p); i++) {
            p.n0[i] = (mn_real)(1 + fabs(mn_rng_normal(&tu_rng)));
            p.c0[i] = (mn_real)(p.n0[i] * (2 * mn_rng_uniform(&tu_rng) - 1));
        }
    }
    return p;
}
static sres s_alloc(const sprob* p) {
    sres r;
    r.y = tu_buf(s_ny(p)); r.c = tu_buf(s_ny(p)); r.n = tu_buf(s_ny(p)); r.m = tu_buf(s_ny(p));
    r.dx = tu_buf(s_nx(p)); r.dR = tu_buf(s_nR(p)); r.db = tu_buf(4 * s_hd(p));
    r.dy0 = tu_buf(s_ns(p)); r.dc0 = tu_buf(s_ns(p)); r.dn0 = tu_buf(s_ns(p));
    return r;
}
static void s_forward(const sprob* p, sres* r) {
    mn_slstm_forward(r->y, r->c, r->n, r->m, p->x, p->R, p->b, p->y0, p->c0, p->n0, p->m0, p->B, p->T, p->NH, p->Dh,
                     tu_work(mn_slstm_work_size(p->B, p->NH, p->Dh)));
}
static void s_backward(const sprob* p, sres* r) {
    mn_slstm_backward(r->dx, r->dR, r->db, r->dy0, r->dc0, r->dn0, p->dy, r->y, r->c, r->n, r->m, p->x, p->R, p->b,
                      p->y0, p->c0, p->n0, p->m0, p->B, p->T, p->NH, p->Dh,
                      tu_work(mn_slstm_work_size(p->B, p->NH, p->Dh)));
}
static sres s_run(const sprob* p) { sres r = s_alloc(p); s_forward(p, &r); s_backward(p, &r); return r; }

// The cell without the stabiliser (i = e^~i, f = sigmoid(~f), unscaled c and n), written here from the
// sLSTM equations: y = c / n must be the same, since the stabiliser scales c and n together. The initial state
// is unscaled by e^{m0}.
static void s_unstab(const sprob* p, mn_real* yout) {
    size_t Hd = s_hd(p), G = 4 * Hd, bb, t, u, h, g, j, i;
    for (bb = 0; bb < p->B; bb++) {
        double yprev[256], cc[256], nn[256], raw[1024];
        for (u = 0; u < Hd; u++) {
            double sc = p->m0 ? exp((double)p->m0[bb * Hd + u]) : 1.0;
            yprev[u] = p->y0 ? p->y0[bb * Hd + u] : 0; cc[u] = p->c0 ? sc * p->c0[bb * Hd + u] : 0;
            nn[u] = p->n0 ? sc * p->n0[bb * Hd + u] : 0;
        }
        for (t = 0; t < p->T; t++) {
            for (h = 0; h < p->NH; h++)
                for (g = 0; g < 4; g++)
                    for (j = 0; j < p->Dh; j++) {
                        size_t o = g * Hd + h * p->Dh + j;
                        double a = (double)p->x[(bb * p->T + t) * G + o] + p->b[o];
                        for (i = 0; i < p->Dh; i++)
                            a += (double)p->R[((h * 4 + g) * p->Dh + j) * p->Dh + i] * yprev[h * p->Dh + i];
                        raw[o] = a;
                    }
            for (u = 0; u < Hd; u++) {
                double ig = exp(raw[u]), fg = 1.0 / (1.0 + exp(-raw[Hd + u]));
                cc[u] = fg * cc[u] + ig * tanh(raw[2 * Hd + u]);
                nn[u] = fg * nn[u] + ig;
                yprev[u] = 1.0 / (1.0 + exp(-raw[3 * Hd + u])) * cc[u] / nn[u];
                yout[(bb * p->T + t) * Hd + u] = (mn_real)yprev[u];
            }
        }
    }
}

#ifdef MESANET_DOUBLE
static const sprob* sfd_p;
static double s_loss(void) {
    const sprob* p = sfd_p;
    size_t i, n0 = tu_mark();
    double L = 0;
    sres r;
    r.y = tu_buf(s_ny(p)); r.c = tu_buf(s_ny(p)); r.n = tu_buf(s_ny(p)); r.m = tu_buf(s_ny(p));
    s_forward(p, &r);
    for (i = 0; i < s_ny(p); i++) L += (double)r.y[i] * p->dy[i];
    tu_free_to(n0);
    return L;
}
static void test_slstm_fd(void) {
    int state;
    for (state = 0; state < 2; state++) {
        sprob p = make_sprob(2, 7, 2, 3, state);
        sres r = s_run(&p);
        char what[96];
        double e = 0;
        sfd_p = &p;
#define FD(x, g, n) do { snprintf(what, sizeof what, "slstm%s d%s", state ? " state" : "", #x); \
                         e = fmax(e, fd_one(what, p.x, n, r.g, s_loss)); } while (0)
        FD(x, dx, s_nx(&p)); FD(R, dR, s_nR(&p)); FD(b, db, 4 * s_hd(&p));
        if (state) { FD(y0, dy0, s_ns(&p)); FD(c0, dc0, s_ns(&p)); FD(n0, dn0, s_ns(&p)); }
#undef FD
        printf("  fd slstm %-6s dx dR db%s: worst rel err %.2e\n",
               state ? "state" : "", state ? " dy0 dc0 dn0" : "", e);
        tu_free_all();
    }
}
#endif

static void test_slstm_forms(void) {
    int state;
    for (state = 0; state < 2; state++) {
        size_t B = 3, T = 19, NH = 2, Dh = 5, Hd = NH * Dh, t, bb, i;
        sprob p = make_sprob(B, T, NH, Dh, state);
        sres r = s_alloc(&p), a, b2;
        mn_real* yu = tu_buf(s_ny(&p));
        mn_real *ys = tu_buf(B * Hd), *cs = tu_buf(B * Hd), *ns = tu_buf(B * Hd), *ms = tu_buf(B * Hd),
                *xt = tu_buf(B * 4 * Hd);
        mn_real* w = tu_work(mn_slstm_work_size(B, NH, Dh));
        double e, es = 0;
        s_forward(&p, &r);
        s_unstab(&p, yu);
        e = tu_rel(r.y, yu, s_ny(&p));
        TU_CHECK(e < TOL_EQ, "slstm%s vs unstabilised: y rel err %.3e", state ? " state" : "", e);
        // step == forward, token by token
        if (state) {
            memcpy(ys, p.y0, B * Hd * sizeof(mn_real)); memcpy(cs, p.c0, B * Hd * sizeof(mn_real));
            memcpy(ns, p.n0, B * Hd * sizeof(mn_real)); memcpy(ms, p.m0, B * Hd * sizeof(mn_real));
        }
        for (t = 0; t < T; t++) {
            for (bb = 0; bb < B; bb++) memcpy(xt + bb * 4 * Hd, p.x + (bb * T + t) * 4 * Hd, 4 * Hd * sizeof(mn_real));
            mn_slstm_step(ys, cs, ns, ms, xt, p.R, p.b, B, NH, Dh, w);
            for (bb = 0; bb < B; bb++)
                for (i = 0; i < Hd; i++) {
                    size_t o = (bb * T + t) * Hd + i;
                    es = fmax(es, fabs((double)ys[bb * Hd + i] - r.y[o]) + fabs((double)cs[bb * Hd + i] - r.c[o]) +
                                  fabs((double)ns[bb * Hd + i] - r.n[o]) + fabs((double)ms[bb * Hd + i] - r.m[o]));
                }
        }
        TU_CHECK(es == 0, "slstm%s step vs forward: max abs diff %.3e", state ? " state" : "", es);
        printf("  slstm %-5s forward vs unstabilised y %.2e; step vs forward (y,c,n,m) %.2e\n",
               state ? "state" : "", e, es);
        // accumulation and NULL initial-state gradients
        a = s_run(&p);
        b2 = a;
        b2.dx = tu_buf(s_nx(&p)); b2.dR = tu_buf(s_nR(&p)); b2.db = tu_buf(4 * Hd); b2.dy0 = tu_buf(B * Hd);
        b2.dc0 = tu_buf(B * Hd); b2.dn0 = tu_buf(B * Hd);
        for (i = 0; i < s_nx(&p); i++) b2.dx[i] = 1;
        for (i = 0; i < s_nR(&p); i++) b2.dR[i] = 1;
        for (i = 0; i < 4 * Hd; i++) b2.db[i] = 1;
        for (i = 0; i < B * Hd; i++) b2.dy0[i] = b2.dc0[i] = b2.dn0[i] = 1;
        s_backward(&p, &b2);
        for (i = 0; i < s_nx(&p); i++) b2.dx[i] -= 1;
        for (i = 0; i < s_nR(&p); i++) b2.dR[i] -= 1;
        for (i = 0; i < 4 * Hd; i++) b2.db[i] -= 1;
        for (i = 0; i < B * Hd; i++) { b2.dy0[i] -= 1; b2.dc0[i] -= 1; b2.dn0[i] -= 1; }
        e = fmax(fmax(tu_rel(b2.dx, a.dx, s_nx(&p)), tu_rel(b2.dR, a.dR, s_nR(&p))),
                 fmax(tu_rel(b2.db, a.db, 4 * Hd),
                      fmax(tu_rel(b2.dy0, a.dy0, B * Hd),
                           fmax(tu_rel(b2.dc0, a.dc0, B * Hd), tu_rel(b2.dn0, a.dn0, B * Hd)))));
        TU_CHECK(e < TOL_ACC, "slstm%s: backward does not accumulate (%.3e)", state ? " state" : "", e);
        b2 = a; b2.dx = tu_buf(s_nx(&p)); b2.dR = tu_buf(s_nR(&p)); b2.db = tu_buf(4 * Hd);
        mn_slstm_backward(b2.dx, b2.dR, b2.db, NULL, NULL, NULL, p.dy, a.y, a.c, a.n, a.m, p.x, p.R, p.b, p.y0, p.c0,
                          p.n0, p.m0, B, T, NH, Dh, tu_work(mn_slstm_work_size(B, NH, Dh)));
        e = fmax(tu_rel(b2.dx, a.dx, s_nx(&p)), fmax(tu_rel(b2.dR, a.dR, s_nR(&p)), tu_rel(b2.db, a.db, 4 * Hd)));
        TU_CHECK(e == 0, "slstm%s: NULL dy0/dc0/dn0 change the other gradients (%.3e)", state ? " state" : "", e);
        tu_free_all();
    }
    {   // T = 0 touches nothing
        sprob p = make_sprob(2, 0, 2, 3, 1);
        sres r = s_run(&p);
        TU_CHECK(r.dy0[0] == 0 && r.dc0[0] == 0, "slstm T = 0: gradients written");
        tu_free_all();
    }
}

// =============================================================================================== vectors

// A head-first (B,H,T,D) file tensor as (B,T,H,D); and a (B,T,H,D) result back to (B,H,T,D).
static mn_real* vt_bthd(const mn_vec_file* f, const char* name, size_t B, size_t T, size_t H, size_t D) {
    mn_real* x = vt_real(f, name, B * T * H * D); mn_real* y = tu_buf(B * T * H * D);
    swap_mid(y, x, B, H, T, D);
    return y;
}
static mn_real* to_bhtd(const mn_real* x, size_t B, size_t T, size_t H, size_t D) {
    mn_real* y = tu_buf(B * T * H * D); swap_mid(y, x, B, T, H, D); return y;
}
static double vt_cmp(const mn_vec_file* f, const char* name, const mn_real* got, size_t n, double* worst,
                     const char* form) {
    const double* want = vt_get(f, name, n);
    double e = want ? tu_rel_d(got, want, n) : INFINITY;
    TU_CHECK(e <= TOL_VEC, "%s %s (%s): rel err %.3e", f->op, name, form, e);
    if (!(e <= *worst)) *worst = e;
    return e;
}
static int vt_load(mn_vec_file* f, const char* dir, const char* file, const char* op) {
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s.vec", dir, file);
    if (mn_vec_load(f, path, err, sizeof err) != 0) { TU_CHECK(0, "cannot load %s: %s", path, err); return -1; }
    TU_CHECK(strcmp(f->op, op) == 0, "%s: op is %s", path, f->op);
    TU_CHECK(mn_vec_attr(f, "layout") != NULL, "%s: no layout", path);
    return 0;
}
// The mLSTM inputs of a file (all three mlstm files share them): q, k, v, i, f converted to [B,T,H,D].
static int vt_mprob(const mn_vec_file* f, mprob* p) {
    const mn_vec_tensor* q = mn_vec_get(f, "q");
    const mn_vec_tensor* v = mn_vec_get(f, "v");
    memset(p, 0, sizeof *p);
    if (q == NULL || v == NULL || q->ndim != 4 || v->ndim != 4) { TU_CHECK(0, "%s: no q or v", f->op); return -1; }
    TU_CHECK(strcmp(mn_vec_attr(f, "layout"), "BHTD") == 0, "%s: layout %s", f->op, mn_vec_attr(f, "layout"));
    p->B = q->dims[0]; p->H = q->dims[1]; p->T = q->dims[2]; p->Dk = q->dims[3]; p->Dv = v->dims[3];
    p->scale = mn_vec_attr_f(f, "scale", NAN); p->eps = mn_vec_attr_f(f, "eps", NAN);
    TU_CHECK(p->scale == p->scale && p->eps == p->eps, "%s: attrs scale/eps", f->op);
    p->q = vt_bthd(f, "q", p->B, p->T, p->H, p->Dk); p->k = vt_bthd(f, "k", p->B, p->T, p->H, p->Dk);
    p->v = vt_bthd(f, "v", p->B, p->T, p->H, p->Dv);
    p->ig = vt_bthd(f, "i", p->B, p->T, p->H, 1); p->fg = vt_bthd(f, "f", p->B, p->T, p->H, 1);
    if (mn_vec_get(f, "do")) p->dout = vt_bthd(f, "do", p->B, p->T, p->H, p->Dv);
    return 0;
}
// mlstm_parallel / mlstm_parallel_custbw: the parallel form, and the chunkwise form (C = 16 and 5) started
// from m0 = -inf, whose stabiliser is the parallel one; outputs o, n, m and every gradient.
static void test_vec_mlstm_parallel(const char* dir, const char* file, const char* op, int mode) {
    static const size_t Cs[3] = { 0, 16, 5 };
    static mn_vec_file f;
    static const char* names[8] = { "out.o", "out.n", "out.m", "grad.q", "grad.k", "grad.v", "grad.i", "grad.f" };
    double worst[8] = { 0 };
    mprob p;
    size_t ci, i;
    if (vt_load(&f, dir, file, op) != 0) return;
    if (vt_mprob(&f, &p) != 0 || p.dout == NULL) { TU_CHECK(0, "%s: no do", file); mn_vec_free(&f); return; }
    p.m0 = minus_inf(n_m(&p));
    for (ci = 0; ci < 3; ci++) {
        mres r = m_run(&p, Cs[ci], mode);
        const char* form = Cs[ci] == 0 ? "parallel" : Cs[ci] == 16 ? "chunk16" : "chunk5";
        const mn_real* got[8];
        size_t D[8];
        got[0] = r.o; got[1] = r.norm; got[2] = r.stab; got[3] = r.dq; got[4] = r.dk; got[5] = r.dv; got[6] = r.di;
        got[7] = r.df;
        D[0] = p.Dv; D[1] = 1; D[2] = 1; D[3] = p.Dk; D[4] = p.Dk; D[5] = p.Dv; D[6] = 1; D[7] = 1;
        for (i = 0; i < 8; i++)
            vt_cmp(&f, names[i], to_bhtd(got[i], p.B, p.T, p.H, D[i]), p.B * p.T * p.H * D[i], &worst[i], form);
    }
    printf("  %-22s", file);
    for (i = 0; i < 8; i++) printf(" %s %.1e", names[i], worst[i]);
    printf("  (worst of parallel, chunk 16, chunk 5)\n");
    mn_vec_free(&f);
    tu_free_all();
}
// mlstm_recurrent: the recurrent form, the step token by token, and the chunkwise form (C = 16, 5) from
// the same m0 = 0; out.o and the final states.
static void test_vec_mlstm_recurrent(const char* dir) {
    static mn_vec_file f;
    static const char* names[4] = { "out.o", "out.c_final", "out.n_final", "out.m_final" };
    double worst[4] = { 0 };
    mprob p;
    size_t form, i, b, t;
    if (vt_load(&f, dir, "mlstm_recurrent", "mlstm_recurrent") != 0) return;
    if (vt_mprob(&f, &p) != 0) { mn_vec_free(&f); return; }
    for (form = 0; form < 4; form++) {
        mres r = alloc_mres(&p);
        const char* fname = form == 0 ? "recurrent" : form == 1 ? "step" : form == 2 ? "chunk16" : "chunk5";
        if (form == 0) m_recurrent(&p, &r);
        else if (form == 1) {
            size_t B = p.B, H = p.H, Dk = p.Dk, Dv = p.Dv, T = p.T;
            mn_real *qt = tu_buf(B * H * Dk), *kt = tu_buf(B * H * Dk), *vt = tu_buf(B * H * Dv), *it = tu_buf(B * H),
                    *ft = tu_buf(B * H), *ot = tu_buf(B * H * Dv);
            for (t = 0; t < T; t++) {
                for (b = 0; b < B; b++) {
                    size_t row = (b * T + t) * H;
                    memcpy(qt + b * H * Dk, p.q + row * Dk, H * Dk * sizeof(mn_real));
                    memcpy(kt + b * H * Dk, p.k + row * Dk, H * Dk * sizeof(mn_real));
                    memcpy(vt + b * H * Dv, p.v + row * Dv, H * Dv * sizeof(mn_real));
                    memcpy(it + b * H, p.ig + row, H * sizeof(mn_real));
                    memcpy(ft + b * H, p.fg + row, H * sizeof(mn_real));
                }
                mn_mlstm_step(ot, r.Ct, r.nt, r.mt, qt, kt, vt, it, ft, B, H, Dk, Dv, p.scale, p.eps);
                for (b = 0; b < B; b++) memcpy(r.o + (b * T + t) * H * Dv, ot + b * H * Dv, H * Dv * sizeof(mn_real));
            }
        } else m_forward(&p, form == 2 ? 16 : 5, &r);
        vt_cmp(&f, names[0], to_bhtd(r.o, p.B, p.T, p.H, p.Dv), n_v(&p), &worst[0], fname);
        vt_cmp(&f, names[1], r.Ct, n_C(&p), &worst[1], fname);
        vt_cmp(&f, names[2], r.nt, n_n(&p), &worst[2], fname);
        vt_cmp(&f, names[3], r.mt, n_m(&p), &worst[3], fname);
    }
    printf("  %-22s", "mlstm_recurrent");
    for (i = 0; i < 4; i++) printf(" %s %.1e", names[i], worst[i]);
    printf("  (worst of recurrent, step, chunk 16, chunk 5)\n");
    mn_vec_free(&f);
    tu_free_all();
}
// slstm: layout SBG ([S,B,...]): transposed to the op's [B,T,...] and back. Forward, backward, step.
static void test_vec_slstm(const char* dir) {
    static mn_vec_file f;
    static const char* names[8] = { "out.y", "out.c", "out.n", "out.m", "grad.x", "grad.R", "grad.b", "step" };
    double worst[8] = { 0 };
    const mn_vec_tensor *x, *R;
    sprob p;
    sres r;
    size_t Hd, G, S, bb, t, i;
    if (vt_load(&f, dir, "slstm", "slstm") != 0) return;
    TU_CHECK(strcmp(mn_vec_attr(&f, "layout"), "SBG") == 0, "slstm: layout");
    x = mn_vec_get(&f, "x"); R = mn_vec_get(&f, "R");
    if (x == NULL || R == NULL || x->ndim != 3 || R->ndim != 3) {
        TU_CHECK(0, "slstm: no x or R"); mn_vec_free(&f); return;
    }
    memset(&p, 0, sizeof p);
    S = x->dims[0]; p.B = x->dims[1]; p.T = S; p.NH = R->dims[0]; p.Dh = R->dims[2];
    Hd = p.NH * p.Dh; G = 4 * Hd;
    TU_CHECK(x->dims[2] == G && R->dims[1] == 4 * p.Dh, "slstm: shapes");
    TU_CHECK(mn_vec_attr_f(&f, "num_heads", 0) == (double)p.NH && mn_vec_attr_f(&f, "head_dim", 0) == (double)p.Dh,
             "slstm: attrs");
    {
        mn_real* xs = vt_real(&f, "x", S * p.B * G); mn_real* ds = vt_real(&f, "do", S * p.B * Hd);
        p.x = tu_buf(S * p.B * G); swap_mid(p.x, xs, 1, S, p.B, G);
        p.dy = tu_buf(S * p.B * Hd); swap_mid(p.dy, ds, 1, S, p.B, Hd);
        p.R = vt_real(&f, "R", s_nR(&p)); p.b = vt_real(&f, "b", G);
    }
    r = s_run(&p);
    {
        const mn_real* outs[4];
        mn_real* tmp = tu_buf(S * p.B * G);
        outs[0] = r.y; outs[1] = r.c; outs[2] = r.n; outs[3] = r.m;
        for (i = 0; i < 4; i++) {
            swap_mid(tmp, outs[i], 1, p.B, S, Hd); vt_cmp(&f, names[i], tmp, S * p.B * Hd, &worst[i], "forward");
        }
        swap_mid(tmp, r.dx, 1, p.B, S, G); vt_cmp(&f, names[4], tmp, S * p.B * G, &worst[4], "backward");
        vt_cmp(&f, names[5], r.dR, s_nR(&p), &worst[5], "backward");
        vt_cmp(&f, names[6], r.db, G, &worst[6], "backward");
    }
    {   // the step, token by token from zero states: out.y row by row ([S,B,Hd] rows are exactly the step's (B,Hd))
        mn_real *ys = tu_buf(p.B * Hd), *cs = tu_buf(p.B * Hd), *ns = tu_buf(p.B * Hd), *ms = tu_buf(p.B * Hd),
                *xt = tu_buf(p.B * G), *ya = tu_buf(S * p.B * Hd);
        mn_real* w = tu_work(mn_slstm_work_size(p.B, p.NH, p.Dh));
        for (t = 0; t < S; t++) {
            for (bb = 0; bb < p.B; bb++) memcpy(xt + bb * G, p.x + (bb * S + t) * G, G * sizeof(mn_real));
            mn_slstm_step(ys, cs, ns, ms, xt, p.R, p.b, p.B, p.NH, p.Dh, w);
            memcpy(ya + t * p.B * Hd, ys, p.B * Hd * sizeof(mn_real));
        }
        vt_cmp(&f, "out.y", ya, S * p.B * Hd, &worst[7], "step");
    }
    printf("  %-22s", "slstm");
    for (i = 0; i < 8; i++) printf(" %s %.1e", names[i], worst[i]);
    printf("\n");
    mn_vec_free(&f);
    tu_free_all();
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "reference/vectors";
    mn_rng_seed(&tu_rng, 20240611);
#ifdef MESANET_DOUBLE
    printf("finite differences (double):\n");
    test_mlstm_fd();
    test_slstm_fd();
#else
    printf("float build: finite differences skipped (they need -DMESANET_DOUBLE)\n");
#endif
    printf("mLSTM chunkwise vs parallel (T=37):\n");
    test_mlstm_chunk_vs_parallel();
    printf("mLSTM recurrent and step:\n");
    test_mlstm_recurrent();
    test_mlstm_misc();
    printf("sLSTM:\n");
    test_slstm_forms();
    printf("golden vectors (max|a-b|/max|b|):\n");
    test_vec_mlstm_parallel(dir, "mlstm_parallel", "mlstm", MN_MLSTM_BW_EXACT);
    test_vec_mlstm_parallel(dir, "mlstm_parallel_custbw", "mlstm_custbw", MN_MLSTM_BW_DETACH);
    test_vec_mlstm_recurrent(dir);
    test_vec_slstm(dir);
    return tu_finish("test_xlstm");
}
