// bench_ops: each mixer core op at B=1, T=4096, H=4, D=64 (chunk 64): forward+backward time of two
// forms of the op (the naive one kept as the reference, and the fast one used in training), their
// ratio, and the decode state per head. Writes results/bench_ops.md (argv[1]). Inputs: L2-normalised
// q, k; log-decays in (-0.1, 0); beta in (0,1); mLSTM forget pre-activations 3 + N(0,1) (decay ~0.95).
// Median of 3 runs after a warm-up (one run for forms slower than 10 s), all cores (the fast forms are
// parallel over heads).
#define MESANET_IMPLEMENTATION
#include "common.h"
#include "../mesanet.h"
#include <sys/utsname.h>

#define B 1
#define T 4096
#define H 4
#define D 64
#define CH 64
#define N (B * T * H)
#define W (H * D)      // RG-LRU width and sLSTM units: H blocks (heads) of D channels
static mn_real *q, *k, *v, *g, *gk, *beta, *dout, *dq, *dk, *dv, *dg, *dbeta, *out, *ht, *work, *states, *lamb, *xs;
static mn_real *ig, *fg, *di, *df, *norm, *stab, *Cst, *nst, *mst;        // mLSTM gates, outputs, state
static mn_real *sx, *dsx, *sR, *dsR, *sb, *dsb, *sy, *sc, *sn, *sm, *dsy; // sLSTM: x (T,4W), R, b, states (T,W)
static mn_real *ra, *dra, *rw, *drw, *rb, *drb, *rgates;                 // RG-LRU: a_param, gate weights (x2),
                                                                          // biases (x2), gates
static mn_real *att, *datt;                                               // attention probabilities (H,T,T)

