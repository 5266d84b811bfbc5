/* mesa_oracle.h - independent float64 truth for the Mesa op (MesaNet's layer core).

   Written from the math stated below (the op, its exact and least-squares solves, finite-difference
   gradients, fla's CG), not from mesanet.h, so that mesanet.h's Mesa ops can be checked against it.
   Self-contained C99
   (also compiles as C++), depends only on libc and libm. Every function is `static inline`: just
   #include "reference/mesa_oracle.h" (no IMPLEMENTATION define); unused functions cost nothing.

   ---------------------------------------------------------------------------------------------
   THE OP (per batch b and head h, all independent; t = 0..T-1)

       H_t = exp(g_t) H_{t-1} + beta_t k_t k_t^T             K x K   (H_{-1} = hkk0 or 0)
       S_t = exp(g_t) S_{t-1} + beta_t k_t v_t^T             K x V   (S_{-1} = hkv0 or 0)
       x_t = (H_t + diag(lambda_h))^{-1} q_t                 K
       o_t = S_t^T x_t                                       V

   LAYOUT (row-major, last index fastest; fla's [B,T,H,D]):
       q, k   [B,T,H,K]      v, o  [B,T,H,V]  (V != K is allowed)     x  [B,T,H,K]
       g, beta [B,T,H]       lamb [H,K]
       hkk0, hkk [B,H,K,K]   hkv0, hkv [B,H,K,V]     (state orientation [K,V]: o = S^T x)
   g is the natural-log decay (g <= 0 in practice; not enforced). g == NULL means g = 0 (no
   forgetting). hkk0/hkv0 == NULL mean zero initial states. Output pointers documented as
   optional may be NULL. hkk0 must be symmetric (mo_mesa_exact factorises H + diag(lambda) by
   Cholesky, reading its lower triangle).

   API (all return 0 on success, a negative MO_E* code on bad input or failure; nothing is
   printed, nothing calls exit(); work memory is malloc'ed and freed before returning; outputs
   are only partially written on failure)

   (a) exact recurrence, Cholesky solve per token:
       int mo_mesa_exact(int B, int T, int H, int K, int V,
                         const double* q, const double* k, const double* v, const double* g,
                         const double* beta, const double* lamb,
                         const double* hkk0, const double* hkv0,
                         double* o, double* x, double* hkk, double* hkv);
           o, x, hkk, hkv: outputs, each optional.

   (b) closed-form ridge regression, independent of the recurrence (zero initial state):
       int mo_mesa_lstsq(int B, int T, int H, int K, int V,
                         const double* q, const double* k, const double* v, const double* g,
                         const double* beta, const double* lamb, double* o);
           For every t: w_{t'} = exp(sum_{s=t'+1..t} g_s) beta_{t'} (t' <= t), solve
           Phi (sum_{t'} w k k^T + diag(lambda)) = sum_{t'} w v k^T by Gaussian elimination with
           partial pivoting, o_t = Phi q_t. O(T^2 K^2 + T K^3 + T K^2 V) per head.

   (c) finite-difference gradients of
           L = sum(o * dout) + sum(hkk * dhkk) + sum(hkv * dhkv)     (hkk, hkv = final states)
       through (a), by the fourth-order central stencil
           f'(x) ~ (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / (12 h):
       int mo_mesa_grad_fd(int B, int T, int H, int K, int V,
                           const double* q, const double* k, const double* v, const double* g,
                           const double* beta, const double* lamb,
                           const double* hkk0, const double* hkv0,
                           const double* dout, const double* dhkk, const double* dhkv,
                           double step,
                           double* dq, double* dk, double* dv, double* dg, double* dbeta,
                           double* dlamb, double* dhkk0, double* dhkv0);
           dout [B,T,H,V] required; dhkk [B,H,K,K], dhkv [B,H,K,V] optional upstream gradients
           of the final states (NULL = 0). step <= 0 selects 1e-5. Every gradient output is
           optional (NULL = not computed, which saves the time). dg is computed even when
           g == NULL (it is then dL/dg at g = 0). dhkk0 perturbs one entry H_{-1}[i][j] at a
           time (a non-symmetric perturbation), so those evaluations solve with LU instead of
           Cholesky; it gives the orientation of torch autograd through linalg.solve
           (dH_{-1}[i][j] = -sum_t zeta dq_t[i] x_t[j] + ...), which is the one fla returns.
           Cost: 4 evaluations per input element, each only of the affected head and of the
           tokens from the perturbed one on: meant for small shapes (B*T*H*(2K+V) up to ~1e4).

   (d) fla's CG per token, fixed iteration count, as independent per-token loops:
       int mo_mesa_cg_fla(int B, int T, int H, int K, int V,
                          const double* q, const double* k, const double* v, const double* g,
                          const double* beta, const double* lamb,
                          const double* hkk0, const double* hkv0,
                          int n_iter, int x0_mode, double eps,
                          double* o, double* x, double* hkk, double* hkv);
           Per token, after the state update, with A = H_t + diag(lambda):
               x = x0 ;  r = q - A x ;  p = r ;  delta = r.r
               repeat n_iter times:  Ap = A p ;  alpha = delta / (p.Ap + eps)
                                     x += alpha p ;  r -= alpha Ap
                                     delta' = r.r ;  p = r + (delta' / (delta + eps)) p ;  delta = delta'
               o_t = S_t^T x
           x0_mode: MO_CG_X0_ZERO       x0 = 0  (fla's naive_mesa_net_CG / chunk path; vectors 3.2)
                    MO_CG_X0_JACOBI     x0 = q / (diag(H_t) + lambda)  (naive decode step; 3.3)
                    MO_CG_X0_JACOBI_EPS x0 = q / (diag(H_t) + lambda + eps)  (fla's Triton decode kernel)
           eps: MO_FLA_CG_EPS (1e-5) reproduces fla. eps = 0 gives textbook CG; then a zero
           denominator (exact convergence) stops the iteration early instead of making NaN
           (with eps > 0 that guard can never fire, so the fla iteration count is exact).
           n_iter >= 0. o, x, hkk, hkv optional.

   ---------------------------------------------------------------------------------------------
   Sizes are int and must be >= 1 (n_iter >= 0); element counts are computed in size_t. */
