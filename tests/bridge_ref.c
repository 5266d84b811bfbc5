// bridge_ref.c - the C side of tests/test_bridge.py: runs every mixer op (each form, forward, backward,
// step), the Mesa op's forms and a small model through mesanet.h directly, and writes the inputs and
// the results to one .vec file per case, every value as a C99 hex float (%a, exact). The Python test
// feeds the same inputs through notebooks/mesanet.py and demands the same bits.
// Build: double, plain C (the same flags as build/libmesanet_f64.so). Run: bridge_ref DIR
#define MESANET_IMPLEMENTATION
#include "mesanet.h"
#include <stdarg.h>

static FILE* vf;
static mn_rng rng;
enum { B = 2, T = 7, H = 2, K = 4, V = 3, CH = 3, L = 2 * 7 * 2 };  // CH: chunk; L = B*T*H rows

static int vopen(const char* dir, const char* name, const char* op) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.vec", dir, name);
    if (!(vf = fopen(path, "w"))) { fprintf(stderr, "bridge_ref: cannot write %s\n", path); return -1; }
    fprintf(vf, "op %s\nsource tests/bridge_ref.c\nattr precision float64\n", op);
    return 0;
}
static void vattr(const char* name, const char* fmt, ...) {
    va_list ap;
    fprintf(vf, "attr %s ", name);
    va_start(ap, fmt); vfprintf(vf, fmt, ap); va_end(ap);
    fputc('\n', vf);
}
// tensor name, ndim, dims...; values from x (mn_real) or xi (int)
static void vput_(const char* name, const mn_real* x, const int* xi, int ndim, va_list ap) {
    size_t n = 1, i; int d;
    fprintf(vf, "tensor %s %d", name, ndim);
    for (d = 0; d < ndim; d++) { size_t s = va_arg(ap, size_t); n *= s; fprintf(vf, " %zu", s); }
    fputc('\n', vf);
    for (i = 0; i < n; i++) fprintf(vf, "%a%c", x ? (double)x[i] : (double)xi[i],
            i % 8 == 7 || i == n - 1 ? '\n' : ' ');
}
static void vput(const char* name, const mn_real* x, int ndim, ...) {
    va_list ap; va_start(ap, ndim); vput_(name, x, NULL, ndim, ap); va_end(ap);
}
static void vputi(const char* name, const int* x, int ndim, ...) {
    va_list ap; va_start(ap, ndim); vput_(name, NULL, x, ndim, ap); va_end(ap);
}
static int vclose(void) { fprintf(vf, "end\n"); return fclose(vf) ? -1 : 0; }

// n values: 'n' N(0,1), 's' sigmoid(N(0,1)) in (0,1), 'g' logsigmoid(N(2,1)) < 0, 'u' U(0.25,1)
static mn_real* rnd(size_t n, char kind) {
    mn_real* x = (mn_real*)calloc(n, sizeof(mn_real)); size_t i;
    for (i = 0; i < n; i++) {
        double z = mn_rng_normal(&rng);
        x[i] = (mn_real)(kind == 's' ? 1 / (1 + exp(-z)) : kind == 'g' ? -log1p(exp(-(z + 2))) :
                         kind == 'u' ? 0.25 + 0.75 * mn_rng_uniform(&rng) : z);
    }
    return x;
}
static mn_real* zeros(size_t n) { return (mn_real*)calloc(n ? n : 1, sizeof(mn_real)); }
static void l2rows(mn_real* x, size_t rows, size_t d) {   // unit rows (what Mesa and the delta rule see)
    size_t r, i;
    for (r = 0; r < rows; r++) {
        double s = 0;
        for (i = 0; i < d; i++) s += (double)x[r * d + i] * x[r * d + i];
        for (i = 0; i < d; i++) x[r * d + i] = (mn_real)(x[r * d + i] / sqrt(s));
    }
}
static mn_real* copy(const mn_real* x, size_t n) { mn_real* y = zeros(n); memcpy(y, x, n * sizeof(mn_real)); return y; }
// row t of each sequence b of a (B,T,H,D) tensor into (B,H,D)
static void take_t(mn_real* dst, const mn_real* src, size_t t, size_t D) {
    size_t b;
    for (b = 0; b < B; b++) memcpy(dst + b * H * D, src + ((size_t)b * T + t) * H * D, H * D * sizeof(mn_real));
}
static void put_t(mn_real* dst, const mn_real* src, size_t t, size_t D) {
    size_t b;
    for (b = 0; b < B; b++) memcpy(dst + ((size_t)b * T + t) * H * D, src + b * H * D, H * D * sizeof(mn_real));
}