static double median3(double a, double b, double c) {
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}
typedef void (*op_fn)(int form);   // form 0: recurrent (naive), 1: chunkwise (fast); forward then backward
// Median of 3 runs after a warm-up; a form whose warm-up run takes over 10 s (the O(T^2) references)
// is timed by that one run, which keeps the whole benchmark to a few minutes.
static double timed(op_fn f, int form) {
    double t[3], t0 = ex_now(); int r;
    f(form);
    t[0] = ex_now() - t0;
    if (t[0] > 10.0) return t[0];
    for (r = 0; r < 3; r++) { t0 = ex_now(); f(form); t[r] = ex_now() - t0; }
    return median3(t[0], t[1], t[2]);
}
static const mn_real* gla_g; static size_t gla_G;
static void op_gla(int form) {
    double s = 1.0 / sqrt((double)D);
    if (form == 0) {
        mn_gla_forward_recurrent(out, ht, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s);
        mn_gla_backward_recurrent(dq, dk, dv, gla_G ? dg : NULL, NULL, dout, NULL, q, k, v, gla_g, NULL, B, T, H, D, D,
                                  gla_G, s, work);
    } else {
        mn_gla_forward(out, ht, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s, CH, work);
        mn_gla_backward(dq, dk, dv, gla_G ? dg : NULL, NULL, dout, NULL, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s,
                        CH, work);
    }
}
static const mn_real* delta_g;
static void op_delta(int form) {
    double s = 1.0 / sqrt((double)D);
    if (form == 0) {
        mn_delta_rule_forward_naive(out, ht, states, q, k, v, beta, delta_g, NULL, B, T, H, D, D, s);
        mn_delta_rule_backward_naive(dq, dk, dv, dbeta, delta_g ? dg : NULL, NULL, work, dout, NULL, states, q, k, v,
                                     beta, delta_g, B, T, H, D, D, s);
    } else {
        mn_delta_rule_forward(out, ht, states, q, k, v, beta, delta_g, NULL, B, T, H, D, D, CH, s, work);
        mn_delta_rule_backward(dq, dk, dv, dbeta, delta_g ? dg : NULL, NULL, dout, NULL, states, q, k, v, beta, delta_g,
                               B, T, H, D, D, CH, s, work);
    }
}
static void op_ssd(int form) {   // X = v, A = g, B = k, C = q (P = N = D)
    if (form == 0) {
        mn_ssd_forward_recurrent(out, ht, v, g, k, q, NULL, B, T, H, D, D, MN_SSD_LOG_DECAY);
        mn_ssd_backward_recurrent(dv, dg, dk, dq, NULL, dout, NULL, v, g, k, q, NULL, B, T, H, D, D, MN_SSD_LOG_DECAY,
                                  work);
    } else {
        mn_ssd_forward(out, ht, v, g, k, q, NULL, B, T, H, D, D, CH, work);
        mn_ssd_backward(dv, dg, dk, dq, NULL, dout, NULL, v, g, k, q, NULL, B, T, H, D, D, CH, work);
    }
}
static void op_mesa(int form) {  // CG 10, textbook arithmetic
    mn_mesa_opts o; memset(&o, 0, sizeof o); o.cg_iters = 10; o.chunk = CH;
    if (form == 0) {
        mn_mesa_forward_recurrent(out, xs, NULL, NULL, NULL, q, k, v, g, beta, lamb, B, T, H, D, D, &o, work);
        mn_mesa_backward_recurrent(dq, dk, dv, dg, dbeta, lamb + H * D, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g,
                                   beta, lamb, NULL, NULL, B, T, H, D, D, &o, work);
    } else {
        mn_mesa_forward(out, xs, NULL, NULL, NULL, q, k, v, g, beta, lamb, B, T, H, D, D, &o, work);
        mn_mesa_backward(dq, dk, dv, dg, dbeta, lamb + H * D, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lamb,
                         NULL, NULL, B, T, H, D, D, &o, work);
    }
}
// mLSTM, exact backward as the layer trains: form 0 recurrent forward only (the form has no backward),
// 1 chunkwise forward only, 2 parallel forward+backward, 3 chunkwise forward+backward.
static void op_mlstm(int form) {
    double s = 1.0 / sqrt((double)D);
    if (form == 0)
        mn_mlstm_forward_recurrent(out, norm, stab, Cst, nst, mst, q, k, v, ig, fg, NULL, NULL, NULL, B, T, H, D, D, s,
                                   1e-6);
    if (form == 1 || form == 3)
        mn_mlstm_forward(out, norm, stab, Cst, nst, mst, q, k, v, ig, fg, NULL, NULL, NULL, B, T, H, D, D, s, 1e-6, CH,
                         work);
    if (form == 3)
        mn_mlstm_backward(dq, dk, dv, di, df, NULL, NULL, dout, q, k, v, ig, fg, NULL, NULL, NULL, B, T, H, D, D, s,
                          1e-6, CH, MN_MLSTM_BW_EXACT, work);
    if (form == 2) {
        mn_mlstm_forward_parallel(out, norm, stab, q, k, v, ig, fg, B, T, H, D, D, s, 1e-6, work);
        mn_mlstm_backward_parallel(dq, dk, dv, di, df, dout, q, k, v, ig, fg, B, T, H, D, D, s, 1e-6, MN_MLSTM_BW_EXACT,
                                   work);
    }
}
static void op_slstm(int form) {   // its only form: the recurrence, H heads of D units
    MN_UNUSED(form);
    mn_slstm_forward(sy, sc, sn, sm, sx, sR, sb, NULL, NULL, NULL, NULL, B, T, H, D, work);
    mn_slstm_backward(dsx, dsR, dsb, NULL, NULL, NULL, dsy, sy, sc, sn, sm, sx, sR, sb, NULL, NULL, NULL, NULL, B, T, H,
                      D, work);
}
static void op_rglru(int form) {   // its only form: the sequential scan, width W in H gate blocks, c = 8
    MN_UNUSED(form);
    mn_rglru_forward(out, ht, rgates, v, ra, rw, rb, rw + H * D * D, rb + W, NULL, NULL, B, T, W, H, 8.0);
    mn_rglru_backward(dv, dra, drw, drb, drw + H * D * D, drb + W, NULL, dout, NULL, out, rgates, v, ra, rw,
                      rw + H * D * D, NULL, NULL, B, T, W, H, 8.0, work);
}
static void op_attn(int form) {    // form 0: naive online softmax (lse in xs), 1: matrix form (T x T probabilities)
    double s = 1.0 / sqrt((double)D);
    if (form == 0) {
        mn_attention_forward_naive(out, xs, q, k, v, B, T, H, D, D, 0, s);
        mn_attention_backward_naive(dq, dk, dv, dout, out, xs, q, k, v, B, T, H, D, D, 0, s);
    } else {
        mn_attention_forward(out, att, q, k, v, B, T, H, D, D, 0, s);
        mn_attention_backward(dq, dk, dv, dout, att, q, k, v, B, T, H, D, D, 0, s, datt);
    }
}