#ifndef MO_MESA_ORACLE_H
#define MO_MESA_ORACLE_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum {
    MO_OK = 0,
    MO_EARG = -1,      /* a size < 1, a required pointer NULL, an unknown mode, n_iter < 0 */
    MO_ENOMEM = -2,    /* malloc failed */
    MO_ENOTPD = -3,    /* Cholesky met a non-positive pivot: H_t + diag(lambda) is not SPD */
    MO_ESINGULAR = -4, /* Gaussian elimination met an exactly zero pivot */
    MO_ENONFINITE = -5 /* a pivot or result became NaN/inf */
};

enum { MO_CG_X0_ZERO = 0, MO_CG_X0_JACOBI = 1, MO_CG_X0_JACOBI_EPS = 2 };

#define MO_FLA_CG_EPS 1e-5

/* ============================================================================================ */
/* small linear algebra                                                                         */

/* Cholesky A = L L^T of the n x n matrix A (lower triangle read), L written to the lower triangle
   of Lm (may alias A). Returns MO_ENOTPD unless every pivot is > 0 and finite. */
static inline int mo__cholesky(int n, const double* A, double* Lm)
{
    int i, j, p;
    for (j = 0; j < n; j++) {
        double d = A[(size_t)j * n + j];
        for (p = 0; p < j; p++) d -= Lm[(size_t)j * n + p] * Lm[(size_t)j * n + p];
        if (!(d > 0) || !(d < INFINITY)) return MO_ENOTPD;
        d = sqrt(d);
        Lm[(size_t)j * n + j] = d;
        for (i = j + 1; i < n; i++) {
            double s = A[(size_t)i * n + j];
            for (p = 0; p < j; p++) s -= Lm[(size_t)i * n + p] * Lm[(size_t)j * n + p];
            Lm[(size_t)i * n + j] = s / d;
        }
    }
    return MO_OK;
}

/* Solves L L^T x = b given the Cholesky factor (lower triangle of Lm); x may alias b. */
static inline void mo__chol_solve(int n, const double* Lm, const double* b, double* x)
{
    int i, p;
    for (i = 0; i < n; i++) { /* forward: L y = b */
        double s = b[i];
        for (p = 0; p < i; p++) s -= Lm[(size_t)i * n + p] * x[p];
        x[i] = s / Lm[(size_t)i * n + i];
    }
    for (i = n - 1; i >= 0; i--) { /* backward: L^T x = y */
        double s = x[i];
        for (p = i + 1; p < n; p++) s -= Lm[(size_t)p * n + i] * x[p];
        x[i] = s / Lm[(size_t)i * n + i];
    }
}

/* Gaussian elimination with partial (row) pivoting: solves A X = Bm for the n x n matrix A
   (destroyed) and the n x m right-hand sides Bm (overwritten by X). */
