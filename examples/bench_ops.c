// bench_ops: each mixer core op at B=1, T=4096, H=4, D=64 (chunk 64): forward+backward time of the
// recurrent (naive) form and of the chunkwise form, their ratio, and the decode state per head.
// Writes results/bench_ops.md (argv[1]). Inputs: L2-normalised q, k; log-decays in (-0.1, 0);
// beta in (0,1). Median of 3 runs after a warm-up, all cores (each op is parallel over heads).
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
static mn_real *q, *k, *v, *g, *gk, *beta, *dout, *dq, *dk, *dv, *dg, *dbeta, *out, *ht, *work, *states, *lamb, *xs;

static double median3(double a, double b, double c) { return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b)); }
typedef void (*op_fn)(int form);   // form 0: recurrent, 1: chunkwise; forward then backward
static double timed(op_fn f, int form) {
    double t[3]; int r;
    f(form);
    for (r = 0; r < 3; r++) { double t0 = ex_now(); f(form); t[r] = ex_now() - t0; }
    return median3(t[0], t[1], t[2]);
}
static const mn_real* gla_g; static size_t gla_G;
static void op_gla(int form) {
    double s = 1.0 / sqrt((double)D);
    if (form == 0) {
        mn_gla_forward_recurrent(out, ht, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s);
        mn_gla_backward_recurrent(dq, dk, dv, gla_G ? dg : NULL, NULL, work, dout, NULL, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s);
    } else {
        mn_gla_forward(out, ht, work, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s, CH);
        mn_gla_backward(dq, dk, dv, gla_G ? dg : NULL, NULL, work, dout, NULL, q, k, v, gla_g, NULL, B, T, H, D, D, gla_G, s, CH);
    }
}
static const mn_real* delta_g;
static void op_delta(int form) {
    double s = 1.0 / sqrt((double)D);
    if (form == 0) {
        mn_delta_rule_forward_naive(out, ht, states, q, k, v, beta, delta_g, NULL, B, T, H, D, D, s);
        mn_delta_rule_backward_naive(dq, dk, dv, dbeta, delta_g ? dg : NULL, NULL, work, dout, NULL, states, q, k, v, beta, delta_g, B, T, H, D, D, s);
    } else {
        mn_delta_rule_forward(out, ht, states, work, q, k, v, beta, delta_g, NULL, B, T, H, D, D, CH, s);
        mn_delta_rule_backward(dq, dk, dv, dbeta, delta_g ? dg : NULL, NULL, work, dout, NULL, states, q, k, v, beta, delta_g, B, T, H, D, D, CH, s);
    }
}
static void op_ssd(int form) {   // X = v, A = g, B = k, C = q (P = N = D)
    if (form == 0) {
        mn_ssd_forward_recurrent(out, ht, v, g, k, q, NULL, B, T, H, D, D, MN_SSD_LOG_DECAY);
        mn_ssd_backward_recurrent(dv, dg, dk, dq, NULL, work, dout, NULL, v, g, k, q, NULL, B, T, H, D, D, MN_SSD_LOG_DECAY);
    } else {
        mn_ssd_forward(out, ht, work, v, g, k, q, NULL, B, T, H, D, D, CH);
        mn_ssd_backward(dv, dg, dk, dq, NULL, work, dout, NULL, v, g, k, q, NULL, B, T, H, D, D, CH);
    }
}
static void op_mesa(int form) {  // CG 10, textbook arithmetic
    mn_mesa_opts o; memset(&o, 0, sizeof o); o.cg_iters = 10; o.chunk = CH;
    if (form == 0) {
        mn_mesa_recurrent_forward(out, xs, NULL, NULL, NULL, q, k, v, g, beta, lamb, B, T, H, D, D, &o, work);
        mn_mesa_recurrent_backward(dq, dk, dv, dg, dbeta, lamb + H * D, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lamb, NULL, NULL, B, T, H, D, D, &o, work);
    } else {
        mn_mesa_chunk_forward(out, xs, NULL, NULL, NULL, q, k, v, g, beta, lamb, B, T, H, D, D, &o, work);
        mn_mesa_chunk_backward(dq, dk, dv, dg, dbeta, lamb + H * D, NULL, NULL, dout, NULL, NULL, xs, q, k, v, g, beta, lamb, NULL, NULL, B, T, H, D, D, &o, work);
    }
}