static int case_attn(const char* dir, size_t window) {
    char name[32]; double sc = 0.5; size_t t, b;
    mn_real *q = rnd(L * K, 'n'), *k = rnd(L * K, 'n'), *v = rnd(L * V, 'n'), *dout = rnd(L * V, 'n');
    mn_real *out = zeros(L * V), *att = zeros(B * H * T * T), *dq = zeros(L * K), *dk = zeros(L * K),
            *dv = zeros(L * V);
    mn_real *outn = zeros(L * V), *lse = zeros(L), *dqn = zeros(L * K), *dkn = zeros(L * K), *dvn = zeros(L * V);
    mn_real *outs = zeros(L * V), *kc = zeros(T * H * K), *vc = zeros(T * H * V), *sco = zeros(T);
    snprintf(name, sizeof name, "attn_w%zu", window);
    if (vopen(dir, name, "bridge_attention")) return -1;
    vattr("window", "%zu", window);
    mn_attention_forward(out, att, q, k, v, B, T, H, K, V, window, sc);
    mn_attention_backward(dq, dk, dv, dout, att, q, k, v, B, T, H, K, V, window, sc, zeros(B * H * T * T));
    mn_attention_forward_naive(outn, lse, q, k, v, B, T, H, K, V, window, sc);
    mn_attention_backward_naive(dqn, dkn, dvn, dout, outn, lse, q, k, v, B, T, H, K, V, window, sc);
    for (b = 0; b < B; b++) {                       // the step: sequence b through its own cache
        memset(kc, 0, T * H * K * sizeof(mn_real)); memset(vc, 0, T * H * V * sizeof(mn_real));
        for (t = 0; t < T; t++) {
            size_t r = (b * T + t) * H;
            mn_attention_step(outs + r * V, kc, vc, q + r * K, k + r * K, v + r * V, t, T, H, K, V, window, sc, sco);
        }
    }
    vput("q", q, 4, B, T, H, K); vput("k", k, 4, B, T, H, K); vput("v", v, 4, B, T, H, V); vput("do", dout, 4, B, T,
            H, V);
    vput("out", out, 4, B, T, H, V); vput("att", att, 4, B, H, T, T);
    vput("dq", dq, 4, B, T, H, K); vput("dk", dk, 4, B, T, H, K); vput("dv", dv, 4, B, T, H, V);
    vput("naive.out", outn, 4, B, T, H, V); vput("naive.lse", lse, 3, B, T, H);
    vput("naive.dq", dqn, 4, B, T, H, K); vput("naive.dk", dkn, 4, B, T, H, K); vput("naive.dv", dvn, 4, B, T, H, V);
    vput("step.out", outs, 4, B, T, H, V);
    return vclose();
}

static int case_gla(const char* dir, size_t G) {
    char name[32]; double sc = 0.5; size_t t;
    mn_real *q = rnd(L * K, 'n'), *k = rnd(L * K, 'n'), *v = rnd(L * V, 'n'), *g = G ? rnd(L * G, 'g') : NULL;
    mn_real *h0 = rnd(B * H * K * V, 'n'), *dout = rnd(L * V, 'n'), *dht = rnd(B * H * K * V, 'n');
    mn_real *o[2], *ht[2], *dq[2], *dk[2], *dv[2], *dg[2], *dh0[2];
    mn_real *st = copy(h0, B * H * K * V), *os = zeros(L * V), *qt = zeros(B * H * K), *kt = zeros(B * H * K);
    mn_real *vt = zeros(B * H * V), *gt = zeros(B * H * K), *ot = zeros(B * H * V);
    int f;
    for (f = 0; f < 2; f++) {
        o[f] = zeros(L * V); ht[f] = zeros(B * H * K * V); dq[f] = zeros(L * K); dk[f] = zeros(L * K);
        dv[f] = zeros(L * V); dg[f] = zeros(L * G); dh0[f] = zeros(B * H * K * V);
    }
    snprintf(name, sizeof name, "gla_G%zu", G);
    if (vopen(dir, name, "bridge_gla")) return -1;
    vattr("G", "%zu", G);
    mn_gla_forward(o[0], ht[0], q, k, v, g, h0, B, T, H, K, V, G, sc, CH, zeros(mn_gla_work_size(B, T, H, K, V, CH)));
    mn_gla_backward(dq[0], dk[0], dv[0], G ? dg[0] : NULL, dh0[0], dout, dht, q, k, v, g, h0, B, T, H, K, V, G, sc, CH,
                    zeros(mn_gla_work_size(B, T, H, K, V, CH)));
    mn_gla_forward_recurrent(o[1], ht[1], q, k, v, g, h0, B, T, H, K, V, G, sc);
    mn_gla_backward_recurrent(dq[1], dk[1], dv[1], G ? dg[1] : NULL, dh0[1], dout, dht, q, k, v, g, h0, B, T, H, K, V,
                              G, sc, zeros(mn_gla_work_size_recurrent(T, K, V)));
    for (t = 0; t < T; t++) {
        take_t(qt, q, t, K); take_t(kt, k, t, K); take_t(vt, v, t, V);
        if (G) take_t(gt, g, t, G);
        mn_gla_step(ot, st, qt, kt, vt, G ? gt : NULL, B, H, K, V, G, sc);
        put_t(os, ot, t, V);
    }
    vput("q", q, 4, B, T, H, K); vput("k", k, 4, B, T, H, K); vput("v", v, 4, B, T, H, V);
    if (G) vput("g", g, 4, B, T, H, G);
    vput("h0", h0, 4, B, H, K, V); vput("do", dout, 4, B, T, H, V); vput("dht", dht, 4, B, H, K, V);
    for (f = 0; f < 2; f++) {
        const char* p = f ? "rec." : "";
        char nm[32];
#define PUT(x, nd, ...) do { snprintf(nm, sizeof nm, "%s%s", p, #x); vput(nm, x[f], nd, __VA_ARGS__); } while (0)
        PUT(o, 4, B, T, H, V); PUT(ht, 4, B, H, K, V); PUT(dq, 4, B, T, H, K); PUT(dk, 4, B, T, H, K);
        PUT(dv, 4, B, T, H, V); PUT(dh0, 4, B, H, K, V);
        if (G) PUT(dg, 4, B, T, H, G);
#undef PUT
    }
    vput("step.out", os, 4, B, T, H, V); vput("step.state", st, 4, B, H, K, V);
    return vclose();
}