int main(int argc, char** argv) {
    const char* outpath = argc > 1 ? argv[1] : "results/bench_ops.md";
    size_t i, wsz;
    mn_rng r; mn_rng_seed(&r, 7);
    mn_mesa_opts mo; memset(&mo, 0, sizeof mo); mo.chunk = CH;
    // one workspace big enough for every op's forms
    wsz = mn_gla_work_size(B, T, H, D, D, CH);
    if (mn_gla_work_size_recurrent(T, D, D) * H > wsz) wsz = mn_gla_work_size_recurrent(T, D, D) * H;
    if (mn_delta_rule_work_size(B, H, D, D, CH) > wsz) wsz = mn_delta_rule_work_size(B, H, D, D, CH);
    if (mn_ssd_work_size(B, T, H, D, D, CH) > wsz) wsz = mn_ssd_work_size(B, T, H, D, D, CH);
    if (mn_ssd_work_size_recurrent(T, D, D) * H > wsz) wsz = mn_ssd_work_size_recurrent(T, D, D) * H;
    if (mn_mesa_work_size(B, T, H, D, D, &mo) > wsz) wsz = mn_mesa_work_size(B, T, H, D, D, &mo);
    if (mn_mesa_work_size_recurrent(B, T, H, D, D, &mo) > wsz) wsz = mn_mesa_work_size_recurrent(B, T, H, D, D, &mo);
    if ((size_t)B * H * D * D > wsz) wsz = (size_t)B * H * D * D;
    if (mn_mlstm_work_size(B, T, H, D, D, CH) > wsz) wsz = mn_mlstm_work_size(B, T, H, D, D, CH);
    if (mn_mlstm_work_size_parallel(B, T, H) > wsz) wsz = mn_mlstm_work_size_parallel(B, T, H);
    if (mn_slstm_work_size(B, H, D) > wsz) wsz = mn_slstm_work_size(B, H, D);
    if (mn_rglru_work_size(B, T, W) > wsz) wsz = mn_rglru_work_size(B, T, W);
    #define ALLOC(p, n) p = (mn_real*)calloc((n), sizeof(mn_real))
    ALLOC(q, N * D); ALLOC(k, N * D); ALLOC(v, N * D); ALLOC(g, N); ALLOC(gk, N * D); ALLOC(beta, N);
    ALLOC(dout, N * D);
    ALLOC(dq, N * D); ALLOC(dk, N * D); ALLOC(dv, N * D); ALLOC(dg, N * D); ALLOC(dbeta, N); ALLOC(out, N * D);
    ALLOC(ht, B * H * D * D);
    ALLOC(work, wsz); ALLOC(states, (size_t)B * H * T * D * D); ALLOC(lamb, 2 * H * D); ALLOC(xs, N * D);
    ALLOC(ig, N); ALLOC(fg, N); ALLOC(di, N); ALLOC(df, N); ALLOC(norm, N); ALLOC(stab, N); ALLOC(Cst, B * H * D * D);
    ALLOC(nst, B * H * D); ALLOC(mst, B * H);
    ALLOC(sx, B * T * 4 * W); ALLOC(dsx, B * T * 4 * W); ALLOC(sR, 4 * H * D * D); ALLOC(dsR, 4 * H * D * D);
    ALLOC(sb, 4 * W); ALLOC(dsb, 4 * W);
    ALLOC(sy, B * T * W); ALLOC(sc, B * T * W); ALLOC(sn, B * T * W); ALLOC(sm, B * T * W); ALLOC(dsy, B * T * W);
    ALLOC(ra, W); ALLOC(dra, W); ALLOC(rw, 2 * H * D * D); ALLOC(drw, 2 * H * D * D); ALLOC(rb, 2 * W);
    ALLOC(drb, 2 * W); ALLOC(rgates, 2 * B * T * W);
    ALLOC(att, (size_t)B * H * T * T); ALLOC(datt, (size_t)B * H * T * T);
    if (!q || !work || !states || !xs || !sx || !rgates || !att || !datt) {
        fprintf(stderr, "bench_ops: out of memory\n"); return 1;
    }
    for (i = 0; i < N; i++) {
        size_t d; double sq = 0, sk = 0;
        for (d = 0; d < D; d++) {
            q[i * D + d] = (mn_real)mn_rng_normal(&r); k[i * D + d] = (mn_real)mn_rng_normal(&r);
            v[i * D + d] = (mn_real)mn_rng_normal(&r);
            dout[i * D + d] = (mn_real)mn_rng_normal(&r); gk[i * D + d] = (mn_real)(-0.1 * mn_rng_uniform(&r));
        }
        for (d = 0; d < D; d++) {
            sq += (double)q[i * D + d] * q[i * D + d]; sk += (double)k[i * D + d] * k[i * D + d];
        }
        for (d = 0; d < D; d++) {
            q[i * D + d] = (mn_real)(q[i * D + d] / sqrt(sq)); k[i * D + d] = (mn_real)(k[i * D + d] / sqrt(sk));
        }
        g[i] = (mn_real)(-0.1 * mn_rng_uniform(&r)); beta[i] = (mn_real)mn_rng_uniform(&r);
    }
    for (i = 0; i < H * D; i++) lamb[i] = (mn_real)(0.25 + 0.75 * mn_rng_uniform(&r));
    for (i = 0; i < N; i++) { ig[i] = (mn_real)mn_rng_normal(&r); fg[i] = (mn_real)(3.0 + mn_rng_normal(&r)); }
    // sLSTM: gate inputs N(0,1), recurrent weights N(0, 1/D); RG-LRU: weights N(0, 1/D), a_param N(0,1)
    for (i = 0; i < (size_t)B * T * 4 * W; i++) sx[i] = (mn_real)mn_rng_normal(&r);
    for (i = 0; i < (size_t)B * T * W; i++) dsy[i] = (mn_real)mn_rng_normal(&r);
    for (i = 0; i < 4 * H * D * D; i++) sR[i] = (mn_real)(mn_rng_normal(&r) / sqrt((double)D));
    for (i = 0; i < 2 * H * D * D; i++) rw[i] = (mn_real)(mn_rng_normal(&r) / sqrt((double)D));
    for (i = 0; i < W; i++) ra[i] = (mn_real)mn_rng_normal(&r);
    // each row: two forms of one op (fb < 0: the op has one form), and the decode state per head
    char kv[64];
    snprintf(kv, sizeof kv, "%zu B at T = %d (KV cache, grows with T)", (size_t)2 * T * D * sizeof(float), T);
    struct {
        const char* name; op_fn f; size_t G; int fa; const char* na; int fb; const char* nb; size_t state;
        const char* state_note;
    } ops[] = {
        { "linear attention", op_gla, 0, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "simple GLA", op_gla, 1, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "GLA", op_gla, D, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "DeltaNet", op_delta, 0, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "Gated DeltaNet", op_delta, 1, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "Mamba-2 SSD (P = N = 64)", op_ssd, 0, 0, "recurrent", 1, "chunkwise", D * D, NULL },
        { "Mesa (CG 10)", op_mesa, 0, 0, "recurrent", 1, "chunkwise", 2 * D * D, NULL },
        { "mLSTM (forward only)", op_mlstm, 0, 0, "recurrent", 1, "chunkwise", D * D + D + 1, NULL },
        { "mLSTM", op_mlstm, 0, 2, "parallel", 3, "chunkwise", D * D + D + 1, NULL },
        { "sLSTM (NH = 4, Dh = 64)", op_slstm, 0, 0, "recurrent", -1, "-", 4 * D, NULL },
        { "RG-LRU (W = 256, 4 blocks)", op_rglru, 0, 0, "scan", -1, "-", D, NULL },
        { "softmax attention", op_attn, 0, 0, "naive", 1, "matrix", 0, kv },
    };
    char table[8192]; size_t len = 0, n_ops = sizeof ops / sizeof ops[0];
    len += (size_t)snprintf(table + len, sizeof table - len,
                            "| op | form A | A fwd+bwd ms | form B | B fwd+bwd ms | A / B | decode state per head |\n"
                            "|---|---|---|---|---|---|---|\n");
    for (i = 0; i < n_ops; i++) {
        char st[96], tb[32], ratio[32];
        gla_G = ops[i].G; gla_g = ops[i].G == 0 ? NULL : ops[i].G == 1 ? g : gk; delta_g = ops[i].G ? g : NULL;
        fprintf(stderr, "%s...\n", ops[i].name);
        double ta = timed(ops[i].f, ops[i].fa), tb_s = ops[i].fb >= 0 ? timed(ops[i].f, ops[i].fb) : 0;
        if (ops[i].fb >= 0) {
            snprintf(tb, sizeof tb, "%.1f", tb_s * 1e3); snprintf(ratio, sizeof ratio, "%.2f", ta / tb_s);
        }
        else { snprintf(tb, sizeof tb, "-"); snprintf(ratio, sizeof ratio, "-"); }
        if (ops[i].state_note) snprintf(st, sizeof st, "%s", ops[i].state_note);
        else snprintf(st, sizeof st, "%zu B", ops[i].state * sizeof(float));
        len += (size_t)snprintf(table + len, sizeof table - len, "| %s | %s | %.1f | %s | %s | %s | %s |\n",
                                ops[i].name, ops[i].na, ta * 1e3, ops[i].nb, tb, ratio, st);
    }
    printf("%s", table);
    char when[64]; time_t now = time(NULL); strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    struct utsname u; uname(&u);
    FILE* f = fopen(outpath, "w");
    if (f) {
        fprintf(f, "# mesanet benchmark: the mixer core ops\n\n"
                   "Measured %s on %s %s (%ld cores online). Command: `./build/bench_ops %s` "
                   "(part of `make bench`).\n\n"
                   "B=1, T=4096, H=4, Dk=Dv=64, chunk 64, float; forward + backward of the core op only "
                   "(no projections), median of 3 after a warm-up (a single run for forms slower than 10 s); "
                   "timings are noisy (shared machine).\n"
                   "Recurrent = the naive per-token form kept as the reference; "
                   "chunkwise = the matmul form used in training; parallel (mLSTM) and naive\n"
                   "(attention, online softmax, one query at a time) = the O(T^2) references; "
                   "matrix = attention with the T x T probabilities in gemms.\n"
                   "mLSTM's recurrent form has no backward, so its first row compares forward passes only. "
                   "sLSTM and RG-LRU have one form (the recurrence).\n"
                   "Decode state per head in float32 bytes (Mesa keeps H (Dk x Dk) and S (Dk x Dv); "
                   "mLSTM C, n, m; sLSTM c, n, m, h; RG-LRU h).\n\n%s",
                when, u.machine, u.release, sysconf(_SC_NPROCESSORS_ONLN), outpath, table);
        fclose(f);
    }
    return 0;
}