int main(int argc, char** argv) {
    const char* outpath = argc > 1 ? argv[1] : "results/bench_ops.md";
    size_t i, wsz;
    mn_rng r; mn_rng_seed(&r, 7);
    mn_mesa_opts mo; memset(&mo, 0, sizeof mo); mo.chunk = CH;
    // one workspace big enough for every op's forms
    wsz = mn_gla_work_size(B, T, H, D, D, CH);
    if (mn_gla_recurrent_work_size(T, D, D) * H > wsz) wsz = mn_gla_recurrent_work_size(T, D, D) * H;
    if (mn_delta_rule_work_size(B, H, D, D, CH) > wsz) wsz = mn_delta_rule_work_size(B, H, D, D, CH);
    if (mn_ssd_work_size(B, T, H, D, D, CH) > wsz) wsz = mn_ssd_work_size(B, T, H, D, D, CH);
    if (mn_ssd_recurrent_work_size(T, D, D) * H > wsz) wsz = mn_ssd_recurrent_work_size(T, D, D) * H;
    if (mn_mesa_work_size(MN_MESA_FORM_CHUNK, B, T, H, D, D, &mo) > wsz) wsz = mn_mesa_work_size(MN_MESA_FORM_CHUNK, B, T, H, D, D, &mo);
    if (mn_mesa_work_size(MN_MESA_FORM_RECURRENT_BWD, B, T, H, D, D, &mo) > wsz) wsz = mn_mesa_work_size(MN_MESA_FORM_RECURRENT_BWD, B, T, H, D, D, &mo);
    if ((size_t)B * H * D * D > wsz) wsz = (size_t)B * H * D * D;
    #define ALLOC(p, n) p = (mn_real*)calloc((n), sizeof(mn_real))
    ALLOC(q, N * D); ALLOC(k, N * D); ALLOC(v, N * D); ALLOC(g, N); ALLOC(gk, N * D); ALLOC(beta, N); ALLOC(dout, N * D);
    ALLOC(dq, N * D); ALLOC(dk, N * D); ALLOC(dv, N * D); ALLOC(dg, N * D); ALLOC(dbeta, N); ALLOC(out, N * D); ALLOC(ht, B * H * D * D);
    ALLOC(work, wsz); ALLOC(states, (size_t)B * H * T * D * D); ALLOC(lamb, 2 * H * D); ALLOC(xs, N * D);
    if (!q || !work || !states || !xs) { fprintf(stderr, "bench_ops: out of memory\n"); return 1; }
    for (i = 0; i < N; i++) {
        size_t d; double sq = 0, sk = 0;
        for (d = 0; d < D; d++) { q[i * D + d] = (mn_real)mn_rng_normal(&r); k[i * D + d] = (mn_real)mn_rng_normal(&r); v[i * D + d] = (mn_real)mn_rng_normal(&r);
                                  dout[i * D + d] = (mn_real)mn_rng_normal(&r); gk[i * D + d] = (mn_real)(-0.1 * mn_rng_uniform(&r)); }
        for (d = 0; d < D; d++) { sq += (double)q[i * D + d] * q[i * D + d]; sk += (double)k[i * D + d] * k[i * D + d]; }
        for (d = 0; d < D; d++) { q[i * D + d] = (mn_real)(q[i * D + d] / sqrt(sq)); k[i * D + d] = (mn_real)(k[i * D + d] / sqrt(sk)); }
        g[i] = (mn_real)(-0.1 * mn_rng_uniform(&r)); beta[i] = (mn_real)mn_rng_uniform(&r);
    }
    for (i = 0; i < H * D; i++) lamb[i] = (mn_real)(0.25 + 0.75 * mn_rng_uniform(&r));
    struct { const char* name; op_fn f; const mn_real* gsel; size_t G; size_t state; } ops[] = {
        { "linear attention", op_gla, NULL, 0, D * D }, { "simple GLA", op_gla, NULL, 1, D * D }, { "GLA", op_gla, NULL, D, D * D },
        { "DeltaNet", op_delta, NULL, 0, D * D }, { "Gated DeltaNet", op_delta, NULL, 1, D * D },
        { "Mamba-2 SSD (P = N = 64)", op_ssd, NULL, 0, D * D }, { "Mesa (CG 10)", op_mesa, NULL, 0, 2 * D * D },
    };
    char table[4096]; size_t len = 0, n_ops = sizeof ops / sizeof ops[0];
    len += (size_t)snprintf(table + len, sizeof table - len, "| op | recurrent fwd+bwd ms | chunkwise fwd+bwd ms | recurrent / chunkwise | decode state per head |\n|---|---|---|---|---|\n");
    for (i = 0; i < n_ops; i++) {
        gla_G = ops[i].G; gla_g = ops[i].G == 0 ? NULL : ops[i].G == 1 ? g : gk; delta_g = ops[i].G ? g : NULL;
        fprintf(stderr, "%s...\n", ops[i].name);
        double tr = timed(ops[i].f, 0), tc = timed(ops[i].f, 1);
        len += (size_t)snprintf(table + len, sizeof table - len, "| %s | %.1f | %.1f | %.2f | %zu B |\n", ops[i].name, tr * 1e3, tc * 1e3, tr / tc, ops[i].state * sizeof(float));
    }
    printf("%s", table);
    char when[64]; time_t now = time(NULL); strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    struct utsname u; uname(&u);
    FILE* f = fopen(outpath, "w");
    if (f) {
        fprintf(f, "# mesanet benchmark: the mixer core ops\n\nMeasured %s on %s %s (%ld cores online). Command: `./build/bench_ops %s` (part of `make bench`).\n\n"
                   "B=1, T=4096, H=4, Dk=Dv=64, chunk 64, float; forward + backward of the core op only (no projections), median of 3 after a warm-up.\n"
                   "Recurrent = the naive per-token form kept as the reference; chunkwise = the matmul form used in training.\n"
                   "Decode state per head in float32 bytes (Mesa keeps H (Dk x Dk) and S (Dk x Dv)).\n"
                   "Not in this table yet: mLSTM (chunkwise vs parallel), sLSTM and RG-LRU (recurrent only), attention.\n\n%s",
                when, u.machine, u.release, sysconf(_SC_NPROCESSORS_ONLN), outpath, table);
        fclose(f);
    }
    return 0;
}