static inline int mo__gauss_solve(int n, int m, double* A, double* Bm)
{
    int i, j, c, piv;
    for (c = 0; c < n; c++) {
        double best = fabs(A[(size_t)c * n + c]);
        piv = c;
        for (i = c + 1; i < n; i++) {
            double a = fabs(A[(size_t)i * n + c]);
            if (a > best) { best = a; piv = i; }
        }
        if (best != best || best == INFINITY) return MO_ENONFINITE;
        if (best == 0) return MO_ESINGULAR;
        if (piv != c) {
            for (j = 0; j < n; j++) {
                double t = A[(size_t)c * n + j];
                A[(size_t)c * n + j] = A[(size_t)piv * n + j];
                A[(size_t)piv * n + j] = t;
            }
            for (j = 0; j < m; j++) {
                double t = Bm[(size_t)c * m + j];
                Bm[(size_t)c * m + j] = Bm[(size_t)piv * m + j];
                Bm[(size_t)piv * m + j] = t;
            }
        }
        for (i = c + 1; i < n; i++) {
            double f = A[(size_t)i * n + c] / A[(size_t)c * n + c];
            if (f == 0) continue;
            A[(size_t)i * n + c] = 0;
            for (j = c + 1; j < n; j++) A[(size_t)i * n + j] -= f * A[(size_t)c * n + j];
            for (j = 0; j < m; j++) Bm[(size_t)i * m + j] -= f * Bm[(size_t)c * m + j];
        }
    }
    for (i = n - 1; i >= 0; i--) {
        for (j = 0; j < m; j++) {
            double s = Bm[(size_t)i * m + j];
            for (c = i + 1; c < n; c++) s -= A[(size_t)i * n + c] * Bm[(size_t)c * m + j];
            Bm[(size_t)i * m + j] = s / A[(size_t)i * n + i];
        }
    }
    return MO_OK;
}

/* ============================================================================================ */
/* per-head plumbing: the public functions copy one (b, h) slice into contiguous buffers
   (qh [T][K], kh [T][K], vh [T][V], gh [T], bh [T]), work on it, and scatter the results. */

static inline int mo__dims_ok(int B, int T, int H, int K, int V)
{
    return B >= 1 && T >= 1 && H >= 1 && K >= 1 && V >= 1;
}

/* rows [T][D] of head (b, h) from a [B,T,H,D] tensor (D = 1 for g, beta) */
static inline void mo__gather(const double* src, int b, int h, int T, int H, int D, double* dst)
{
    int t;
    for (t = 0; t < T; t++)
        memcpy(dst + (size_t)t * D, src + (((size_t)b * T + t) * H + h) * D, (size_t)D * sizeof(double));
}

static inline void mo__scatter(double* dst, int b, int h, int T, int H, int D, const double* src)
{
    int t;
    for (t = 0; t < T; t++)
        memcpy(dst + (((size_t)b * T + t) * H + h) * D, src + (size_t)t * D, (size_t)D * sizeof(double));
}

/* One head of (a), tokens t0..t1-1, starting from the states in Hs (K x K) and Ss (K x V),
   which are updated in place. Optional per-token outputs oh [T][V] and xh [T][K] are written at
   rows t. If doh != NULL the sum over the processed tokens of o_t . doh_t is added to *loss
   (Kahan-compensated through *comp). use_lu selects Gaussian elimination instead of Cholesky
   for the solve (needed when Hs is not symmetric). work: K*K + 2K doubles. */
static inline int mo__exact_head(int T, int K, int V, const double* qh, const double* kh,
                                 const double* vh, const double* gh, const double* bh,
                                 const double* lam, double* Hs, double* Ss, int t0, int t1,
                                 double* oh, double* xh, const double* doh, double* loss,
                                 double* comp, int use_lu, double* work)
{
    double* A = work;
    double* xt = work + (size_t)K * K;
    int t, i, j, rc;
    (void)T;
    for (t = t0; t < t1; t++) {
        const double* kt = kh + (size_t)t * K;
        const double* vt = vh + (size_t)t * V;
        double gam = gh ? exp(gh[t]) : 1.0, be = bh[t];
        for (i = 0; i < K; i++) {
            double bk = be * kt[i];
            for (j = 0; j < K; j++) Hs[(size_t)i * K + j] = gam * Hs[(size_t)i * K + j] + bk * kt[j];
            for (j = 0; j < V; j++) Ss[(size_t)i * V + j] = gam * Ss[(size_t)i * V + j] + bk * vt[j];
        }
        for (i = 0; i < K * K; i++) A[i] = Hs[i];
        for (i = 0; i < K; i++) A[(size_t)i * K + i] += lam[i];
        if (use_lu) {
            memcpy(xt, qh + (size_t)t * K, (size_t)K * sizeof(double));
            rc = mo__gauss_solve(K, 1, A, xt);
            if (rc) return rc;
        } else {
            rc = mo__cholesky(K, A, A);
            if (rc) return rc;
            mo__chol_solve(K, A, qh + (size_t)t * K, xt);
        }
        if (xh) memcpy(xh + (size_t)t * K, xt, (size_t)K * sizeof(double));
        for (j = 0; j < V; j++) {
            double s = 0;
            for (i = 0; i < K; i++) s += Ss[(size_t)i * V + j] * xt[i];
            if (oh) oh[(size_t)t * V + j] = s;
            if (doh) { /* Kahan */
                double y = s * doh[(size_t)t * V + j] - *comp;
                double z = *loss + y;
                *comp = (z - *loss) - y;
                *loss = z;
            }
        }
    }
    return MO_OK;
}