static int case_delta(const char* dir, int gated) {
    double sc = 0.5; size_t t, NC = (T + CH - 1) / CH;
    mn_real *q = rnd(L * K, 'n'), *k = rnd(L * K, 'n'), *v = rnd(L * V, 'n'), *beta = rnd(L, 's');
    mn_real *g = gated ? rnd(L, 'g') : NULL, *h0 = rnd(B * H * K * V, 'n'), *dout = rnd(L * V, 'n');
    mn_real *dht = rnd(B * H * K * V, 'n');
    mn_real *o0 = zeros(L * V), *ht0 = zeros(B * H * K * V), *hs = zeros(B * H * NC * K * V);
    mn_real *o1 = zeros(L * V), *ht1 = zeros(B * H * K * V), *states = zeros(B * H * T * K * V);
    mn_real *dq0 = zeros(L * K), *dk0 = zeros(L * K), *dv0 = zeros(L * V), *db0 = zeros(L), *dg0 = zeros(L);
    mn_real *dh00 = zeros(B * H * K * V), *dq1 = zeros(L * K), *dk1 = zeros(L * K), *dv1 = zeros(L * V);
    mn_real *db1 = zeros(L), *dg1 = zeros(L), *dh01 = zeros(B * H * K * V);
    mn_real *st = copy(h0, B * H * K * V), *os = zeros(L * V), *qt = zeros(B * H * K), *kt = zeros(B * H * K);
    mn_real *vt = zeros(B * H * V), *bt = zeros(B * H), *gt = zeros(B * H), *ot = zeros(B * H * V);
    l2rows(q, L, K); l2rows(k, L, K);
    if (vopen(dir, gated ? "delta_gated" : "delta", "bridge_delta_rule")) return -1;
    mn_delta_rule_forward(o0, ht0, hs, q, k, v, beta, g, h0, B, T, H, K, V, CH, sc,
                          zeros(mn_delta_rule_work_size(B, H, K, V, CH)));
    mn_delta_rule_backward(dq0, dk0, dv0, db0, gated ? dg0 : NULL, dh00, dout, dht, hs, q, k, v, beta, g, B, T, H, K, V,
                           CH, sc, zeros(mn_delta_rule_work_size(B, H, K, V, CH)));
    mn_delta_rule_forward_naive(o1, ht1, states, q, k, v, beta, g, h0, B, T, H, K, V, sc);
    mn_delta_rule_backward_naive(dq1, dk1, dv1, db1, gated ? dg1 : NULL, dh01, zeros(B * H * K * V), dout, dht, states,
                                 q, k, v, beta, g, B, T, H, K, V, sc);
    for (t = 0; t < T; t++) {
        take_t(qt, q, t, K); take_t(kt, k, t, K); take_t(vt, v, t, V); take_t(bt, beta, t, 1);
        if (gated) take_t(gt, g, t, 1);
        mn_delta_rule_step(ot, st, qt, kt, vt, bt, gated ? gt : NULL, B, H, K, V, sc);
        put_t(os, ot, t, V);
    }
    vput("q", q, 4, B, T, H, K); vput("k", k, 4, B, T, H, K); vput("v", v, 4, B, T, H, V); vput("beta", beta, 3, B, T,
            H);
    if (gated) vput("g", g, 3, B, T, H);
    vput("h0", h0, 4, B, H, K, V); vput("do", dout, 4, B, T, H, V); vput("dht", dht, 4, B, H, K, V);
    vput("o", o0, 4, B, T, H, V); vput("ht", ht0, 4, B, H, K, V); vput("hs", hs, 5, B, H, NC, K, V);
    vput("dq", dq0, 4, B, T, H, K); vput("dk", dk0, 4, B, T, H, K); vput("dv", dv0, 4, B, T, H, V);
    vput("dbeta", db0, 3, B, T, H); vput("dh0", dh00, 4, B, H, K, V);
    vput("naive.o", o1, 4, B, T, H, V); vput("naive.ht", ht1, 4, B, H, K, V); vput("naive.states", states, 5, B, H, T,
            K, V);
    vput("naive.dq", dq1, 4, B, T, H, K); vput("naive.dk", dk1, 4, B, T, H, K); vput("naive.dv", dv1, 4, B, T, H, V);
    vput("naive.dbeta", db1, 3, B, T, H); vput("naive.dh0", dh01, 4, B, H, K, V);
    if (gated) { vput("dg", dg0, 3, B, T, H); vput("naive.dg", dg1, 3, B, T, H); }
    vput("step.out", os, 4, B, T, H, V); vput("step.state", st, 4, B, H, K, V);
    return vclose();
}

