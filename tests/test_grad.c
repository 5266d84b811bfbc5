// Finite-difference gradient checks of every op's backward (double build, tiny shapes).
// For an op y = f(x) we pick a random upstream w, set L = sum(y * w), run the backward with
// dout = w, and compare every input gradient with the central difference
// (L(x + h e_i) - L(x - h e_i)) / 2h, h = 1e-6. In double this agrees to ~1e-8 relative;
// the bound below (1e-6) leaves room for the O(h^2) truncation, and a wrong formula is off by O(1).
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include "testutil.h"
#include <stdlib.h>
#include <string.h>

#ifndef MESANET_DOUBLE
#error "test_grad needs the double build (-DMESANET_DOUBLE)"
#endif

#define MAXN 20000
static mn_rng rng;
static double W[MAXN];                      // upstream gradient for L = sum(y * W)
static void fill(double* x, size_t n, double s) { size_t i; for (i = 0; i < n; i++) x[i] = s * mn_rng_normal(&rng); }
static void zero(double* x, size_t n) { memset(x, 0, n * sizeof(double)); }
static double dotw(const double* y, size_t n) {
    double s = 0; size_t i; for (i = 0; i < n; i++) s += y[i] * W[i]; return s;
}

// Central-difference check of an analytic gradient g of loss() with respect to x (n values).
static void fd_check(const char* name, double* x, size_t n, const double* g, double (*loss)(void)) {
    static double num[MAXN];
    size_t i; double h = 1e-6;
    for (i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h; double lp = loss();
        x[i] = x0 - h; double lm = loss();
        x[i] = x0;
        num[i] = (lp - lm) / (2 * h);
    }
    double e = tu_relerr(g, num, n);
    TU_CHECK(e < 1e-6, "%s: gradient rel err %.3e", name, e);
    printf("  %-28s fd rel err %.2e\n", name, e);
}

// ---- shared buffers
static double X[MAXN], X2[MAXN], Wt[MAXN], Bi[MAXN], Y[MAXN], S[MAXN], S2[MAXN];
static double dX[MAXN], dX2[MAXN], dWt[MAXN], dBi[MAXN], dS[MAXN];
static int TOK[64];
static size_t gN, gC, gO, gB, gT, gH, gD, gK, gW;
static double gscale, gcap;

static double L_matmul(void) { mn_matmul_forward(Y, X, Wt, Bi, gN, gC, gO); return dotw(Y, gN * gO); }
static double L_rmsg(void) { mn_rmsnorm_gated_forward(Y, S, X, X2, Wt, gN, gC, 1e-5); return dotw(Y, gN * gC); }
static double L_rms(void) { mn_rmsnorm_forward(Y, S, X, Wt, gN, gC, 1e-5); return dotw(Y, gN * gC); }
static double L_swiglu(void) { mn_swiglu_forward(Y, X, X2, gN); return dotw(Y, gN); }
static double L_conv(void) { mn_shortconv_forward(Y, X, Wt, gB, gT, gC, gK, 1); return dotw(Y, gB * gT * gC); }
static double L_l2(void) { mn_l2norm_forward(Y, S, X, gN, gD); return dotw(Y, gN * gD); }
static double L_rope(void) { mn_rope_forward(Y, X, gB, gT, gH, gD, 3, 10000.0); return dotw(Y, gB * gT * gH * gD); }
static double L_emb(void) { mn_embedding_forward(Y, TOK, Wt, gN, gC); return dotw(Y, gN * gC); }
static double L_ce(void) {
    size_t i; double s = 0;
    mn_crossentropy_forward(Y, X, TOK, gN, gO, gcap);
    for (i = 0; i < gN; i++) s += Y[i] * W[i];
    return s;
}
static double L_sig(void) { mn_sigmoid_forward(Y, X, gN); return dotw(Y, gN); }
static double L_lsig(void) { mn_logsigmoid_forward(Y, X, gN); return dotw(Y, gN); }
static double L_splus(void) { mn_softplus_forward(Y, X, gN); return dotw(Y, gN); }
static double L_gelu(void) { mn_gelu_forward(Y, X, gN); return dotw(Y, gN); }
static double L_attn(void) {   // q = X, k = X2, v = Wt
    mn_attention_forward(Y, S2, X, X2, Wt, gB, gT, gH, gD, gD, gW, gscale);
    return dotw(Y, gB * gT * gH * gD);
}
static double L_attn_naive(void) {
    mn_attention_forward_naive(Y, S, X, X2, Wt, gB, gT, gH, gD, gD, gW, gscale);
    return dotw(Y, gB * gT * gH * gD);
}