/* buffers for one head */
typedef struct {
    double *q, *k, *v, *g, *b, *o, *x, *Hs, *Ss, *work, *mem;
} mo__head_buf;

static inline int mo__head_alloc(mo__head_buf* hb, int T, int K, int V, size_t extra)
{
    size_t n = (size_t)T * (3 * (size_t)K + 2 * (size_t)V + 2) + (size_t)K * K + (size_t)K * V +
               (size_t)K * K + 2 * (size_t)K + extra;
    memset(hb, 0, sizeof(*hb));
    hb->mem = (double*)calloc(n, sizeof(double));
    if (!hb->mem) return MO_ENOMEM;
    hb->q = hb->mem;
    hb->k = hb->q + (size_t)T * K;
    hb->v = hb->k + (size_t)T * K;
    hb->g = hb->v + (size_t)T * V;
    hb->b = hb->g + T;
    hb->o = hb->b + T;
    hb->x = hb->o + (size_t)T * V;
    hb->Hs = hb->x + (size_t)T * K;
    hb->Ss = hb->Hs + (size_t)K * K;
    hb->work = hb->Ss + (size_t)K * V; /* K*K + 2K + extra */
    return MO_OK;
}

static inline void mo__head_load(mo__head_buf* hb, int b, int h, int T, int H, int K, int V,
                                 const double* q, const double* k, const double* v,
                                 const double* g, const double* beta)
{
    int t;
    mo__gather(q, b, h, T, H, K, hb->q);
    mo__gather(k, b, h, T, H, K, hb->k);
    mo__gather(v, b, h, T, H, V, hb->v);
    if (g) mo__gather(g, b, h, T, H, 1, hb->g);
    else for (t = 0; t < T; t++) hb->g[t] = 0;
    mo__gather(beta, b, h, T, H, 1, hb->b);
}

/* initial states of head (b, h) into Hs, Ss (zero when NULL) */
static inline void mo__state_load(double* Hs, double* Ss, int b, int h, int H, int K, int V,
                                  const double* hkk0, const double* hkv0)
{
    size_t bh = (size_t)b * H + h;
    if (hkk0) memcpy(Hs, hkk0 + bh * K * K, (size_t)K * K * sizeof(double));
    else memset(Hs, 0, (size_t)K * K * sizeof(double));
    if (hkv0) memcpy(Ss, hkv0 + bh * K * V, (size_t)K * V * sizeof(double));
    else memset(Ss, 0, (size_t)K * V * sizeof(double));
}

static inline void mo__state_store(const double* Hs, const double* Ss, int b, int h, int H, int K,
                                   int V, double* hkk, double* hkv)
{
    size_t bh = (size_t)b * H + h;
    if (hkk) memcpy(hkk + bh * K * K, Hs, (size_t)K * K * sizeof(double));
    if (hkv) memcpy(hkv + bh * K * V, Ss, (size_t)K * V * sizeof(double));
}

/* ============================================================================================ */
/* (a) exact                                                                                    */

static inline int mo_mesa_exact(int B, int T, int H, int K, int V, const double* q, const double* k,
                                const double* v, const double* g, const double* beta,
                                const double* lamb, const double* hkk0, const double* hkv0,
                                double* o, double* x, double* hkk, double* hkv)
{
    mo__head_buf hb;
    int b, h, rc = MO_OK;
    if (!mo__dims_ok(B, T, H, K, V) || !q || !k || !v || !beta || !lamb) return MO_EARG;
    if (mo__head_alloc(&hb, T, K, V, 0)) return MO_ENOMEM;
    for (b = 0; b < B && rc == MO_OK; b++) {
        for (h = 0; h < H && rc == MO_OK; h++) {
            mo__head_load(&hb, b, h, T, H, K, V, q, k, v, g, beta);
            mo__state_load(hb.Hs, hb.Ss, b, h, H, K, V, hkk0, hkv0);
            rc = mo__exact_head(T, K, V, hb.q, hb.k, hb.v, hb.g, hb.b, lamb + (size_t)h * K, hb.Hs,
                                hb.Ss, 0, T, hb.o, hb.x, NULL, NULL, NULL, 0, hb.work);
            if (rc) break;
            if (o) mo__scatter(o, b, h, T, H, V, hb.o);
            if (x) mo__scatter(x, b, h, T, H, K, hb.x);
            mo__state_store(hb.Hs, hb.Ss, b, h, H, K, V, hkk, hkv);
        }
    }
    free(hb.mem);
    return rc;
}