static int case_ssd(const char* dir, int amode) {
    enum { P = 3, N = 4 };
    size_t t, i;
    mn_real *X = rnd(L * P, 'n'), *A = rnd(L, 'g'), *Bm = rnd(L * N, 'n'), *Cm = rnd(L * N, 'n');
    mn_real *h0 = rnd(B * H * P * N, 'n'), *dy = rnd(L * P, 'n'), *dht = rnd(B * H * P * N, 'n');
    mn_real *y0 = zeros(L * P), *ht0 = zeros(B * H * P * N), *y1 = zeros(L * P), *ht1 = zeros(B * H * P * N);
    mn_real *g0[5], *g1[5], *st = copy(h0, B * H * P * N), *ys = zeros(L * P);
    mn_real *Xt = zeros(B * H * P), *At = zeros(B * H), *Bt = zeros(B * H * N), *Ct = zeros(B * H * N),
            *yt = zeros(B * H * P);
    size_t gsz[5] = {L * P, L, L * N, L * N, B * H * P * N};
    for (i = 0; i < 5; i++) { g0[i] = zeros(gsz[i]); g1[i] = zeros(gsz[i]); }
    if (amode == MN_SSD_TRANSITION) for (i = 0; i < L; i++) A[i] = (mn_real)(2 * exp(A[i]) - 1);  // in (-1, 1)
    if (vopen(dir, amode ? "ssd_transition" : "ssd", "bridge_ssd")) return -1;
    vattr("amode", "%d", amode);
    if (amode == MN_SSD_LOG_DECAY) {
        mn_ssd_forward(y0, ht0, X, A, Bm, Cm, h0, B, T, H, P, N, CH, zeros(mn_ssd_work_size(B, T, H, P, N, CH)));
        mn_ssd_backward(g0[0], g0[1], g0[2], g0[3], g0[4], dy, dht, X, A, Bm, Cm, h0, B, T, H, P, N, CH,
                        zeros(mn_ssd_work_size(B, T, H, P, N, CH)));
    }
    mn_ssd_forward_recurrent(y1, ht1, X, A, Bm, Cm, h0, B, T, H, P, N, amode);
    mn_ssd_backward_recurrent(g1[0], g1[1], g1[2], g1[3], g1[4], dy, dht, X, A, Bm, Cm, h0, B, T, H, P, N, amode,
                              zeros(mn_ssd_work_size_recurrent(T, P, N)));
    for (t = 0; t < T; t++) {
        take_t(Xt, X, t, P); take_t(At, A, t, 1); take_t(Bt, Bm, t, N); take_t(Ct, Cm, t, N);
        mn_ssd_step(yt, st, Xt, At, Bt, Ct, B, H, P, N, amode);
        put_t(ys, yt, t, P);
    }
    vput("X", X, 4, B, T, H, P); vput("A", A, 3, B, T, H); vput("Bm", Bm, 4, B, T, H, N); vput("Cm", Cm, 4, B, T, H, N);
    vput("h0", h0, 4, B, H, P, N); vput("dy", dy, 4, B, T, H, P); vput("dht", dht, 4, B, H, P, N);
    if (amode == MN_SSD_LOG_DECAY) {
        vput("y", y0, 4, B, T, H, P); vput("ht", ht0, 4, B, H, P, N);
        vput("dX", g0[0], 4, B, T, H, P); vput("dA", g0[1], 3, B, T, H); vput("dB", g0[2], 4, B, T, H, N);
        vput("dC", g0[3], 4, B, T, H, N); vput("dh0", g0[4], 4, B, H, P, N);
    }
    vput("rec.y", y1, 4, B, T, H, P); vput("rec.ht", ht1, 4, B, H, P, N);
    vput("rec.dX", g1[0], 4, B, T, H, P); vput("rec.dA", g1[1], 3, B, T, H); vput("rec.dB", g1[2], 4, B, T, H, N);
    vput("rec.dC", g1[3], 4, B, T, H, N); vput("rec.dh0", g1[4], 4, B, H, P, N);
    vput("step.y", ys, 4, B, T, H, P); vput("step.state", st, 4, B, H, P, N);
    return vclose();
}

static int case_rglru(const char* dir) {
    enum { W = 6, NH = 2, BW = 3 };
    size_t t, i; double c = 8;
    mn_real *x = rnd(B * T * W, 'n'), *ap = rnd(W, 'n'), *wx = rnd(NH * BW * BW, 'n'), *bx = rnd(NH * BW, 'n');
    mn_real *wa = rnd(NH * BW * BW, 'n'), *ba = rnd(NH * BW, 'n'), *h0 = rnd(B * W, 'n'), *dy = rnd(B * T * W, 'n');
    mn_real *dht = rnd(B * W, 'n'), *y = zeros(B * T * W), *ht = zeros(B * W), *gates = zeros(2 * B * T * W);
    mn_real *dx = zeros(B * T * W), *dap = zeros(W), *dwx = zeros(NH * BW * BW), *dbx = zeros(NH * BW);
    mn_real *dwa = zeros(NH * BW * BW), *dba = zeros(NH * BW), *dh0 = zeros(B * W);
    mn_real *st = copy(h0, B * W), *ys = zeros(B * T * W), *xt = zeros(B * W), *yt = zeros(B * W);
    int seg[B * T], segt[B];
    for (i = 0; i < B * T; i++) seg[i] = (int)((i % T) % 4);          // resets at t = 0 and t = 4
    if (vopen(dir, "rglru", "bridge_rglru")) return -1;
    mn_rglru_forward(y, ht, gates, x, ap, wx, bx, wa, ba, h0, seg, B, T, W, NH, c);
    mn_rglru_backward(dx, dap, dwx, dbx, dwa, dba, dh0, dy, dht, y, gates, x, ap, wx, wa, h0, seg, B, T, W, NH, c,
                      zeros(mn_rglru_work_size(B, T, W)));
    for (t = 0; t < T; t++) {
        size_t b;
        for (b = 0; b < B; b++) {
            memcpy(xt + b * W, x + (b * T + t) * W, W * sizeof(mn_real));
            segt[b] = seg[b * T + t];
        }
        mn_rglru_step(yt, st, xt, ap, wx, bx, wa, ba, segt, B, W, NH, c, zeros(mn_rglru_work_size(B, 1, W)));
        for (b = 0; b < B; b++) memcpy(ys + (b * T + t) * W, yt + b * W, W * sizeof(mn_real));
    }
    vput("x", x, 3, B, T, W); vput("a_param", ap, 1, W); vput("wx", wx, 3, NH, BW, BW); vput("bx", bx, 2, NH, BW);
    vput("wa", wa, 3, NH, BW, BW); vput("ba", ba, 2, NH, BW); vput("h0", h0, 2, B, W); vputi("segment_pos", seg, 2, B,
            T);
    vput("dy", dy, 3, B, T, W); vput("dht", dht, 2, B, W);
    vput("y", y, 3, B, T, W); vput("ht", ht, 2, B, W); vput("gates", gates, 4, 2, B, T, W);
    vput("dx", dx, 3, B, T, W); vput("da_param", dap, 1, W); vput("dwx", dwx, 3, NH, BW, BW); vput("dbx", dbx, 2, NH,
            BW);
    vput("dwa", dwa, 3, NH, BW, BW); vput("dba", dba, 2, NH, BW); vput("dh0", dh0, 2, B, W);
    vput("step.y", ys, 3, B, T, W); vput("step.state", st, 2, B, W);
    return vclose();
}