static void test_matmul(void) {
    gN = 5; gC = 7; gO = 6;
    fill(X, gN * gC, 1); fill(Wt, gO * gC, 1); fill(Bi, gO, 1); fill(W, gN * gO, 1);
    zero(dX, gN * gC); zero(dWt, gO * gC); zero(dBi, gO);
    mn_matmul_backward(dX, dWt, dBi, W, X, Wt, gN, gC, gO);
    fd_check("matmul dinp", X, gN * gC, dX, L_matmul);
    fd_check("matmul dweight", Wt, gO * gC, dWt, L_matmul);
    fd_check("matmul dbias", Bi, gO, dBi, L_matmul);
    // the gemm form against the naive triple loop
    mn_matmul_forward(Y, X, Wt, Bi, gN, gC, gO);
    mn_matmul_forward_naive(S, X, Wt, Bi, gN, gC, gO);
    double e = tu_relerr(Y, S, gN * gO);
    TU_CHECK(e < 1e-14, "matmul vs naive %.3e", e);
}
static void test_rmsnorm(void) {
    gN = 4; gC = 9;
    fill(X, gN * gC, 1); fill(Wt, gC, 1); fill(W, gN * gC, 1);
    L_rms(); zero(dX, gN * gC); zero(dWt, gC);
    mn_rmsnorm_backward(dX, dWt, W, S, X, Wt, gN, gC);
    fd_check("rmsnorm dinp", X, gN * gC, dX, L_rms);
    fd_check("rmsnorm dweight", Wt, gC, dWt, L_rms);
}
static void test_rmsnorm_gated(void) {
    gN = 4; gC = 9;
    fill(X, gN * gC, 1); fill(X2, gN * gC, 2); fill(Wt, gC, 1); fill(W, gN * gC, 1);
    L_rmsg(); zero(dX, gN * gC); zero(dX2, gN * gC); zero(dWt, gC);
    mn_rmsnorm_gated_backward(dX, dX2, dWt, W, S, X, X2, Wt, gN, gC);
    fd_check("rmsnorm_gated dinp", X, gN * gC, dX, L_rmsg);
    fd_check("rmsnorm_gated dgate", X2, gN * gC, dX2, L_rmsg);
    fd_check("rmsnorm_gated dweight", Wt, gC, dWt, L_rmsg);
}
static void test_swiglu(void) {
    gN = 30; fill(X, gN, 2); fill(X2, gN, 1); fill(W, gN, 1); zero(dX, gN); zero(dX2, gN);
    mn_swiglu_backward(dX, dX2, W, X, X2, gN);
    fd_check("swiglu dgate", X, gN, dX, L_swiglu);
    fd_check("swiglu dup", X2, gN, dX2, L_swiglu);
}
static void test_gates(void) {
    gN = 40; fill(X, gN, 4); X[0] = 25; X[1] = -30;   // include the far tails
    fill(W, gN, 1);
    zero(dX, gN); mn_sigmoid_backward(dX, W, X, gN); fd_check("sigmoid", X, gN, dX, L_sig);
    zero(dX, gN); mn_logsigmoid_backward(dX, W, X, gN); fd_check("logsigmoid", X, gN, dX, L_lsig);
    zero(dX, gN); mn_softplus_backward(dX, W, X, gN); fd_check("softplus", X, gN, dX, L_splus);
    zero(dX, gN); mn_gelu_backward(dX, W, X, gN); fd_check("gelu (tanh)", X, gN, dX, L_gelu);
    mn_logsigmoid_forward(Y, X, 2);
    TU_CHECK(fabs(Y[0] - (-log1p(exp(-25.0)))) < 1e-15 && fabs(Y[1] + 30) < 1e-12, "logsigmoid tails");
}
static void test_residual(void) {
    size_t i, n = 10; int ok = 1;
    fill(X, n, 1); fill(X2, n, 1); fill(W, n, 1); zero(dX, n); zero(dX2, n);
    mn_residual_forward(Y, X, X2, n);
    mn_residual_backward(dX, dX2, W, n);
    for (i = 0; i < n; i++) ok &= Y[i] == X[i] + X2[i] && dX[i] == W[i] && dX2[i] == W[i];
    TU_CHECK(ok, "residual forward/backward");
}
static void test_shortconv(void) {
    size_t i;
    gB = 2; gT = 7; gC = 3; gK = 4;
    fill(X, gB * gT * gC, 1); fill(Wt, gC * gK, 0.7); fill(W, gB * gT * gC, 1);
    zero(dX, gB * gT * gC); zero(dWt, gC * gK);
    mn_shortconv_backward(dX, dWt, W, X, Wt, gB, gT, gC, gK, 1);
    fd_check("shortconv dinp", X, gB * gT * gC, dX, L_conv);
    fd_check("shortconv dweight", Wt, gC * gK, dWt, L_conv);
    // the step form reproduces the sequence form token by token
    double state[3 * 3] = { 0 }, out[3], e = 0;
    L_conv();
    for (i = 0; i < gT; i++) {
        size_t c;
        mn_shortconv_step(out, state, X + i * gC, Wt, gC, gK, 1);
        for (c = 0; c < gC; c++) e = fmax(e, fabs(out[c] - Y[i * gC + c]));
    }
    TU_CHECK(e < 1e-14, "shortconv step vs forward %.3e", e);
}
static void test_l2norm(void) {
    gN = 6; gD = 5;
    fill(X, gN * gD, 1); fill(W, gN * gD, 1);
    L_l2(); zero(dX, gN * gD);
    mn_l2norm_backward(dX, W, Y, S, gN, gD);
    fd_check("l2norm dinp", X, gN * gD, dX, L_l2);
}
static void test_rope(void) {
    gB = 2; gT = 3; gH = 2; gD = 8;
    size_t n = gB * gT * gH * gD;
    fill(X, n, 1); fill(W, n, 1); zero(dX, n);
    mn_rope_backward(dX, W, gB, gT, gH, gD, 3, 10000.0);
    fd_check("rope dinp", X, n, dX, L_rope);
    // rotation preserves the norm of each pair, and position 0 is the identity
    mn_rope_forward(Y, X, 1, 1, 1, gD, 0, 10000.0);
    TU_CHECK(tu_relerr(Y, X, gD) == 0, "rope at position 0 is the identity");
}
static void test_embedding(void) {
    size_t i;
    gN = 6; gC = 4;
    for (i = 0; i < gN; i++) TOK[i] = (int)(i * 7 % 5);
    fill(Wt, 5 * gC, 1); fill(W, gN * gC, 1); zero(dWt, 5 * gC);
    mn_embedding_backward(dWt, W, TOK, gN, gC);
    fd_check("embedding dwte", Wt, 5 * gC, dWt, L_emb);
}
static void test_crossentropy(void) {
    size_t i;
    int cap;
    gN = 5; gO = 7;
    for (cap = 0; cap < 2; cap++) {
        gcap = cap ? 2.0 : 0.0;
        for (i = 0; i < gN; i++) TOK[i] = i == 2 ? -1 : (int)(i * 3 % gO);   // row 2 carries no loss
        fill(X, gN * gO, 2); fill(W, gN, 1); zero(dX, gN * gO);
        mn_crossentropy_backward(dX, W, X, TOK, gN, gO, gcap);
        fd_check(cap ? "crossentropy dlogits capped" : "crossentropy dlogits", X, gN * gO, dX, L_ce);
    }
    // a uniform distribution over V gives log V
    for (i = 0; i < gO; i++) X[i] = 0.3;
    TOK[0] = 1;
    mn_crossentropy_forward(Y, X, TOK, 1, gO, 0);
    TU_CHECK(fabs(Y[0] - log((double)gO)) < 1e-14, "crossentropy of uniform logits = log V");
}
static void test_attention(void) {
    size_t w;
    gB = 2; gT = 9; gH = 2; gD = 4; gscale = 0.5;
    size_t n = gB * gT * gH * gD;
    for (w = 0; w <= 3; w += 3) {     // full causal, then a window of 3 keys
        gW = w;
        fill(X, n, 1); fill(X2, n, 1); fill(Wt, n, 1); fill(W, n, 1);
        zero(dX, n); zero(dX2, n); zero(dWt, n);
        L_attn();
        mn_attention_backward(dX, dX2, dWt, W, S2, X, X2, Wt, gB, gT, gH, gD, gD, gW, gscale, dS);
        fd_check(w ? "swa dq" : "attn dq", X, n, dX, L_attn);
        fd_check(w ? "swa dk" : "attn dk", X2, n, dX2, L_attn);
        fd_check(w ? "swa dv" : "attn dv", Wt, n, dWt, L_attn);
        // the naive online-softmax form: same outputs, same gradients
        double Ym[MAXN / 4];
        L_attn(); memcpy(Ym, Y, n * sizeof(double));
        L_attn_naive();
        TU_CHECK(tu_relerr(Y, Ym, n) < 1e-14, "attention naive vs matrix forward");
        static double nq[MAXN], nk[MAXN], nv[MAXN];
        zero(nq, n); zero(nk, n); zero(nv, n);
        mn_attention_backward_naive(nq, nk, nv, W, Y, S, X, X2, Wt, gB, gT, gH, gD, gD, gW, gscale);
        TU_CHECK(tu_relerr(nq, dX, n) < 1e-13 && tu_relerr(nk, dX2, n) < 1e-13 && tu_relerr(nv, dWt, n) < 1e-13,
                 "attention naive vs matrix backward");
        // the step form with a KV cache (ring buffer of exactly W slots for SWA)
        double kc[64 * 8], vc[64 * 8], sc[64], o[8], e = 0;
        size_t b = 1, t, len = w ? w : gT;
        for (t = 0; t < gT; t++) {
            size_t off = (b * gT + t) * gH * gD, i;
            mn_attention_step(o, kc, vc, X + off, X2 + off, Wt + off, t, len, gH, gD, gD, gW, gscale, sc);
            for (i = 0; i < gH * gD; i++) e = fmax(e, fabs(o[i] - Y[off + i]));
        }
        TU_CHECK(e < 1e-14, "attention step vs forward (window %zu): %.3e", w, e);
    }
}
static void test_adamw_and_schedule(void) {
    // one AdamW step from zero moments moves each parameter by lr * sign(g) (bias-corrected),
    // plus the decoupled decay lr * wd * p
    double p[3] = { 1, -2, 0.5 }, g[3] = { 0.1, -3, 0 }, m[3] = { 0 }, v[3] = { 0 };
    mn_adamw_update(p, g, m, v, 3, 0.01, 0.9, 0.98, 1e-8, 0.1, 1);
    TU_CHECK(fabs(p[0] - (1 * (1 - 0.001) - 0.01 * 0.1 / (0.1 + 1e-8))) < 1e-12, "adamw step p0 %.17g", p[0]);
    TU_CHECK(fabs(p[1] - (-2 * (1 - 0.001) + 0.01 * 3 / (3 + 1e-8))) < 1e-12, "adamw step p1 %.17g", p[1]);
    TU_CHECK(fabs(p[2] - 0.5 * (1 - 0.001)) < 1e-15, "adamw zero grad only decays");
    TU_CHECK(fabs(mn_lr_schedule(0, 10, 100, 1.0, 0.1) - 0.1) < 1e-15, "warmup starts at lr/warmup");
    TU_CHECK(fabs(mn_lr_schedule(9, 10, 100, 1.0, 0.1) - 1.0) < 1e-15, "warmup ends at lr");
    TU_CHECK(fabs(mn_lr_schedule(55, 10, 100, 1.0, 0.1) - 0.55) < 1e-12, "cosine midpoint");
    TU_CHECK(fabs(mn_lr_schedule(100, 10, 100, 1.0, 0.1) - 0.1) < 1e-15, "schedule ends at lr_min");
}

int main(void) {
    mn_rng_seed(&rng, 42);
    test_matmul(); test_rmsnorm(); test_rmsnorm_gated(); test_swiglu(); test_gates(); test_residual(); test_shortconv();
    test_l2norm();
    test_rope(); test_embedding(); test_crossentropy(); test_attention(); test_adamw_and_schedule();
    return tu_finish("test_grad");
}