/* ============================================================================================ */
/* (b) closed-form ridge regression per t                                                       */

static inline int mo_mesa_lstsq(int B, int T, int H, int K, int V, const double* q, const double* k,
                                const double* v, const double* g, const double* beta,
                                const double* lamb, double* o)
{
    mo__head_buf hb;
    double *A, *R, *w;
    int b, h, t, tp, i, j, rc = MO_OK;
    if (!mo__dims_ok(B, T, H, K, V) || !q || !k || !v || !beta || !lamb || !o) return MO_EARG;
    /* extra: A (K*K), R (K*V: the transposed right-hand side), w (T) */
    if (mo__head_alloc(&hb, T, K, V, (size_t)K * K + (size_t)K * V + (size_t)T)) return MO_ENOMEM;
    A = hb.work + (size_t)K * K + 2 * (size_t)K;
    R = A + (size_t)K * K;
    w = R + (size_t)K * V;
    for (b = 0; b < B && rc == MO_OK; b++) {
        for (h = 0; h < H && rc == MO_OK; h++) {
            const double* lam = lamb + (size_t)h * K;
            mo__head_load(&hb, b, h, T, H, K, V, q, k, v, g, beta);
            for (t = 0; t < T; t++) {
                /* weights w_{t'} = exp(sum_{s=t'+1..t} g_s) beta_{t'}: the sum is accumulated
                   from s = t downwards, so each zeta is a plain sum of the raw gates */
                double lg = 0;
                for (tp = t; tp >= 0; tp--) {
                    w[tp] = exp(lg) * hb.b[tp];
                    lg += hb.g[tp];
                }
                /* A = sum w k k^T + Lambda ;  R = (sum w v k^T)^T = sum w k v^T   (K x V) */
                for (i = 0; i < K; i++) {
                    for (j = 0; j < K; j++) A[(size_t)i * K + j] = (i == j) ? lam[i] : 0.0;
                    for (j = 0; j < V; j++) R[(size_t)i * V + j] = 0.0;
                }
                for (tp = 0; tp <= t; tp++) {
                    const double* kt = hb.k + (size_t)tp * K;
                    const double* vt = hb.v + (size_t)tp * V;
                    for (i = 0; i < K; i++) {
                        double wk = w[tp] * kt[i];
                        for (j = 0; j < K; j++) A[(size_t)i * K + j] += wk * kt[j];
                        for (j = 0; j < V; j++) R[(size_t)i * V + j] += wk * vt[j];
                    }
                }
                /* Phi A = R^T  <=>  A^T Phi^T = R ; A is symmetric, but solve with A^T as
                   written so the normal equations are taken literally */
                for (i = 0; i < K; i++)
                    for (j = i + 1; j < K; j++) {
                        double tmp = A[(size_t)i * K + j];
                        A[(size_t)i * K + j] = A[(size_t)j * K + i];
                        A[(size_t)j * K + i] = tmp;
                    }
                rc = mo__gauss_solve(K, V, A, R); /* R <- Phi^T (K x V) */
                if (rc) break;
                for (j = 0; j < V; j++) { /* o_t = Phi q_t */
                    double s = 0;
                    for (i = 0; i < K; i++) s += R[(size_t)i * V + j] * hb.q[(size_t)t * K + i];
                    if (s != s || s == INFINITY || s == -INFINITY) rc = MO_ENONFINITE;
                    hb.o[(size_t)t * V + j] = s;
                }
                if (rc) break;
            }
            if (rc) break;
            mo__scatter(o, b, h, T, H, V, hb.o);
        }
    }
    free(hb.mem);
    return rc;
}

/* ============================================================================================ */
/* (c) finite-difference gradients through (a)                                                  */

typedef struct {
    int T, K, V;
    mo__head_buf* hb;     /* the head's inputs (perturbed in place) */
    const double* lam;    /* points at lamc (perturbed in place) */
    const double* doh;    /* [T][V] */
    const double* dHk;    /* K x K or NULL */
    const double* dSv;    /* K x V or NULL */
    const double* Hsave;  /* [T+1][K*K]: state before token t */
    const double* Ssave;  /* [T+1][K*V] */
    double *Hw, *Sw;      /* working states */
} mo__fd_ctx;