static int case_mlstm(const char* dir) {
    double sc = 0.5, eps = 1e-6; size_t t, i; int mode;
    mn_real *q = rnd(L * K, 'n'), *k = rnd(L * K, 'n'), *v = rnd(L * V, 'n'), *ig = rnd(L, 'n'), *fg = rnd(L, 'n');
    mn_real *C0 = rnd(B * H * K * V, 'n'), *n0 = rnd(B * H * K, 'n'), *m0 = rnd(B * H, 'n'), *dout = rnd(L * V, 'n');
    mn_real *op = zeros(L * V), *np_ = zeros(L), *sp = zeros(L), *orr = zeros(L * V), *nr = zeros(L), *sr = zeros(L);
    mn_real *Cr = zeros(B * H * K * V), *nrt = zeros(B * H * K), *mr = zeros(B * H);
    mn_real *oc = zeros(L * V), *nc = zeros(L), *scc = zeros(L), *Cc = zeros(B * H * K * V), *nct = zeros(B * H * K);
    mn_real *mc = zeros(B * H), *g[2][5], *gc[7];
    mn_real *Cs = copy(C0, B * H * K * V), *ns = copy(n0, B * H * K), *ms = copy(m0, B * H), *os = zeros(L * V);
    mn_real *qt = zeros(B * H * K), *kt = zeros(B * H * K), *vt = zeros(B * H * V), *it = zeros(B * H),
            *ft = zeros(B * H);
    mn_real *ot = zeros(B * H * V);
    size_t gsz[7] = {L * K, L * K, L * V, L, L, B * H * K * V, B * H * K};
    for (i = 0; i < L; i++) fg[i] += 3;                                 // forget gates mostly open
    for (mode = 0; mode < 2; mode++) for (i = 0; i < 5; i++) g[mode][i] = zeros(gsz[i]);
    for (i = 0; i < 7; i++) gc[i] = zeros(gsz[i]);
    if (vopen(dir, "mlstm", "bridge_mlstm")) return -1;
    mn_mlstm_forward_parallel(op, np_, sp, q, k, v, ig, fg, B, T, H, K, V, sc, eps,
                              zeros(mn_mlstm_work_size_parallel(B, T, H)));
    for (mode = 0; mode < 2; mode++)
        mn_mlstm_backward_parallel(g[mode][0], g[mode][1], g[mode][2], g[mode][3], g[mode][4], dout, q, k, v, ig, fg,
                B, T,
                                   H, K, V, sc, eps, mode, zeros(mn_mlstm_work_size_parallel(B, T, H)));
    mn_mlstm_forward_recurrent(orr, nr, sr, Cr, nrt, mr, q, k, v, ig, fg, C0, n0, m0, B, T, H, K, V, sc, eps);
    mn_mlstm_forward(oc, nc, scc, Cc, nct, mc, q, k, v, ig, fg, C0, n0, m0, B, T, H, K, V, sc, eps, CH,
                     zeros(mn_mlstm_work_size(B, T, H, K, V, CH)));
    mn_mlstm_backward(gc[0], gc[1], gc[2], gc[3], gc[4], gc[5], gc[6], dout, q, k, v, ig, fg, C0, n0, m0, B, T, H, K, V,
                      sc, eps, CH, MN_MLSTM_BW_EXACT, zeros(mn_mlstm_work_size(B, T, H, K, V, CH)));
    for (t = 0; t < T; t++) {
        take_t(qt, q, t, K); take_t(kt, k, t, K); take_t(vt, v, t, V); take_t(it, ig, t, 1); take_t(ft, fg, t, 1);
        mn_mlstm_step(ot, Cs, ns, ms, qt, kt, vt, it, ft, B, H, K, V, sc, eps);
        put_t(os, ot, t, V);
    }
    vput("q", q, 4, B, T, H, K); vput("k", k, 4, B, T, H, K); vput("v", v, 4, B, T, H, V);
    vput("ig", ig, 3, B, T, H); vput("fg", fg, 3, B, T, H);
    vput("C0", C0, 4, B, H, K, V); vput("n0", n0, 3, B, H, K); vput("m0", m0, 2, B, H); vput("do", dout, 4, B, T, H, V);
    vput("par.out", op, 4, B, T, H, V); vput("par.norm", np_, 3, B, T, H); vput("par.stab", sp, 3, B, T, H);
    for (mode = 0; mode < 2; mode++) {
        char nm[32]; const char* gn[5] = {"dq", "dk", "dv", "di", "df"};
        for (i = 0; i < 5; i++) {
            snprintf(nm, sizeof nm, "par%d.%s", mode, gn[i]);
            if (i < 2) vput(nm, g[mode][i], 4, B, T, H, K);
            else if (i == 2) vput(nm, g[mode][i], 4, B, T, H, V);
            else vput(nm, g[mode][i], 3, B, T, H);
        }
    }
    vput("rec.out", orr, 4, B, T, H, V); vput("rec.norm", nr, 3, B, T, H); vput("rec.stab", sr, 3, B, T, H);
    vput("rec.Ct", Cr, 4, B, H, K, V); vput("rec.nt", nrt, 3, B, H, K); vput("rec.mt", mr, 2, B, H);
    vput("chunk.out", oc, 4, B, T, H, V); vput("chunk.norm", nc, 3, B, T, H); vput("chunk.stab", scc, 3, B, T, H);
    vput("chunk.Ct", Cc, 4, B, H, K, V); vput("chunk.nt", nct, 3, B, H, K); vput("chunk.mt", mc, 2, B, H);
    vput("chunk.dq", gc[0], 4, B, T, H, K); vput("chunk.dk", gc[1], 4, B, T, H, K); vput("chunk.dv", gc[2], 4, B, T,
            H, V);
    vput("chunk.di", gc[3], 3, B, T, H); vput("chunk.df", gc[4], 3, B, T, H); vput("chunk.dC0", gc[5], 4, B, H, K, V);
    vput("chunk.dn0", gc[6], 3, B, H, K);
    vput("step.out", os, 4, B, T, H, V); vput("step.C", Cs, 4, B, H, K, V); vput("step.n", ns, 3, B, H, K);
    vput("step.m", ms, 2, B, H);
    return vclose();
}