/* Loss of the head restricted to tokens t0..t1-1 (plus the final-state terms when t1 == T),
   starting from the saved unperturbed state before t0 (or from Hw/Sw as they are, if
   from_given). Terms of tokens < t0 and > t1-1 are unchanged by the perturbation and left out. */
static inline int mo__fd_loss(mo__fd_ctx* c, int t0, int t1, int from_given, int use_lu, double* out)
{
    int K = c->K, V = c->V, i, rc;
    double loss = 0, comp = 0;
    if (!from_given) {
        memcpy(c->Hw, c->Hsave + (size_t)t0 * K * K, (size_t)K * K * sizeof(double));
        memcpy(c->Sw, c->Ssave + (size_t)t0 * K * V, (size_t)K * V * sizeof(double));
    }
    rc = mo__exact_head(c->T, K, V, c->hb->q, c->hb->k, c->hb->v, c->hb->g, c->hb->b, c->lam, c->Hw,
                        c->Sw, t0, t1, NULL, NULL, c->doh, &loss, &comp, use_lu, c->hb->work);
    if (rc) return rc;
    if (t1 == c->T) {
        for (i = 0; i < K * K && c->dHk; i++) {
            double y = c->Hw[i] * c->dHk[i] - comp, z = loss + y;
            comp = (z - loss) - y;
            loss = z;
        }
        for (i = 0; i < K * V && c->dSv; i++) {
            double y = c->Sw[i] * c->dSv[i] - comp, z = loss + y;
            comp = (z - loss) - y;
            loss = z;
        }
    }
    *out = loss;
    return MO_OK;
}

/* Fourth-order central difference of mo__fd_loss w.r.t. *p. For the initial-state entries
   (initH / initS non-NULL, p pointing into one of them) every evaluation starts from them. */
static inline int mo__fd_one(mo__fd_ctx* c, double* p, double hstep, int t0, int t1,
                             const double* initH, const double* initS, int use_lu, double* d)
{
    static const double off[4] = {-2.0, -1.0, 1.0, 2.0};
    static const double wt[4] = {1.0, -8.0, 8.0, -1.0};
    double f[4], p0 = *p;
    int s, rc;
    for (s = 0; s < 4; s++) {
        *p = p0 + off[s] * hstep;
        if (initH) { /* p points into initH/initS: start from the perturbed copy */
            memcpy(c->Hw, initH, (size_t)c->K * c->K * sizeof(double));
            memcpy(c->Sw, initS, (size_t)c->K * c->V * sizeof(double));
        }
        rc = mo__fd_loss(c, t0, t1, initH != NULL, use_lu, &f[s]);
        if (rc) { *p = p0; return rc; }
    }
    *p = p0;
    *d = (wt[0] * f[0] + wt[1] * f[1] + wt[2] * f[2] + wt[3] * f[3]) / (12.0 * hstep);
    return MO_OK;
}