static int case_slstm(const char* dir) {
    enum { NH = 2, DH = 3, HD = NH * DH };
    size_t t, i;
    mn_real *x = rnd(B * T * 4 * HD, 'n'), *R = rnd(NH * 4 * DH * DH, 'n'), *bb = rnd(4 * HD, 'n'), *s0[4],
            *dy = rnd(B * T * HD,
                    'n');
    mn_real *y = zeros(B * T * HD), *c = zeros(B * T * HD), *n = zeros(B * T * HD), *m = zeros(B * T * HD);
    mn_real *dx = zeros(B * T * 4 * HD), *dR = zeros(NH * 4 * DH * DH), *db = zeros(4 * HD), *dy0 = zeros(B * HD);
    mn_real *dc0 = zeros(B * HD), *dn0 = zeros(B * HD), *ss[4], *ys = zeros(B * T * HD), *xt = zeros(B * 4 * HD);
    size_t w = mn_slstm_work_size(B, NH, DH);
    for (i = 0; i < NH * 4 * DH * DH; i++) R[i] = (mn_real)(0.3 * R[i]);
    for (i = 0; i < 4; i++) { s0[i] = rnd(B * HD, 'n'); ss[i] = copy(s0[i], B * HD); }
    if (vopen(dir, "slstm", "bridge_slstm")) return -1;
    mn_slstm_forward(y, c, n, m, x, R, bb, s0[0], s0[1], s0[2], s0[3], B, T, NH, DH, zeros(w));
    mn_slstm_backward(dx, dR, db, dy0, dc0, dn0, dy, y, c, n, m, x, R, bb, s0[0], s0[1], s0[2], s0[3], B, T, NH, DH,
            zeros(w));
    for (t = 0; t < T; t++) {
        size_t b;
        for (b = 0; b < B; b++) memcpy(xt + b * 4 * HD, x + (b * T + t) * 4 * HD, 4 * HD * sizeof(mn_real));
        mn_slstm_step(ss[0], ss[1], ss[2], ss[3], xt, R, bb, B, NH, DH, zeros(w));
        for (b = 0; b < B; b++) memcpy(ys + (b * T + t) * HD, ss[0] + b * HD, HD * sizeof(mn_real));
    }
    vput("x", x, 3, B, T, 4 * HD); vput("R", R, 3, NH, 4 * DH, DH); vput("b", bb, 1, 4 * HD);
    vput("y0", s0[0], 2, B, HD); vput("c0", s0[1], 2, B, HD); vput("n0", s0[2], 2, B, HD); vput("m0", s0[3], 2, B, HD);
    vput("dy", dy, 3, B, T, HD);
    vput("y", y, 3, B, T, HD); vput("c", c, 3, B, T, HD); vput("n", n, 3, B, T, HD); vput("m", m, 3, B, T, HD);
    vput("dx", dx, 3, B, T, 4 * HD); vput("dR", dR, 3, NH, 4 * DH, DH); vput("db", db, 1, 4 * HD);
    vput("dy0", dy0, 2, B, HD); vput("dc0", dc0, 2, B, HD); vput("dn0", dn0, 2, B, HD);
    vput("step.y", ys, 3, B, T, HD); vput("step.c", ss[1], 2, B, HD); vput("step.n", ss[2], 2, B, HD);
    vput("step.m", ss[3], 2, B, HD);
    return vclose();
}