static inline int mo_mesa_grad_fd(int B, int T, int H, int K, int V, const double* q, const double* k,
                                  const double* v, const double* g, const double* beta,
                                  const double* lamb, const double* hkk0, const double* hkv0,
                                  const double* dout, const double* dhkk, const double* dhkv,
                                  double step, double* dq, double* dk, double* dv, double* dg,
                                  double* dbeta, double* dlamb, double* dhkk0, double* dhkv0)
{
    mo__head_buf hb;
    mo__fd_ctx c;
    double *doh, *Hsave, *Ssave, *Hw, *Sw, *H0, *S0, *lamc, *gd;
    size_t nT1 = (size_t)T + 1, KK = (size_t)K * K, KV = (size_t)K * V, extra;
    int b, h, t, i, rc = MO_OK;
    if (!mo__dims_ok(B, T, H, K, V) || !q || !k || !v || !beta || !lamb || !dout) return MO_EARG;
    if (!(step > 0)) step = 1e-5;
    if (dlamb) memset(dlamb, 0, (size_t)H * K * sizeof(double));
    /* extra: doh [T][V], Hsave [T+1][KK], Ssave [T+1][KV], Hw, Sw, H0, S0 (KK, KV each twice),
       lamc (K), gd (T*K): per-token gradient rows of the head */
    extra = (size_t)T * V + nT1 * (KK + KV) + 2 * (KK + KV) + (size_t)K + (size_t)T * (K > V ? K : V);
    if (mo__head_alloc(&hb, T, K, V, extra)) return MO_ENOMEM;
    doh = hb.work + KK + 2 * (size_t)K;
    Hsave = doh + (size_t)T * V;
    Ssave = Hsave + nT1 * KK;
    Hw = Ssave + nT1 * KV;
    Sw = Hw + KK;
    H0 = Sw + KV;
    S0 = H0 + KK;
    lamc = S0 + KV;
    gd = lamc + K;
    c.T = T; c.K = K; c.V = V; c.hb = &hb; c.lam = lamc; c.doh = doh; c.Hsave = Hsave;
    c.Ssave = Ssave; c.Hw = Hw; c.Sw = Sw;
    for (b = 0; b < B && rc == MO_OK; b++) {
        for (h = 0; h < H && rc == MO_OK; h++) {
            size_t bh = (size_t)b * H + h;
            mo__head_load(&hb, b, h, T, H, K, V, q, k, v, g, beta);
            mo__gather(dout, b, h, T, H, V, doh);
            memcpy(lamc, lamb + (size_t)h * K, (size_t)K * sizeof(double));
            c.dHk = dhkk ? dhkk + bh * KK : NULL;
            c.dSv = dhkv ? dhkv + bh * KV : NULL;
            /* unperturbed states before every token */
            mo__state_load(H0, S0, b, h, H, K, V, hkk0, hkv0);
            memcpy(Hsave, H0, KK * sizeof(double));
            memcpy(Ssave, S0, KV * sizeof(double));
            memcpy(Hw, H0, KK * sizeof(double));
            memcpy(Sw, S0, KV * sizeof(double));
            for (t = 0; t < T && rc == MO_OK; t++) {
                rc = mo__exact_head(T, K, V, hb.q, hb.k, hb.v, hb.g, hb.b, lamc, Hw, Sw, t, t + 1,
                                    NULL, NULL, NULL, NULL, NULL, 0, hb.work);
                memcpy(Hsave + (size_t)(t + 1) * KK, Hw, KK * sizeof(double));
                memcpy(Ssave + (size_t)(t + 1) * KV, Sw, KV * sizeof(double));
            }
            if (rc) break;
            /* q_t only changes o_t */
            if (dq) {
                for (t = 0; t < T && rc == MO_OK; t++)
                    for (i = 0; i < K && rc == MO_OK; i++)
                        rc = mo__fd_one(&c, &hb.q[(size_t)t * K + i], step, t, t + 1, NULL, NULL, 0,
                                        &gd[(size_t)t * K + i]);
                if (rc) break;
                mo__scatter(dq, b, h, T, H, K, gd);
            }
            if (dk) {
                for (t = 0; t < T && rc == MO_OK; t++)
                    for (i = 0; i < K && rc == MO_OK; i++)
                        rc = mo__fd_one(&c, &hb.k[(size_t)t * K + i], step, t, T, NULL, NULL, 0,
                                        &gd[(size_t)t * K + i]);
                if (rc) break;
                mo__scatter(dk, b, h, T, H, K, gd);
            }
            if (dv) {
                for (t = 0; t < T && rc == MO_OK; t++)
                    for (i = 0; i < V && rc == MO_OK; i++)
                        rc = mo__fd_one(&c, &hb.v[(size_t)t * V + i], step, t, T, NULL, NULL, 0,
                                        &gd[(size_t)t * V + i]);
                if (rc) break;
                mo__scatter(dv, b, h, T, H, V, gd);
            }
            if (dg) {
                for (t = 0; t < T && rc == MO_OK; t++)
                    rc = mo__fd_one(&c, &hb.g[t], step, t, T, NULL, NULL, 0, &gd[t]);
                if (rc) break;
                mo__scatter(dg, b, h, T, H, 1, gd);
            }
            if (dbeta) {
                for (t = 0; t < T && rc == MO_OK; t++)
                    rc = mo__fd_one(&c, &hb.b[t], step, t, T, NULL, NULL, 0, &gd[t]);
                if (rc) break;
                mo__scatter(dbeta, b, h, T, H, 1, gd);
            }
            if (dlamb) { /* summed over the batch */
                for (i = 0; i < K && rc == MO_OK; i++) {
                    double d = 0;
                    rc = mo__fd_one(&c, &lamc[i], step, 0, T, NULL, NULL, 0, &d);
                    dlamb[(size_t)h * K + i] += d;
                }
                if (rc) break;
            }
            if (dhkk0) { /* non-symmetric perturbation of one entry: LU solves */
                for (i = 0; i < K * K && rc == MO_OK; i++)
                    rc = mo__fd_one(&c, &H0[i], step, 0, T, H0, S0, 1, &dhkk0[bh * KK + (size_t)i]);
                if (rc) break;
            }
            if (dhkv0) {
                for (i = 0; i < K * V && rc == MO_OK; i++)
                    rc = mo__fd_one(&c, &S0[i], step, 0, T, H0, S0, 0, &dhkv0[bh * KV + (size_t)i]);
                if (rc) break;
            }
        }
    }
    free(hb.mem);
    return rc;
}