// Mesa: the chunkwise form and its backward (CG, 8 iterations, textbook), the recurrent form with the
// per-token tolerance, the exact solve and its backward, and the step (tolerance, fla's arithmetic)
static int case_mesa(const char* dir) {
    size_t t, KK = B * H * K * K, KV = B * H * K * V;
    mn_real *q = rnd(L * K, 'n'), *k = rnd(L * K, 'n'), *v = rnd(L * V, 'n'), *g = rnd(L, 'g'), *beta = rnd(L, 's');
    mn_real *lamb = rnd(H * K, 'u'), *hkk0 = zeros(KK), *hkv0 = rnd(KV, 'n'), *dout = rnd(L * V, 'n');
    mn_real *dhkk = rnd(KK, 'n'), *dhkv = rnd(KV, 'n'), *kr = rnd(B * H * K, 'n');
    mn_real *res[3][5], *gr[2][8], *os = zeros(L * V), *qt = zeros(H * K), *kt = zeros(H * K), *vt = zeros(H * V);
    mn_real *gt = zeros(H), *bt = zeros(H);
    mn_real *hks = NULL, *hvs = NULL;
    int its[3][L], itstep[L];
    size_t i, f, gsz[8] = {L * K, L * K, L * V, L, L, H * K, KK, KV};
    mn_mesa_opts oc, orr, oe, os_;
    memset(&oc, 0, sizeof oc); oc.cg_iters = 8; oc.chunk = CH;
    memset(&orr, 0, sizeof orr); orr.cg_iters = 30; orr.cg_tol = 1e-3;
    memset(&oe, 0, sizeof oe); oe.solver = MN_MESA_EXACT;
    memset(&os_, 0, sizeof os_); os_.cg_iters = 5; os_.fla = 1; os_.jacobi = 1;
    l2rows(q, L, K); l2rows(k, L, K); l2rows(kr, B * H, K);
    for (i = 0; i < B * H; i++) {             // an SPD initial H: 0.5 k k^T per head
        size_t a, b2;
        for (a = 0; a < K; a++)
            for (b2 = 0; b2 < K; b2++) hkk0[i * K * K + a * K + b2] = (mn_real)(0.5 * kr[i * K + a] * kr[i * K + b2]);
    }
    for (f = 0; f < 3; f++) {
        res[f][0] = zeros(L * V); res[f][1] = zeros(L * K); res[f][2] = copy(hkk0, KK); res[f][3] = copy(hkv0, KV);
    }
    for (f = 0; f < 2; f++) for (i = 0; i < 8; i++) gr[f][i] = zeros(gsz[i]);
    if (vopen(dir, "mesa", "bridge_mesa")) return -1;
    mn_mesa_forward(res[0][0], res[0][1], its[0], res[0][2], res[0][3], q, k, v, g, beta, lamb, B, T, H, K, V, &oc,
                    zeros(mn_mesa_work_size(B, T, H, K, V, &oc)));
    mn_mesa_backward(gr[0][0], gr[0][1], gr[0][2], gr[0][3], gr[0][4], gr[0][5], gr[0][6], gr[0][7], dout, dhkk, dhkv,
                     res[0][1], q, k, v, g, beta, lamb, hkk0, hkv0, B, T, H, K, V, &oc, zeros(mn_mesa_work_size(B, T,
                             H, K, V, &oc)));
    mn_mesa_forward_recurrent(res[1][0], res[1][1], its[1], res[1][2], res[1][3], q, k, v, g, beta, lamb, B, T, H, K, V,
                              &orr, zeros(mn_mesa_work_size_recurrent(B, T, H, K, V, &orr)));
    mn_mesa_forward_recurrent(res[2][0], res[2][1], its[2], res[2][2], res[2][3], q, k, v, g, beta, lamb, B, T, H, K, V,
                              &oe, zeros(mn_mesa_work_size_recurrent(B, T, H, K, V, &oe)));
    mn_mesa_backward_recurrent(gr[1][0], gr[1][1], gr[1][2], gr[1][3], gr[1][4], gr[1][5], gr[1][6], gr[1][7], dout,
                               dhkk, dhkv, res[2][1], q, k, v, g, beta, lamb, hkk0, hkv0, B, T, H, K, V, &oe,
                               zeros(mn_mesa_work_size_recurrent(B, T, H, K, V, &oe)));
    hks = copy(hkk0, KK); hvs = copy(hkv0, KV);
    for (i = 0; i < B; i++)
        for (t = 0; t < T; t++) {
            size_t r = (i * T + t) * H;
            memcpy(qt, q + r * K, H * K * sizeof(mn_real)); memcpy(kt, k + r * K, H * K * sizeof(mn_real));
            memcpy(vt, v + r * V, H * V * sizeof(mn_real)); memcpy(gt, g + r, H * sizeof(mn_real));
            memcpy(bt, beta + r, H * sizeof(mn_real));
            mn_mesa_step(os + r * V, itstep + r, hks + i * H * K * K, hvs + i * H * K * V, qt, kt, vt, gt, bt, lamb,
                    H, K, V,
                         &os_, zeros(mn_mesa_work_size_recurrent(1, 1, H, K, V, &os_)));
        }
    vput("q", q, 4, B, T, H, K); vput("k", k, 4, B, T, H, K); vput("v", v, 4, B, T, H, V); vput("g", g, 3, B, T, H);
    vput("beta", beta, 3, B, T, H); vput("lamb", lamb, 2, H, K); vput("hkk0", hkk0, 4, B, H, K, K);
    vput("hkv0", hkv0, 4, B, H, K, V); vput("do", dout, 4, B, T, H, V); vput("dhkk", dhkk, 4, B, H, K, K);
    vput("dhkv", dhkv, 4, B, H, K, V);
    for (f = 0; f < 3; f++) {
        const char* p = f == 0 ? "chunk" : f == 1 ? "tol" : "exact";
        char nm[32];
        snprintf(nm, sizeof nm, "%s.out", p); vput(nm, res[f][0], 4, B, T, H, V);
        snprintf(nm, sizeof nm, "%s.xs", p); vput(nm, res[f][1], 4, B, T, H, K);
        snprintf(nm, sizeof nm, "%s.iters", p); vputi(nm, its[f], 3, B, T, H);
        snprintf(nm, sizeof nm, "%s.hkk", p); vput(nm, res[f][2], 4, B, H, K, K);
        snprintf(nm, sizeof nm, "%s.hkv", p); vput(nm, res[f][3], 4, B, H, K, V);
    }
    for (f = 0; f < 2; f++) {
        const char* gn[8] = {"dq", "dk", "dv", "dg", "dbeta", "dlamb", "dhkk0", "dhkv0"};
        char nm[32];
        for (i = 0; i < 8; i++) {
            snprintf(nm, sizeof nm, "%s.%s", f ? "exact" : "chunk", gn[i]);
            if (i < 2) vput(nm, gr[f][i], 4, B, T, H, K);
            else if (i == 2) vput(nm, gr[f][i], 4, B, T, H, V);
            else if (i < 5) vput(nm, gr[f][i], 3, B, T, H);
            else if (i == 5) vput(nm, gr[f][i], 2, H, K);
            else if (i == 6) vput(nm, gr[f][i], 4, B, H, K, K);
            else vput(nm, gr[f][i], 4, B, H, K, V);
        }
    }
    vput("step.out", os, 4, B, T, H, V); vputi("step.iters", itstep, 3, B, T, H);
    vput("step.hkk", hks, 4, B, H, K, K); vput("step.hkv", hvs, 4, B, H, K, V);
    return vclose();
}