/* ============================================================================================ */
/* (d) fla's CG per token                                                                       */

static inline int mo_mesa_cg_fla(int B, int T, int H, int K, int V, const double* q, const double* k,
                                 const double* v, const double* g, const double* beta,
                                 const double* lamb, const double* hkk0, const double* hkv0,
                                 int n_iter, int x0_mode, double eps, double* o, double* x,
                                 double* hkk, double* hkv)
{
    double *Hs, *Ss, *xt, *r, *p, *Ap, *ot, *mem;
    size_t KK = (size_t)K * K, KV = (size_t)K * V;
    int b, h, t, i, j, it;
    if (!mo__dims_ok(B, T, H, K, V) || !q || !k || !v || !beta || !lamb) return MO_EARG;
    if (n_iter < 0 || x0_mode < MO_CG_X0_ZERO || x0_mode > MO_CG_X0_JACOBI_EPS) return MO_EARG;
    if (!(eps >= 0) || eps == INFINITY) return MO_EARG;
    mem = (double*)malloc((KK + KV + 4 * (size_t)K + (size_t)V) * sizeof(double));
    if (!mem) return MO_ENOMEM;
    Hs = mem;
    Ss = Hs + KK;
    xt = Ss + KV;
    r = xt + K;
    p = r + K;
    Ap = p + K;
    ot = Ap + K;
    for (b = 0; b < B; b++) {
        for (h = 0; h < H; h++) {
            const double* lam = lamb + (size_t)h * K;
            mo__state_load(Hs, Ss, b, h, H, K, V, hkk0, hkv0);
            for (t = 0; t < T; t++) {
                size_t row = ((size_t)b * T + t) * H + h;
                const double* qt = q + row * K;
                const double* kt = k + row * K;
                const double* vt = v + row * V;
                double gam = g ? exp(g[row]) : 1.0, be = beta[row], delta;
                /* state update */
                for (i = 0; i < K; i++) {
                    double bk = be * kt[i];
                    for (j = 0; j < K; j++) Hs[(size_t)i * K + j] = gam * Hs[(size_t)i * K + j] + bk * kt[j];
                    for (j = 0; j < V; j++) Ss[(size_t)i * V + j] = gam * Ss[(size_t)i * V + j] + bk * vt[j];
                }
                /* x0 and r = q - A x0 */
                for (i = 0; i < K; i++) {
                    if (x0_mode == MO_CG_X0_ZERO) xt[i] = 0;
                    else if (x0_mode == MO_CG_X0_JACOBI) xt[i] = qt[i] / (Hs[(size_t)i * K + i] + lam[i]);
                    else xt[i] = qt[i] / (Hs[(size_t)i * K + i] + lam[i] + eps);
                }
                delta = 0;
                for (i = 0; i < K; i++) {
                    double s = 0;
                    for (j = 0; j < K; j++) s += Hs[(size_t)i * K + j] * xt[j];
                    r[i] = qt[i] - (s + lam[i] * xt[i]);
                    p[i] = r[i];
                    delta += r[i] * r[i];
                }
                for (it = 0; it < n_iter; it++) {
                    double pAp = 0, den, alpha, dnew, cgb;
                    for (i = 0; i < K; i++) {
                        double s = 0;
                        for (j = 0; j < K; j++) s += Hs[(size_t)i * K + j] * p[j];
                        Ap[i] = s + lam[i] * p[i];
                        pAp += p[i] * Ap[i];
                    }
                    den = pAp + eps;
                    if (den == 0) break; /* only possible with eps == 0: converged exactly */
                    alpha = delta / den;
                    dnew = 0;
                    for (i = 0; i < K; i++) {
                        xt[i] += alpha * p[i];
                        r[i] -= alpha * Ap[i];
                        dnew += r[i] * r[i];
                    }
                    den = delta + eps;
                    cgb = den == 0 ? 0.0 : dnew / den;
                    for (i = 0; i < K; i++) p[i] = r[i] + cgb * p[i];
                    delta = dnew;
                }
                if (x) memcpy(x + row * K, xt, (size_t)K * sizeof(double));
                if (o) {
                    for (j = 0; j < V; j++) {
                        double s = 0;
                        for (i = 0; i < K; i++) s += Ss[(size_t)i * V + j] * xt[i];
                        ot[j] = s;
                    }
                    memcpy(o + row * V, ot, (size_t)V * sizeof(double));
                }
            }
            mo__state_store(Hs, Ss, b, h, H, K, V, hkk, hkv);
        }
    }
    free(mem);
    return MO_OK;
}

#endif /* MO_MESA_ORACLE_H */