// A small hybrid model: the loss, every gradient, one AdamW step, and three decoding steps.
static int case_model(const char* dir) {
    mn_model m; mn_config cfg; mn_state st; mn_real loss, loss2; int tok[2 * 6], tgt[2 * 6], i;
    mn_real logits[2 * 3 * 32];
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab_size = 32; cfg.d_model = 16; cfg.n_layer = 3; cfg.n_head = 2; cfg.max_seq_len = 16;
    cfg.pattern = "mesa,gdn,attn"; cfg.mesa_cg_train = 6; cfg.mesa_chunk = 4; cfg.seed = 7;
    if (mn_model_init(&m, &cfg) != MN_OK) return -1;
    for (i = 0; i < 12; i++) {
        tok[i] = (int)(mn_rng_u32(&rng) % 32);
        tgt[i] = i % 5 == 4 ? -1 : (int)(mn_rng_u32(&rng) % 32);
    }
    if (mn_forward(&m, tok, tgt, 2, 6, &loss) != MN_OK) return -1;
    mn_zero_grad(&m);
    if (mn_backward(&m) != MN_OK) return -1;
    if (vopen(dir, "model", "bridge_model")) return -1;
    vattr("pattern", "%s", cfg.pattern);
    vputi("tokens", tok, 2, 2, 6); vputi("targets", tgt, 2, 2, 6);
    vput("loss", &loss, 1, 1); vput("logits", mn_logits(&m), 3, 2, 6, 32); vput("grads", m.grads, 1, m.n_params);
    if (mn_adamw_step(&m, 1e-2, NULL) != MN_OK || mn_forward(&m, tok, tgt, 2, 6, &loss2) != MN_OK) return -1;
    vput("step1.params", m.params, 1, m.n_params); vput("step1.loss", &loss2, 1, 1);
    if (mn_state_init(&st, &m, 2) != MN_OK) return -1;
    for (i = 0; i < 3; i++) {
        int tk[2]; tk[0] = tok[i]; tk[1] = tok[6 + i];
        if (mn_step(&m, &st, tk, logits + i * 2 * 32) != MN_OK) return -1;
    }
    vput("decode.logits", logits, 3, 3, 2, 32);
    mn_state_free(&st); mn_model_free(&m);
    return vclose();
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: bridge_ref DIR\n"); return 2; }
    mn_rng_seed(&rng, 2024);
    if (case_attn(argv[1], 0) || case_attn(argv[1], 3) || case_gla(argv[1], 0) || case_gla(argv[1], 1) ||
        case_gla(argv[1], K) || case_delta(argv[1], 0) || case_delta(argv[1], 1) || case_ssd(argv[1],
                MN_SSD_LOG_DECAY) ||
        case_ssd(argv[1], MN_SSD_TRANSITION) || case_rglru(argv[1]) || case_mlstm(argv[1]) || case_slstm(argv[1]) ||
        case_mesa(argv[1]) || case_model(argv[1])) {
        fprintf(stderr, "bridge_ref: a case failed\n");
        return 1;
    }
    return 0;
}
